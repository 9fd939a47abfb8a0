"""``python main.py ...`` runs the package's command line, the same as ``ppo-core ...`` (see shell/cli.py).

    python main.py --config pendulum.toml
"""

from shell.cli import entry_point

if __name__ == "__main__":
    entry_point()
