"""The command line: ``ppo-core``, ``python -m shell`` and ``python main.py`` all run :func:`main`.

    ppo-core --config pendulum [--seed N] [--total-timesteps N] [--device D]
             [--run-dir DIR] [--set section.key=value ...]
    ppo-core --resume RUN_DIR [--total-timesteps N] [--device D]
    ppo-core eval RUN_DIR_OR_CHECKPOINT [--episodes N] [--video] [--video-episodes N] [--device D]
    ppo-core play RUN_DIR_OR_CHECKPOINT [--seat SEAT] [--seed N] [--device D]   # a turn-based game, moves on stdin
    ppo-core plot RUN_DIR [RUN_DIR ...] [--out FILE.png]
    ppo-core export RUN_DIR_OR_CHECKPOINT [--format onnx|pt2] [--out FILE]
    ppo-core tune --config acrobot --trials N [--jobs K] [--seeds S ...] [--total-timesteps T]
                  [--set section.key=value ...] [--study-dir DIR] [--storage URL] [--study NAME]
                  [--space FILE] [--pruner median|hyperband|none] [--heartbeat SECONDS]
    ppo-core configs                      # the shipped configs, one per line

Progress goes to stderr; the last stdout line is one JSON object. Exit codes: 0 success,
1 failure during training (or an export that failed its check), 2 bad input at start-up,
129 a rank whose torchrun launcher ended, 130/143 after SIGINT/SIGTERM. This module owns the
process: signal handlers, the torch thread count, exit codes and ``os._exit``; the library below
it leaves all of those to its caller.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from pathlib import Path

from shell.errors import ConfigError, ExportError, TrainingError, front_end
from shell.stop import Interrupted, StopRequest, exit_code


class ForcedStop(BaseException):
    """A second SIGINT/SIGTERM: stop at once, without the checkpoint the first one asked for."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


def install_signal_handlers(stop: StopRequest, second_forces: bool = True) -> None:
    """SIGINT/SIGTERM ask ``stop`` to end the run (the runner saves and exits 130/143 at its next poll,
    within about a second); a second one raises :class:`ForcedStop` wherever the program is, so it is
    never swallowed. Checkpoint writes are atomic, so stopping in the middle of one loses nothing.

    With ``second_forces=False`` (a tune worker, which gets a terminal's Ctrl-C and the one its parent
    forwards) later signals are ignored; the parent kills its workers on a second Ctrl-C."""

    def handle(signum: int, _frame: object) -> None:
        distributed = sys.modules.get("shell.distributed")  # imported where a torchrun rank watches its launcher
        if distributed is not None and distributed.launcher_has_ended():
            distributed.end_for_launcher()  # the launcher died: its line and exit 129, no checkpoint after it
        if stop.requested:
            if second_forces:
                raise ForcedStop(signum)
            return
        stop.request(signum)

    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, handle)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2, as for every other bad input
        raise ConfigError(f"{self.prog}: {message}")


def _int_at_least(minimum: int):
    def parse(text: str) -> int:
        try:
            value = int(text.replace("_", ""))
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer >= {minimum}, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be an integer >= {minimum}, got {value}")
        return value

    return parse


def _version_line() -> str:
    from shell.installation import git_state, package_version

    commit, dirty = git_state()
    source = f" (git {commit[:12]}{', dirty' if dirty else ''})" if commit else ""
    return f"ppo-core {package_version() or 'not installed'}{source}"


def program_name() -> str:
    """How the user called the CLI, for its messages: ``main.py``, ``python -m shell`` or ``ppo-core``."""
    name = Path(sys.argv[0]).name if sys.argv and sys.argv[0] else ""
    if name == "__main__.py":
        return "python -m shell"
    return "main.py" if name == "main.py" else "ppo-core"


def train_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=program_name(),
                     description="Train PPO on a gymnasium env (see also: eval, play, plot, export, tune, configs).")
    parser.add_argument("--config", help="config file, or the name of a shipped config ('.toml' optional; "
                        "list them with: configs)")
    parser.add_argument("--version", action="version", version=_version_line())
    parser.add_argument("--resume", metavar="RUN_DIR", help="continue the run in RUN_DIR from its last checkpoint")
    parser.add_argument("--seed", type=_int_at_least(0), help="run.seed")
    parser.add_argument("--total-timesteps", type=_int_at_least(1), help="run.total_timesteps (global env steps)")
    parser.add_argument("--device", choices=("cpu", "cuda", "auto"), help="run.device")
    parser.add_argument("--run-dir", help="output folder (default runs/<env>__s<seed>__<time>); must be new or empty")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="SECTION.KEY=VALUE",
                        help="override a config value (parsed as TOML, else a string); repeatable")
    return parser


def configs_parser() -> argparse.ArgumentParser:
    return _Parser(prog=f"{program_name()} configs", description="List the shipped configs (use one with --config "
                   "NAME); a config file's first lines name the extra it needs.")


