"""What the search processes' fork server imports before anything else (its preload):
SIGINT ignored, then nmt.inference.search_processes (torch and nmt, once for all workers).

A terminal's Ctrl-C reaches every process of the command's group, the fork server too.
Python's fork server ignores SIGINT only once its preload is imported, and importing torch
takes a second or two: a Ctrl-C then killed the server with a KeyboardInterrupt traceback,
and the command, its workers gone, reported a broken pool (or, through the EOF on the
server's pipe, a damaged input). The command itself handles the Ctrl-C and ends the
workers; the server exits when the command does. Imported nowhere else.
"""

import signal

signal.signal(signal.SIGINT, signal.SIG_IGN)

import nmt.inference.search_processes  # noqa: E402,F401  (after the signal, on purpose)
