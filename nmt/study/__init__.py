"""The length study (``nmt study``): its plan, the decoding of its test sets, the archive of
its records and the Markdown report; ``nmt/commands/study.py`` composes them."""