def eval_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=f"{program_name()} eval", description="Evaluate the deterministic policy of a checkpoint.")
    parser.add_argument("target", metavar="RUN_DIR_OR_CHECKPOINT")
    parser.add_argument("--episodes", type=_int_at_least(1), default=20, help="evaluation episodes (default 20)")
    parser.add_argument("--video", action="store_true", help="also record an mp4 (needs the video extra)")
    parser.add_argument("--video-episodes", type=_int_at_least(1), metavar="N",
                        help="record the first N evaluation episodes, one mp4 each (default 1; implies --video)")
    parser.add_argument("--device", choices=("cpu", "cuda", "auto"), default="cpu", help="default cpu")
    return parser


def play_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=f"{program_name()} play", description="Play a turn-based game against a run's trained "
                     "agent: the board is printed, your moves are read from stdin (EOF or Ctrl-C ends the game).")
    parser.add_argument("target", metavar="RUN_DIR_OR_CHECKPOINT")
    parser.add_argument("--seat", help="your seat: its name (e.g. player_2) or index (default: the first seat)")
    parser.add_argument("--seed", type=_int_at_least(0), help="the game's reset seed")
    parser.add_argument("--device", choices=("cpu", "cuda", "auto"), default="cpu", help="default cpu")
    return parser


def plot_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=f"{program_name()} plot", description="Plot episodic return against env steps.")
    parser.add_argument("run_dirs", metavar="RUN_DIR", nargs="+")
    parser.add_argument("--out", help="PNG file (default: learning_curve.png in the first run dir)")
    return parser


def export_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=f"{program_name()} export",
                     description="Export the deterministic policy of a checkpoint as one "
                     "file (raw observations in, env actions out), checked against the checkpoint's policy.")
    parser.add_argument("target", metavar="RUN_DIR_OR_CHECKPOINT")
    parser.add_argument("--format", choices=("onnx", "pt2"), default="onnx",
                        help="onnx (needs the export extra) or pt2 (torch.export); default onnx")
    parser.add_argument("--out", help="file to write (default: beside the checkpoint, ckpt_<steps>.onnx or .pt2)")
    return parser


def tune_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=f"{program_name()} tune",
                     description="Search hyperparameters with Optuna: train each sampled "
                     "config on --seeds, score it by the mean final deterministic eval return.")
    parser.add_argument("--config", required=True, help="base config; its [tune.space] table (if any) is the space")
    parser.add_argument("--trials", type=_int_at_least(1), required=True,
                        help="the study's total of completed and pruned trials (a rerun continues up to it)")
    parser.add_argument("--jobs", type=_int_at_least(1), default=1,
                        help="worker processes sharing the study (default 1)")
    parser.add_argument("--seeds", type=_int_at_least(0), nargs="+",
                        help="seeds each trial trains on (default: the config's [tune] seeds, else 0 1 2)")
    parser.add_argument("--total-timesteps", type=_int_at_least(1), help="run.total_timesteps of every trial")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="SECTION.KEY=VALUE",
                        help="override a config value for every trial (the key is then not tuned); repeatable")
    parser.add_argument("--study-dir", help="outputs and trial runs (default: a new runs/tune_<config>__<time>); "
                        "rerun with the same folder to continue the study")
    parser.add_argument("--storage", help="SQLAlchemy URL of the study database (default: sqlite in the study "
                        "dir); a PostgreSQL or MySQL URL lets several machines share the study")
    parser.add_argument("--study", help="study name in the storage (default: the config's name)")
    parser.add_argument("--space", help="a TOML file whose [tune.space] replaces the config's (or the default) space")
    parser.add_argument("--pruner", choices=("median", "hyperband", "none"),
                        help="Optuna pruner (default: [tune] pruner, else median)")
    parser.add_argument("--heartbeat", type=_int_at_least(1), default=10,
                        help="seconds between a trial's heartbeats; a trial silent for 3 of them is failed and "
                             "retried once (default 10)")
    return parser


