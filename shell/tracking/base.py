"""The logger interface: every destination of the per-update rows (TensorBoard, W&B, MLflow) is a
:class:`Logger`; the trainer hands each finished update's row to a :class:`Loggers` hub and knows none
of them. metrics.csv is not a logger: it is the run's own record (shell/logs.py), always written.

A logger never kills a run: the hub turns any exception of a logger into one warning line on stderr
and drops that logger for the rest of the run.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from shell.errors import first_line

#: A run's end as the trackers record it (MLflow's run statuses).
FINISHED, KILLED, FAILED = "FINISHED", "KILLED", "FAILED"


@attrs.frozen
class RunStart:
    """What every logger is opened with.

    Attributes:
        run_dir: the run's folder; trackers keep their run ids in it (``wandb.json``, ``mlflow.json``).
        config: the resolved config as ``{section: {key: value}}`` (:meth:`shell.config.Config.to_dict`).
        update: the update the run starts after (0 for a new run, the checkpoint's for a resume).
        env_steps: env steps taken by then.
        done_rows: the metrics.csv rows of updates ``1..update`` as numbers (empty for a new run): what a
            resumed tracker must hold; it sends those it does not.
        timeout: seconds one tracker request may take, and how long closing waits for a tracker that
            makes no progress (``run.tracker_timeout``).
        tags: extra tags for the run (``{"study": ..., "trial": ...}`` from ``tune``).
    """

    run_dir: Path
    config: Mapping[str, Mapping[str, Any]]
    update: int = 0
    env_steps: int = 0
    done_rows: Sequence[Mapping[str, float]] = ()
    timeout: float = 30.0
    tags: Mapping[str, str] = attrs.field(factory=dict)

    @property
    def resumed(self) -> bool:
        return self.update > 0


@attrs.frozen
class RunEnd:
    """How a run ended.

    Attributes:
        status: :data:`FINISHED` (a clean end, also after a callback stopped it), :data:`KILLED`
            (SIGINT/SIGTERM, after its checkpoint) or :data:`FAILED` (an exception).
        summary: summary.json's contents (empty when the run failed).
        checkpoint: the final checkpoint (None when there is none).
    """

    status: str
    summary: Mapping[str, Any] = attrs.field(factory=dict)
    checkpoint: Path | None = None


class Logger:
    """One destination of the per-update rows. Every method is called on rank 0's training thread, in
    this order: any number of :meth:`log` and :meth:`checkpointed`, then :meth:`finish` once, then
    :meth:`close` once. The base class does nothing, so a logger overrides what it needs.
    """

    name = "logger"

    def log(self, row: Mapping[str, Any]) -> None:
        """A finished update's row: the columns of metrics.csv (``""`` for a value not measured in it)."""

    def checkpointed(self, update: int) -> None:
        """A checkpoint on disk now covers updates ``1..update`` (their rows were logged before it)."""

    def finish(self, end: RunEnd) -> None:
        """The run ended (after summary.json was written)."""

    def close(self) -> None:
        """Release files, threads and connections; may wait a bounded time (``run.tracker_timeout``)."""


def warn(message: str) -> None:
    """One warning line on stderr (training goes on), on a line of its own above a progress bar."""
    from tqdm import tqdm

    tqdm.write(f"warning: {message}", file=sys.stderr)
    sys.stderr.flush()


def numeric(row: Mapping[str, Any]) -> dict[str, float]:
    """A metrics row as numbers: the columns that hold a value (``""`` and None left out), as floats;
    ``update`` and ``env_steps`` as ints."""
    out: dict[str, float] = {}
    for key, value in row.items():
        if value == "" or value is None:
            continue
        out[key] = int(float(value)) if key in ("update", "env_steps") else float(value)
    return out


def flatten_config(config: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """``{"ppo.gamma": 0.99, "env.kwargs.continuous": True, ...}``: the resolved config with one key per
    value (tables flattened with dots; lists kept; absent optional keys left out)."""
    out: dict[str, Any] = {}

    def walk(prefix: str, value: Any) -> None:
        if isinstance(value, Mapping):
            for key, sub in value.items():
                walk(f"{prefix}.{key}" if prefix else str(key), sub)
        elif value is not None:
            out[prefix] = value

    walk("", config)
    return out


class Loggers(Logger):
    """The hub the trainer talks to: forwards each call to every logger; a logger that raises is
    reported in one warning line and dropped (a logger never kills a run)."""

    name = "loggers"

    def __init__(self, loggers: Sequence[Logger] = ()):
        self.loggers = list(loggers)

    def _each(self, method: str, *args: Any) -> None:
        for logger in list(self.loggers):
            try:
                getattr(logger, method)(*args)
            except Exception as exc:
                warn(f"{logger.name} logger failed ({first_line(exc, with_type=True)}); the run goes on without it "
                     "(metrics.csv is complete)")
                self.loggers.remove(logger)

    def log(self, row: Mapping[str, Any]) -> None:
        self._each("log", row)

    def checkpointed(self, update: int) -> None:
        self._each("checkpointed", update)

    def finish(self, end: RunEnd) -> None:
        self._each("finish", end)

    def close(self) -> None:
        self._each("close")
        self.loggers = []
