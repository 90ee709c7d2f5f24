"""The typer command-line interface: argument parsing and wiring only."""
