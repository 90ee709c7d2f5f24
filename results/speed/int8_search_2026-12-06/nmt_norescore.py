"""Runs the nmt CLI with the fp32 rescoring of int8 searches turned off (measurement only)."""
import sys, torch
import nmt.inference.search as S
S.autocast_on = lambda dev: torch.is_autocast_enabled(dev.type)
from nmt.cli.app import main
sys.argv[0] = "nmt"
main()