def run(argv: list[str], stop: StopRequest) -> int:
    if argv[:1] == ["tune-worker"]:  # started by `main.py tune`, its settings as JSON on stdin
        from shell.tune import run_worker

        return run_worker(sys.stdin.read(), stop)
    if argv[:1] == ["configs"]:  # not JSON: a list for people (a config name per line)
        configs_parser().parse_args(argv[1:])
        from shell.config import CONFIG_DIR, config_extra, shipped_configs

        print(f"# shipped configs, in {CONFIG_DIR}; use one with --config NAME (an extra it needs in brackets)",
              flush=True)
        lines = [name + (f"  [{extra}]" if (extra := config_extra(name)) else "") for name in shipped_configs()]
        print("\n".join(lines), flush=True)
        return 0
    if argv[:1] == ["tune"]:
        args = tune_parser().parse_args(argv[1:])
        from shell.tune import tune

        result = tune(args.config, args.trials, stop, jobs=args.jobs, seeds=args.seeds,
                      total_timesteps=args.total_timesteps, overrides=args.overrides, study_dir=args.study_dir,
                      storage=args.storage, study=args.study, space=args.space, pruner=args.pruner,
                      heartbeat=args.heartbeat)
    elif argv[:1] == ["eval"]:
        args = eval_parser().parse_args(argv[1:])
        import torch

        torch.set_num_threads(1)  # as run.torch_threads' default: small policies are fastest on one thread
        from shell.evaluation import eval_checkpoint

        result = eval_checkpoint(args.target, args.episodes, args.video or args.video_episodes is not None,
                                 args.device, stop, video_episodes=args.video_episodes or 1)
    elif argv[:1] == ["play"]:
        args = play_parser().parse_args(argv[1:])
        import torch

        torch.set_num_threads(1)
        from shell.games.play import play

        # Ctrl-C while waiting for a move ends the game at once (the stop request would wait for the input)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        try:
            play(args.target, args.seat, args.device, seed=args.seed)
        except (KeyboardInterrupt, EOFError):
            print("\ngame left unfinished", flush=True)
        return 0
    elif argv[:1] == ["export"]:
        args = export_parser().parse_args(argv[1:])
        import torch

        torch.set_num_threads(1)
        from shell.export import export_lanes, export_summary

        exports = export_lanes(args.target, args.format, args.out)  # a file per lane: one, or one per group
        result = export_summary(exports[None]) if list(exports) == [None] else \
            {"exports": {g: export_summary(r) for g, r in exports.items()}}
    elif argv[:1] == ["plot"]:
        args = plot_parser().parse_args(argv[1:])
        from shell.plotting import plot_runs

        result = {"plot": str(plot_runs(args.run_dirs, args.out))}
        if stop.requested:  # a signal during the (short) drawing: the file is written, the exit code says so
            result.update(interrupted=True, exit_code=exit_code(stop.signum))
    else:
        launcher = os.getppid()  # torchrun's process, under torchrun: taken before the slow imports below
        args = train_parser().parse_args(argv)
        import torch

        from shell import api
        from shell.config import load_config
        from shell.distributed import end_with_launcher, init_distributed, shutdown

        end_with_launcher(launcher)  # under torchrun: a rank ends when its launcher ends (exit 129)

        if args.resume:
            clashes = [f for f, v in (("--config", args.config), ("--seed", args.seed), ("--run-dir", args.run_dir),
                                      ("--set", args.overrides)) if v]
            if clashes:
                raise ConfigError(f"--resume continues a run with its saved config; drop {', '.join(clashes)}")
            saved = Path(args.resume) / "config.toml"
            threads = load_config(str(saved)).run.torch_threads if saved.is_file() else 1
        elif args.config is None:
            raise ConfigError(f"{program_name()}: --config is required (e.g. --config pendulum), or --resume RUN_DIR; "
                              f"list the shipped configs with: {program_name()} configs")
        else:
            config = load_config(args.config, args.overrides, seed=args.seed,
                                 total_timesteps=args.total_timesteps, device=args.device)
            threads = config.run.torch_threads
        torch.set_num_threads(threads)  # the CLI's choice; the library leaves global settings to its caller
        dist, _ = init_distributed(args.device or ("auto" if args.resume else config.run.device))
        try:
            if args.resume:
                result = api.resume(args.resume, args.total_timesteps, device=args.device, dist=dist, stop=stop).summary
            else:
                result = api.train(config, run_dir=args.run_dir, dist=dist, stop=stop).summary
        finally:
            shutdown()
        if not dist.is_main:
            return result.get("exit_code", 0)
    print(json.dumps(result), flush=True)
    return result.get("exit_code", 0)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    stop = StopRequest()
    install_signal_handlers(stop, second_forces=argv[:1] != ["tune-worker"])
    try:
        with front_end("cli"):  # the library's messages name flags (--run-dir), not the Python API's arguments
            return run(argv, stop)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except (TrainingError, ExportError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except Interrupted as exc:  # outside a training run (eval, start-up): nothing to save
        print(f"\ninterrupted by {signal.Signals(exc.signum).name}; nothing was written", file=sys.stderr)
        return exit_code(exc.signum)
    except (ForcedStop, KeyboardInterrupt) as exc:
        signum = exc.signum if isinstance(exc, ForcedStop) else signal.SIGINT
        print(f"\nstopped at once by a second {signal.Signals(signum).name}; checkpoints already on disk are kept",
              file=sys.stderr)
        return exit_code(signum)


def entry_point() -> None:
    """Run :func:`main` and end the process with its exit code (``ppo-core``, ``python -m shell``, main.py).

    Everything is written, closed and fsynced by then, so the interpreter's teardown is skipped: it
    spends about 0.7 s garbage-collecting torch's and dynamo's modules (measured in bench/)."""
    try:
        code = main()
        sys.stdout.flush()
        sys.stderr.flush()
    except BrokenPipeError:  # the reader went away (``ppo-core configs | head``): nothing more to say
        code = 0
    os._exit(code)
