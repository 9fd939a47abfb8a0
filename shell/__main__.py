"""``python -m shell ...`` runs the command line, the same as ``ppo-core ...`` (see shell/cli.py)."""

from shell.cli import entry_point

entry_point()
