"""Main entry point: ``python -m nmt`` runs the ``nmt`` command."""

from nmt.cli import main

main()
