"""Command line: ``python main.py --config pendulum.toml [--seed N] [--set section.key=value ...]``.

Parses arguments, loads the config and calls the shell. Progress goes to
stderr; the last stdout line is the JSON summary. Exit codes: 0 success,
1 failure during training, 2 bad input at start-up.
"""

from __future__ import annotations

import argparse
import json
import sys

from shell.errors import ConfigError, TrainingError


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2, as for every other bad input
        raise ConfigError(f"{self.prog}: {message}")


def _positive_int(text: str) -> int:
    try:
        value = int(text.replace("_", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {value}")
    return value


def _non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="main.py", description="Train PPO on a gymnasium env.")
    parser.add_argument("--config", help="config file; also looked up in configs/ ('.toml' optional)")
    parser.add_argument("--seed", type=_non_negative_int, help="run.seed")
    parser.add_argument("--total-timesteps", type=_positive_int, help="run.total_timesteps (global env steps)")
    parser.add_argument("--device", choices=("cpu", "cuda", "auto"), help="run.device")
    parser.add_argument("--run-dir", help="output folder (default runs/<env>__s<seed>__<time>); must be new or empty")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="SECTION.KEY=VALUE",
                        help="override a config value (parsed as TOML, else a string); repeatable")
    return parser


def run(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    from shell.config import load_config
    from shell.runner import train

    config = load_config(args.config, args.overrides, seed=args.seed, total_timesteps=args.total_timesteps,
                         device=args.device)
    summary = train(config, args.run_dir)
    print(json.dumps(summary), flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    try:
        return run(sys.argv[1:] if argv is None else argv)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except TrainingError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
