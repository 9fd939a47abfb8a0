"""The loggers by name (``run.loggers``): what each needs installed, its config checks, and how it opens.
The trainer calls :func:`open_loggers` and knows no logger by name; the API calls :func:`check_loggers`
before a run dir exists."""

from __future__ import annotations

import difflib
import time
from collections.abc import Mapping, Sequence
from importlib import util as import_util
from typing import Any

from shell.errors import ConfigError, first_line
from shell.installation import install_hint
from shell.tracking import mlflow_tracker, wandb_tracker
from shell.tracking.base import Logger, Loggers, RunStart, warn
from shell.tracking.tensorboard import TensorBoardLogger
from shell.tracking.worker import QueuedTracker

#: name -> (the module it needs, the extra that installs it)
LOGGERS: dict[str, tuple[str, str | None]] = {
    "tensorboard": ("tensorboard", None),
    "wandb": ("wandb", "wandb"),
    "mlflow": ("mlflow", "mlflow"),
}
_CHECKS = {"wandb": wandb_tracker.check, "mlflow": mlflow_tracker.check}


def check_loggers(config: Mapping[str, Mapping[str, Any]]) -> None:
    """Check ``run.loggers`` and the tables of the trackers it names, before anything starts.

    Args:
        config: the resolved config as ``{section: {key: value}}``.

    Raises:
        ConfigError: an unknown logger name (with the closest known one), a logger whose extra is not
            installed (with the pip command that installs it), a bad ``[run.wandb]`` / ``[run.mlflow]``
            key, or a malformed tracking URI.
    """
    for name in config["run"].get("loggers") or ():
        if name not in LOGGERS:
            close = difflib.get_close_matches(name, list(LOGGERS), n=1, cutoff=0.5)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise ConfigError(f"run.loggers: unknown logger {name!r}; {hint}known: {list(LOGGERS)}")
        module, extra = LOGGERS[name]
        if import_util.find_spec(module) is None:
            raise ConfigError(f"run.loggers names {name!r}, but {module} is not installed; run: "
                              f"{install_hint(extra) if extra else 'pip install ' + module}")
        if name in _CHECKS:
            _CHECKS[name](config)


def _make(name: str, start: RunStart) -> Logger:
    if name == "tensorboard":
        return TensorBoardLogger(start)
    backend = wandb_tracker.WandbBackend() if name == "wandb" else mlflow_tracker.MlflowBackend()
    return QueuedTracker(backend, start)


def open_loggers(names: Sequence[str], start: RunStart) -> Loggers:
    """The hub of the loggers ``names`` (rank 0): TensorBoard writes on the training thread, W&B and
    MLflow on their own threads (shell/tracking/worker.py), which are given ``start.timeout`` seconds to
    create (or find) their runs before this returns. A logger that fails to open is one warning line and
    left out."""
    loggers = []
    for name in names:
        try:
            loggers.append(_make(name, start))
        except Exception as exc:
            warn(f"{name} logger failed to open ({first_line(exc, with_type=True)}); the run goes on without it")
    deadline = time.monotonic() + start.timeout  # the trackers open in parallel; training starts once they have
    for logger in loggers:
        if isinstance(logger, QueuedTracker):
            logger.wait_open(deadline)
    return Loggers(loggers)


def log_videos(run_dir: Any, loggers: Sequence[str], paths: Sequence[Any], timeout: float = 10.0) -> list[str]:
    """Log ``eval --video``'s mp4s to the trackers the run used (those of ``loggers`` whose run id is in
    the run dir). Returns the trackers that took them; a failure is one warning line.
    """
    done = []
    for name, module in (("wandb", wandb_tracker), ("mlflow", mlflow_tracker)):
        if name not in loggers or import_util.find_spec(name) is None:
            continue
        try:
            if module.log_videos(run_dir, list(paths), timeout):
                done.append(name)
        except Exception as exc:
            warn(f"could not log the video to {name} ({first_line(exc, with_type=True)})")
    return done
