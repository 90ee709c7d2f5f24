"""The typer command-line interface: argument parsing and wiring only."""

import sys


def main() -> None:
    """Entry point of the ``nmt`` console command and of ``python -m nmt``: the typer app
    (:func:`nmt.cli.app.main`), imported here so that a Ctrl-C during the seconds torch
    takes to import ends quietly with exit status 130, as one does later (Click's handling),
    not with a traceback."""
    try:
        from nmt.cli.app import main as run
    except KeyboardInterrupt:
        sys.exit(130)
    run()
