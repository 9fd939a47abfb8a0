"""Weights & Biases (the ``wandb`` extra): one W&B run per training run, continued on ``--resume``.

- project, entity, group, tags, name, notes, job_type and mode come from the ``[run.wandb]`` table;
  a key left out falls to W&B's own environment variables (``WANDB_PROJECT``, ``WANDB_ENTITY``,
  ``WANDB_RUN_GROUP``, ``WANDB_TAGS``, ``WANDB_NAME``, ``WANDB_MODE``, ...), as ``wandb.init`` reads them;
  the project defaults to ``ppo-core``;
- the resolved config is the run config; every metrics.csv column is logged with ``env_steps`` as the
  x-axis (W&B's own ``step`` is the update number, which keeps increasing across resumes);
- the summary (summary.json's fields) is the run summary; the run id is kept in ``RUN_DIR/wandb.json``;
  the run's files are under ``RUN_DIR/wandb/``.

Offline (``WANDB_MODE=offline`` or ``mode = "offline"``) a resume reads the transaction logs
(shell/tracking/wandb_offline.py) to find the updates W&B holds; online it asks W&B's public API.
"""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from shell.errors import ConfigError
from shell.files import atomic_write
from shell.tracking import wandb_offline
from shell.tracking.base import FINISHED, RunEnd, RunStart
from shell.tracking.worker import TrackerBackend

KEYS = {"project": str, "entity": str, "group": str, "tags": list, "name": str, "notes": str, "job_type": str,
        "mode": str}
MODES = ("online", "offline", "disabled")
STATE_FILE = "wandb.json"


def check(config: Mapping[str, Mapping[str, Any]]) -> None:
    """The ``[run.wandb]`` table's keys and types.

    Raises:
        ConfigError: an unknown key, a value of the wrong type, or an unknown mode.
    """
    table = config["run"].get("wandb") or {}
    for key, value in table.items():
        if key not in KEYS:
            raise ConfigError(f"run.wandb.{key}: unknown key; known: {sorted(KEYS)}")
        if not isinstance(value, KEYS[key]) or (key == "tags" and not all(isinstance(t, str) for t in value)):
            raise ConfigError(f"run.wandb.{key} = {value!r} has the wrong type; expected "
                              f"{'a list of str' if key == 'tags' else KEYS[key].__name__}")
    mode = table.get("mode")
    if mode is not None and mode not in MODES:
        raise ConfigError(f"run.wandb.mode = {mode!r} is not allowed; choose one of {list(MODES)}")


def read_state(run_dir: Path) -> dict[str, Any] | None:
    """What ``RUN_DIR/wandb.json`` holds (``id``, ``project``, ``entity``, ``mode``), or None."""
    try:
        return json.loads((Path(run_dir) / STATE_FILE).read_text())
    except (OSError, ValueError):
        return None


def _init(run_dir: Path, table: Mapping[str, Any], config: Any, run_id: str, timeout: float,
          extra_tags: Mapping[str, str] | None = None) -> Any:
    import wandb

    kwargs = {k: table[k] for k in ("entity", "group", "tags", "name", "notes", "job_type", "mode") if k in table}
    if extra_tags:  # tune's study and trial, as W&B tags "key:value"
        kwargs["tags"] = [*kwargs.get("tags", []), *(f"{k}:{v}" for k, v in extra_tags.items())]
    project = table.get("project") or os.environ.get("WANDB_PROJECT") or "ppo-core"
    settings = wandb.Settings(console="off", silent=True, x_disable_stats=True, init_timeout=max(timeout, 30.0))
    return wandb.init(project=project, dir=str(run_dir), config=config, id=run_id, resume="allow",
                      reinit="create_new", settings=settings, **kwargs)


class WandbBackend(TrackerBackend):
    name = "wandb"

    def __init__(self) -> None:
        self.run: Any = None
        self.run_dir: Path | None = None

    def open(self, start: RunStart) -> set[int]:
        self.run_dir = start.run_dir
        table = start.config["run"].get("wandb") or {}
        state = read_state(start.run_dir) if start.resumed else None
        run_id = state["id"] if state else secrets.token_hex(4)  # W&B's ids: 8 lowercase letters or digits
        self.run = _init(start.run_dir, table, {k: dict(v) for k, v in start.config.items()}, run_id, start.timeout,
                         {k: v for k, v in start.tags.items() if k in ("study", "trial", "seed")})
        self.run.define_metric("env_steps")
        self.run.define_metric("*", step_metric="env_steps")
        mode = "offline" if self.run.settings._offline else "online"
        data = {"id": self.run.id, "project": self.run.project, "entity": self.run.entity, "mode": mode}
        atomic_write(start.run_dir / STATE_FILE, lambda f: f.write((json.dumps(data, indent=2) + "\n").encode()))
        if state is None:
            return set()
        if start.resumed:  # what a resume changes (a longer total_timesteps, another device) is the latest config
            self.run.config.update({k: dict(v) for k, v in start.config.items()}, allow_val_change=True)
        return held_updates(start.run_dir, state)

    def send(self, rows: list[dict[str, float]]) -> None:
        for row in rows:
            self.run.log(row, step=int(row["update"]))

    def finish(self, end: RunEnd) -> None:
        self.run.summary.update({k: v for k, v in end.summary.items() if isinstance(v, int | float | str | bool)})
        self.run.finish(exit_code=0 if end.status == FINISHED else 1)
        self.run = None

    def close(self) -> None:
        if self.run is not None:  # a failure before finish: end the run's process, marked failed
            self.run.finish(exit_code=1)
            self.run = None


def held_updates(run_dir: Path, state: Mapping[str, Any]) -> set[int]:
    """The updates W&B holds for the run in ``state``: read from the offline transaction logs, or asked
    of W&B's public API for an online run."""
    if state.get("mode") == "offline":
        return {int(row["update"]) for row in wandb_offline.history(run_dir, state["id"]) if "update" in row}
    import wandb

    run = wandb.Api().run(f"{state['entity']}/{state['project']}/{state['id']}")
    return {int(row["update"]) for row in run.scan_history(keys=["update"]) if row.get("update") is not None}


def log_videos(run_dir: Path, paths: list[Path], timeout: float = 10.0) -> bool:
    """Log mp4s (``eval --video``) to the W&B run of ``run_dir`` (as ``eval/video``); False when the run
    dir has no W&B run."""
    import wandb

    state = read_state(run_dir)
    if state is None:
        return False
    table = {"project": state["project"], "mode": state["mode"]}
    if state.get("entity"):
        table["entity"] = state["entity"]
    run = _init(Path(run_dir), table, None, state["id"], timeout)
    run.log({"eval/video": [wandb.Video(str(p), format="mp4") for p in paths]})
    run.finish()
    return True
