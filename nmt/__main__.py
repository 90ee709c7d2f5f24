"""Main entry point: ``python -m nmt`` runs the ``nmt`` command."""

from nmt.cli.app import main

main()
