"""Each trial of a study in the trackers of the base config's ``run.loggers``.

- MLflow: one parent run per study (``study-<name>``; its id in ``STUDY_DIR/mlflow.json``, continued when
  the study is continued), with the base config as params and each finished trial's score as the metric
  ``trial_value`` at ``step = trial number``; each trial's training run (one per seed) is a child run
  (``trial-<number>-s<seed>``, tags ``ppo_core.study``, ``ppo_core.trial``, ``ppo_core.trial_value`` once
  scored), whose params are the trial's whole config, sampled values included. All in one store: the
  tracking URI given (``run.mlflow.tracking_uri`` or ``MLFLOW_TRACKING_URI``), else
  ``sqlite:///STUDY_DIR/mlflow.db``.
- W&B: the study is the group of its trials' runs (``run.wandb.group``, unless the config names one), each
  run named ``trial-<number>-s<seed>`` with tags ``study:<name>`` and ``trial:<number>``.

A tracker that fails here gives one warning line; the study goes on.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import attrs

from shell.config import Config
from shell.errors import first_line
from shell.files import atomic_write
from shell.tracking import flatten_config
from shell.tracking.base import warn
from shell.tracking.mlflow_tracker import DEFAULT_EXPERIMENT, client_for, experiment_id, param_value, tracking_uri

STATE_FILE = "mlflow.json"


def study_uri(config: dict[str, Any], study_dir: Path) -> str:
    """The study's MLflow store: the URI given, else ``sqlite:///STUDY_DIR/mlflow.db``."""
    return tracking_uri(config, None) or f"sqlite:///{Path(study_dir).resolve() / 'mlflow.db'}"


def _local(config: dict[str, Any]) -> bool:
    return tracking_uri(config, None) is None


def open_study_run(config: dict[str, Any], study: str, study_dir: Path) -> str | None:
    """The study's parent MLflow run (created, or found in ``STUDY_DIR/mlflow.json``), or None when the
    base config does not use MLflow or the tracker failed (one warning line)."""
    if "mlflow" not in (config["run"].get("loggers") or ()):
        return None
    uri = study_uri(config, study_dir)
    path = Path(study_dir) / STATE_FILE
    try:
        client = client_for(uri, float(config["run"].get("tracker_timeout") or 30.0))
        if path.is_file():
            state = json.loads(path.read_text())
            if state.get("tracking_uri") == uri:
                client.update_run(state["run_id"], status="RUNNING")
                return state["run_id"]
        from mlflow.entities import Param

        table = config["run"].get("mlflow") or {}
        artifacts = (Path(study_dir).resolve() / "mlartifacts").as_uri() if _local(config) else None
        exp = experiment_id(client, table.get("experiment") or DEFAULT_EXPERIMENT, artifacts)
        run = client.create_run(exp, run_name=f"study-{study}", tags={"ppo_core.study": study})
        params = [Param(k, param_value(v)) for k, v in flatten_config(config).items()]
        for i in range(0, len(params), 100):
            client.log_batch(run.info.run_id, params=params[i:i + 100])
        data = {"run_id": run.info.run_id, "experiment_id": exp, "tracking_uri": uri}
        atomic_write(path, lambda f: f.write((json.dumps(data, indent=2) + "\n").encode()))
        return run.info.run_id
    except Exception as exc:
        warn(f"mlflow: the study's parent run could not be made ({first_line(exc, with_type=True)}); "
             "trials are tracked without it")
        return None


def parent_run_id(study_dir: Path) -> str | None:
    """The parent run's id that :func:`open_study_run` stored, or None."""
    try:
        return json.loads((Path(study_dir) / STATE_FILE).read_text())["run_id"]
    except (OSError, ValueError, KeyError):
        return None


def trial_run_config(config: Config, study: str, study_dir: Path, number: int, seed: int) -> tuple[Config, dict]:
    """A trial's training config and tracker tags: its MLflow run a child of the study's run in the study's
    store, its W&B run in the study's group."""
    name = f"trial-{number:04d}-s{seed}"
    run = config.run
    tags = {"study": study, "trial": str(number), "seed": str(seed)}
    if "mlflow" in run.loggers:
        data = config.to_dict()
        mlflow = {**run.mlflow, "tracking_uri": study_uri(data, study_dir), "run_name": name}
        run = attrs.evolve(run, mlflow=mlflow)
        parent = parent_run_id(study_dir)
        if parent is not None:
            tags["parent_run_id"] = parent
        tags = {**tags, "ppo_core.study": study, "ppo_core.trial": str(number)}
    if "wandb" in run.loggers:
        run = attrs.evolve(run, wandb={"group": study, "name": name, **run.wandb})
    return attrs.evolve(config, run=run), tags


def record_trial(config: dict[str, Any], study_dir: Path, number: int, value: float, run_dirs: list[Path]) -> None:
    """A finished trial's score: ``trial_value`` on the study's run at ``step = number``, and the tag
    ``ppo_core.trial_value`` on the trial's runs (one warning line if MLflow fails)."""
    if "mlflow" not in (config["run"].get("loggers") or ()):
        return
    try:
        client = client_for(study_uri(config, study_dir), float(config["run"].get("tracker_timeout") or 30.0))
        parent = parent_run_id(study_dir)
        if parent is not None:
            client.log_metric(parent, "trial_value", value, step=number)
        for run_dir in run_dirs:
            state = json.loads((Path(run_dir) / STATE_FILE).read_text())
            client.set_tag(state["run_id"], "ppo_core.trial_value", str(value))
    except Exception as exc:
        warn(f"mlflow: trial {number}'s score could not be recorded ({first_line(exc, with_type=True)})")


def close_study_run(config: dict[str, Any], study_dir: Path, best: dict[str, Any] | None, status: str) -> None:
    """Tag the study's run with the best trial (``ppo_core.best_trial``, ``ppo_core.best_value``,
    ``ppo_core.best.<key>``) and end it with ``status``."""
    parent = parent_run_id(study_dir) if "mlflow" in (config["run"].get("loggers") or ()) else None
    if parent is None:
        return
    try:
        client = client_for(study_uri(config, study_dir), float(config["run"].get("tracker_timeout") or 30.0))
        if best:
            client.set_tag(parent, "ppo_core.best_trial", str(best["number"]))
            client.set_tag(parent, "ppo_core.best_value", str(best["value"]))
            for key, value in best["params"].items():
                client.set_tag(parent, f"ppo_core.best.{key}", param_value(value))
        client.set_terminated(parent, status=status)
    except Exception as exc:
        warn(f"mlflow: the study's parent run could not be closed ({first_line(exc, with_type=True)})")
