"""The ``tune`` command, the parent process: it checks its input, creates or loads the study, starts the
worker processes, forwards a stop request to them, waits, and writes the outputs.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from shell.config import Config
from shell.errors import ConfigError, TrainingError
from shell.stop import StopRequest, exit_code
from shell.tracking import check_loggers
from shell.tune.outputs import write_outputs
from shell.tune.settings import DEFAULT_HEARTBEAT, Settings, resolve_settings
from shell.tune.study import _counted, _counts, load_study, masked
from shell.tune.tracking import close_study_run, open_study_run


def tune(config: str, trials: int, stop: StopRequest, *, jobs: int = 1, seeds: list[int] | None = None,
         total_timesteps: int | None = None, overrides: list[str] = (), study_dir: str | None = None,
         storage: str | None = None, study: str | None = None, space: str | None = None,
         pruner: str | None = None, heartbeat: int = DEFAULT_HEARTBEAT) -> dict[str, Any]:
    """Run (or continue) a study up to ``trials`` counted trials with ``jobs`` worker processes; write
    its outputs; return a summary. A stop request is forwarded to the workers; the summary then has
    ``interrupted: true`` and the exit code.

    Raises:
        ConfigError: bad input (config, space, storage, a study made with other settings, a failed
            env check), found before any worker starts; nothing is left behind.
        TrainingError: a worker failed (its log is named).
    """
    settings, base, notes = resolve_settings(config, trials, None if seeds is None else list(seeds), total_timesteps,
                                             list(overrides), study_dir, storage, study, space, pruner, heartbeat)
    _check_env(base)
    check_loggers(base.to_dict())  # run.loggers' names, extras and tracking URIs, before the study dir exists
    directory = Path(settings.study_dir)
    created = not directory.exists()
    if directory.exists() and not directory.is_dir():
        raise ConfigError(f"--study-dir {directory}: exists and is not a folder")
    directory.mkdir(parents=True, exist_ok=True)
    try:
        study_obj = load_study(settings)
    except BaseException:
        if created:
            for leftover in directory.glob("study.db*"):
                leftover.unlink()
            if not any(directory.iterdir()):
                directory.rmdir()
        raise
    for note in notes:
        print(f"tune: {note}", file=sys.stderr)
    counts = _counts(study_obj)
    remaining = settings.trials - _counted(counts)
    print(f"tune: study {settings.study!r} in {masked(settings.storage)}: {_counted(counts)} of {settings.trials} "
          f"trials counted; study dir {directory}", file=sys.stderr)
    failures: list[str] = []
    open_study_run(settings.config, settings.study, directory)  # the trackers' parent run, before any trial
    if remaining > 0 and not stop.requested:
        failures = _run_workers(settings, min(jobs, remaining), stop)
    result = write_outputs(study_obj, settings)
    best = {"number": result["best_trial"], "value": result["best_value"], "params": result["best_params"]} \
        if "best_trial" in result else None
    close_study_run(settings.config, directory, best, "KILLED" if stop.requested else "FAILED" if failures
                    else "FINISHED")
    if stop.requested:
        result.update(interrupted=True, exit_code=exit_code(stop.signum))
        print(f"tune: interrupted by {signal.Signals(stop.signum).name}; continue with the same command "
              f"(with --study-dir {directory})", file=sys.stderr)
        return result
    if failures:
        more = f" (and {len(failures) - 1} more worker(s))" if len(failures) > 1 else ""
        raise TrainingError(failures[0] + more)
    return result


def _check_env(config: Config) -> None:
    """Check the base config with its backend and build its env once, so a bad id, kwarg, space or a
    key the backend cannot serve is one line here, not a failed trial."""
    import torch

    from shell.envs import check_config, make_env

    check_config(config.env)
    env = make_env(config.env, torch.device("cpu"), num_envs=1, policy=config.policy)
    env.close()


def _run_workers(settings: Settings, jobs: int, stop: StopRequest) -> list[str]:
    """Start ``jobs`` workers, forward a stop request to them, wait; return one line per failed worker."""
    logs = Path(settings.study_dir) / "logs"
    logs.mkdir(exist_ok=True)
    procs: list[tuple[subprocess.Popen, Path]] = []
    forwarded = False
    try:
        for index in range(jobs):
            log_path = logs / f"worker_{index}.log"
            with open(log_path, "a") as log:
                # the worker's stdout (one line per trial) is our stderr; its stderr (progress bars,
                # warnings, tracebacks) goes to its log
                proc = subprocess.Popen(worker_command("tune-worker"), stdin=subprocess.PIPE,
                                        stdout=_stderr_fd(), stderr=log, text=True)
            procs.append((proc, log_path))
            try:
                proc.stdin.write(settings.to_json())
                proc.stdin.close()
            except BrokenPipeError:  # it died at start-up: its exit code and log say why
                pass
        while any(proc.poll() is None for proc, _ in procs):
            if stop.requested and not forwarded:
                for proc, _ in procs:
                    if proc.poll() is None:
                        proc.send_signal(stop.signum)
                forwarded = True
            time.sleep(0.05)
    except BaseException:  # a second signal (ForcedStop) or an error here: stop the workers at once
        for proc, _ in procs:
            if proc.poll() is None:
                proc.kill()
        for proc, _ in procs:
            proc.wait()
        raise
    failures = []
    for proc, log_path in procs:
        if proc.returncode == 0 or stop.requested:  # after a stop, exit codes say only that they stopped
            continue
        why = (f"killed by {signal.Signals(-proc.returncode).name}" if proc.returncode < 0
               else f"exit code {proc.returncode}")
        last = _last_line(log_path)
        failures.append(f"a tune worker failed ({why}){': ' + last if last else ''}; log: {log_path}")
    return failures


def worker_command(*args: str) -> list[str]:
    """The command line of a worker process running ``ppo-core ARGS``, importing what this process imports.

    The worker gets this process's ``sys.path`` exactly. ``python -m shell`` would put the current
    folder first, so a user's own ``core.py`` or ``shell/`` there would shadow this package in the
    worker while training from the same folder works; and a source checkout that is not installed
    would not be found from another folder.
    """
    boot = f"import sys; sys.path[:] = {sys.path!r}; from shell.cli import entry_point; entry_point()"
    return [sys.executable, "-c", boot, *args]


def _stderr_fd() -> int | None:
    try:
        return sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):  # a replaced sys.stderr: the workers inherit fd 2
        return None


def _last_line(path: Path) -> str:
    try:
        lines = [line.strip() for line in path.read_text(errors="replace").replace("\r", "\n").splitlines()]
    except OSError:
        return ""
    lines = [line for line in lines if line]
    return lines[-1][:300] if lines else ""
