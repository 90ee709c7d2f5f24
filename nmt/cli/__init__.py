"""The typer command-line interface: argument parsing and wiring only."""

import os
import signal
import sys
import threading

from nmt.ops.primitive_cache import check_primitive_caches


def _interrupted(signum: int, frame: object) -> None:
    """SIGINT while the app imports: exit at once with the shell's status for it."""
    os._exit(130)


def main() -> None:
    """Entry point of the ``nmt`` console command and of ``python -m nmt``: the typer app
    (:func:`nmt.cli.app.main`), imported here under a SIGINT handler that exits with
    status 130 at once.

    A Ctrl-C in the seconds torch and numpy take to import, raised there as
    KeyboardInterrupt, was swallowed by a lazy loader (the command went on), aborted C++
    code (``terminate called``), or left numpy half imported (an ImportError or a
    RecursionError traceback). Nothing has been written by then, so nothing is lost by not
    unwinding. A SIGINT that is ignored (a background job) stays ignored; after the import
    Ctrl-C raises KeyboardInterrupt again, which the commands handle.

    The bf16 kernel caches' variables are checked first (one line, exit 2): torch's ideep
    crashes the process on some values (:mod:`nmt.ops.primitive_cache`).
    """
    try:
        check_primitive_caches()
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        raise SystemExit(2) from None
    # signal handlers can be set from the main thread only (an embedding caller may differ)
    default = threading.current_thread() is threading.main_thread() and (
        signal.getsignal(signal.SIGINT) is signal.default_int_handler
    )
    if default:
        signal.signal(signal.SIGINT, _interrupted)
    try:
        from nmt.cli.app import main as run
    finally:
        if default:
            signal.signal(signal.SIGINT, signal.default_int_handler)
    run()
