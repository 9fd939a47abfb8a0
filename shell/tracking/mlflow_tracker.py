"""MLflow (the ``mlflow`` extra): one MLflow run per training run, continued on ``--resume``.

- tracking URI: ``run.mlflow.tracking_uri``, else ``MLFLOW_TRACKING_URI``, else a SQLite store in the
  run dir (``sqlite:///RUN_DIR/mlflow.db``, artifacts in ``RUN_DIR/mlartifacts``; MLflow 3 refuses a
  plain file store);
- experiment ``run.mlflow.experiment`` (default ``ppo-core``), run name ``run.mlflow.run_name`` (default
  the run dir's name), tags from ``run.mlflow.tags``;
- params: the flattened resolved config (``ppo.gamma``, ``env.kwargs.continuous``, ...); MLflow refuses
  to change a param, so a resume records what it changed as tags ``ppo_core.resume.<n>.<key> = "old -> new"``;
- metrics: every metrics.csv column with ``step = env_steps``; the summary's numbers as ``summary.<key>``;
- artifacts: ``config.toml``, ``summary.json``, ``learning_curve.png``, the final checkpoint
  (``checkpoints/``), and the policy as a pyfunc model (``policy/``, shell/policy_model.py), so
  ``mlflow.pyfunc.load_model(f"runs:/{run_id}/policy").predict(obs)`` gives ``load_policy``'s actions;
- the run id is kept in ``RUN_DIR/mlflow.json``.

MLflow's client retries a failed request with backoff for minutes by default; before importing it this
module sets (where unset) ``MLFLOW_HTTP_REQUEST_TIMEOUT`` to ``run.tracker_timeout``,
``MLFLOW_HTTP_REQUEST_MAX_RETRIES`` to 2 and ``MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR`` to 1 (about 3 s of
retries), and turns MLflow's telemetry off (``MLFLOW_DISABLE_TELEMETRY=true``), its artifact progress
bars off and its "View run at" lines on stdout off (``MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT``).
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import time
from collections.abc import Mapping
from importlib import util as import_util
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from shell.errors import ConfigError
from shell.files import atomic_write
from shell.installation import package_version
from shell.plotting import plot_runs
from shell.tracking.base import FINISHED, RunEnd, RunStart, flatten_config
from shell.tracking.worker import TrackerBackend

KEYS = ("tracking_uri", "experiment", "run_name", "tags")
STATE_FILE = "mlflow.json"
DEFAULT_EXPERIMENT = "ppo-core"
SCHEMES = ("http", "https", "sqlite", "postgresql", "mysql", "mssql", "databricks", "file")
MAX_METRICS, MAX_PARAMS, MAX_PARAM_LENGTH = 1000, 100, 6000  # MLflow's limits per log_batch request
POLICY_PATH = "policy"


def disable_telemetry() -> None:
    """Turn MLflow's usage telemetry off for this process (``MLFLOW_DISABLE_TELEMETRY``, as MLflow 3
    documents; a value the user set wins)."""
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")


def _client_env(timeout: float) -> None:
    disable_telemetry()
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")  # no progress bars on stderr
    os.environ.setdefault("MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT", "true")  # stdout's last line is the summary
    logging.getLogger("mlflow").setLevel(logging.WARNING)  # its INFO lines of database migrations
    logging.getLogger("alembic").setLevel(logging.WARNING)
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", str(max(1, round(timeout))))
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "2")
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR", "1")


def tracking_uri(config: Mapping[str, Mapping[str, Any]], run_dir: Path | None) -> str | None:
    """The tracking URI: ``run.mlflow.tracking_uri``, else ``MLFLOW_TRACKING_URI``, else the run dir's
    SQLite store (None while there is no run dir)."""
    uri = (config["run"].get("mlflow") or {}).get("tracking_uri") or os.environ.get("MLFLOW_TRACKING_URI")
    if uri:
        return uri
    return None if run_dir is None else f"sqlite:///{Path(run_dir).resolve() / 'mlflow.db'}"


def check_uri(uri: str, where: str) -> None:
    """Refuse a tracking URI MLflow cannot use, in one line.

    Raises:
        ConfigError: no known scheme (``http``, ``https``, ``sqlite``, ``postgresql``, ``mysql``,
            ``mssql``, ``databricks``, ``file``), an http(s) URI without a host or with a bad port, a
            ``sqlite:`` URI without ``///path``.
    """
    parsed = urlparse(uri)
    scheme = parsed.scheme.split("+")[0].lower()
    bad = None
    if scheme not in SCHEMES:
        bad = f"a scheme of {list(SCHEMES)} (e.g. http://127.0.0.1:5000 or sqlite:///mlflow.db)"
    elif scheme in ("http", "https"):
        try:
            parsed.port  # noqa: B018 (urllib checks the port on access)
        except ValueError:
            bad = "a port from 0 to 65535"
        if bad is None and not parsed.hostname:
            bad = "a host, e.g. http://127.0.0.1:5000"
    elif scheme == "sqlite" and not uri.lower().startswith("sqlite:///"):
        bad = "sqlite:///path/to/file.db"
    if bad:
        raise ConfigError(f"{where} = {uri!r} is not a tracking URI MLflow can use; expected {bad}")


def check(config: Mapping[str, Mapping[str, Any]]) -> None:
    """The ``[run.mlflow]`` table's keys and the tracking URI (from it or ``MLFLOW_TRACKING_URI``).

    Raises:
        ConfigError: an unknown key, a value of the wrong type, a malformed URI.
    """
    table = config["run"].get("mlflow") or {}
    for key, value in table.items():
        if key not in KEYS:
            raise ConfigError(f"run.mlflow.{key}: unknown key; known: {list(KEYS)}")
        if key == "tags" and not isinstance(value, dict):
            raise ConfigError(f"run.mlflow.tags = {value!r}: expected a table of names, e.g. {{ team = \"rl\" }}")
        if key != "tags" and not isinstance(value, str):
            raise ConfigError(f"run.mlflow.{key} = {value!r} has the wrong type; expected str")
    if table.get("tracking_uri"):
        check_uri(table["tracking_uri"], "run.mlflow.tracking_uri")
    elif os.environ.get("MLFLOW_TRACKING_URI"):
        check_uri(os.environ["MLFLOW_TRACKING_URI"], "MLFLOW_TRACKING_URI")


def param_value(value: Any) -> str:
    """A config value as an MLflow param: strings as they are, other values as JSON (``true``, ``[64, 64]``)."""
    text = value if isinstance(value, str) else json.dumps(value)
    return text[:MAX_PARAM_LENGTH]


def read_state(run_dir: Path) -> dict[str, Any] | None:
    """What ``RUN_DIR/mlflow.json`` holds (``run_id``, ``experiment_id``, ``tracking_uri``), or None."""
    try:
        return json.loads((Path(run_dir) / STATE_FILE).read_text())
    except (OSError, ValueError):
        return None


def experiment_id(client: Any, name: str, artifact_location: str | None = None) -> str:
    """The id of experiment ``name``, created if missing (safe when several processes race to create it)."""
    from mlflow.exceptions import MlflowException

    found = client.get_experiment_by_name(name)
    if found is not None:
        return found.experiment_id
    try:
        return client.create_experiment(name, artifact_location=artifact_location)
    except MlflowException:  # another process created it first
        found = client.get_experiment_by_name(name)
        if found is None:
            raise
        return found.experiment_id


def client_for(uri: str, timeout: float = 10.0) -> Any:
    """An ``MlflowClient`` on ``uri`` with this module's timeouts and telemetry off."""
    _client_env(timeout)
    from mlflow import MlflowClient

    return MlflowClient(uri)


class MlflowBackend(TrackerBackend):
    name = "mlflow"

    def __init__(self) -> None:
        self.client: Any = None
        self.run_id: str | None = None
        self.run_dir: Path | None = None

    def open(self, start: RunStart) -> set[int]:
        from mlflow.entities import Param

        self.run_dir = start.run_dir
        table = start.config["run"].get("mlflow") or {}
        uri = tracking_uri(start.config, start.run_dir)
        self.client = client_for(uri, start.timeout)
        state = read_state(start.run_dir) if start.resumed else None
        flat = {k: param_value(v) for k, v in flatten_config(start.config).items()}
        if state is not None and state.get("tracking_uri") == uri:
            self.run_id = state["run_id"]
            self.client.update_run(self.run_id, status="RUNNING")
            self._record_resume(flat, start)
            return {int(m.value) for m in self.client.get_metric_history(self.run_id, "update")}
        local = not ((table.get("tracking_uri")) or os.environ.get("MLFLOW_TRACKING_URI"))
        artifacts = (start.run_dir.resolve() / "mlartifacts").as_uri() if local else None
        exp = experiment_id(self.client, table.get("experiment") or DEFAULT_EXPERIMENT, artifacts)
        tags = {**{str(k): str(v) for k, v in (table.get("tags") or {}).items()}, **start.tags}
        if "parent_run_id" in tags:
            tags["mlflow.parentRunId"] = tags.pop("parent_run_id")
        run = self.client.create_run(exp, run_name=table.get("run_name") or start.run_dir.name, tags=tags)
        self.run_id = run.info.run_id
        data = {"run_id": self.run_id, "experiment_id": exp, "tracking_uri": uri}
        atomic_write(start.run_dir / STATE_FILE, lambda f: f.write((json.dumps(data, indent=2) + "\n").encode()))
        params = [Param(k, v) for k, v in flat.items()]
        for i in range(0, len(params), MAX_PARAMS):
            self.client.log_batch(self.run_id, params=params[i:i + MAX_PARAMS])
        return set()

    def _record_resume(self, flat: dict[str, str], start: RunStart) -> None:
        """Tags for what this resume changed: ``ppo_core.resume.<n>.update`` and ``...<key> = "old -> new"``."""
        run = self.client.get_run(self.run_id)
        n = int(run.data.tags.get("ppo_core.resumes", "0")) + 1
        tags = {"ppo_core.resumes": str(n), f"ppo_core.resume.{n}.update": str(start.update)}
        for key in sorted(set(flat) | set(run.data.params)):
            old, new = run.data.params.get(key), flat.get(key)
            if old != new:
                tags[f"ppo_core.resume.{n}.{key}"] = f"{old} -> {new}"[:MAX_PARAM_LENGTH]
        for key, value in tags.items():
            self.client.set_tag(self.run_id, key, value)

    def send(self, rows: list[dict[str, float]]) -> None:
        from mlflow.entities import Metric

        batch: list[Any] = []
        stamp = int(time.time() * 1000)
        for row in rows:  # a request holds whole rows: a resume sees a row entirely or not at all
            metrics = [Metric(k, float(v), stamp, int(row["env_steps"])) for k, v in row.items()]
            if len(batch) + len(metrics) > MAX_METRICS:
                self.client.log_batch(self.run_id, metrics=batch)
                batch = []
            batch.extend(metrics)
        if batch:
            self.client.log_batch(self.run_id, metrics=batch)

    def finish(self, end: RunEnd) -> None:
        from mlflow.entities import Metric

        run_dir = self.run_dir
        if end.status == FINISHED:
            step = int(end.summary.get("env_steps", 0))
            stamp = int(time.time() * 1000)
            numbers = [Metric(f"summary.{k}", float(v), stamp, step) for k, v in end.summary.items()
                       if isinstance(v, int | float) and not isinstance(v, bool) and v is not None]
            if numbers:
                self.client.log_batch(self.run_id, metrics=numbers)
            for name in ("config.toml", "summary.json"):
                if (run_dir / name).is_file():
                    self.client.log_artifact(self.run_id, str(run_dir / name))
            with tempfile.TemporaryDirectory() as tmp:
                try:
                    self.client.log_artifact(self.run_id, str(plot_runs([run_dir], Path(tmp) / "learning_curve.png")))
                except ConfigError:
                    pass  # no finished episode to draw
                if end.checkpoint is not None and Path(end.checkpoint).is_file():
                    self.client.log_artifact(self.run_id, str(end.checkpoint), "checkpoints")
                    model = Path(tmp) / POLICY_PATH
                    save_policy_model(Path(end.checkpoint), model)
                    self.client.log_artifacts(self.run_id, str(model), POLICY_PATH)
        self.client.set_terminated(self.run_id, status=end.status)
        self.run_id = None


def save_policy_model(checkpoint: Path, path: Path) -> None:
    """Save the deterministic policy of ``checkpoint`` as an MLflow pyfunc model in folder ``path``:
    MLflow's "models from code" with shell/policy_model.py as the code and the checkpoint as its one
    artifact; loading it needs this package installed (it calls :func:`shell.inference.load_policy`)."""
    import mlflow.pyfunc
    import torch

    code = import_util.find_spec("shell.policy_model").origin  # a file MLflow copies, not an import
    version = package_version()
    requirements = [f"ppo-core=={version}" if version else "ppo-core", f"torch=={torch.__version__.split('+')[0]}"]
    mlflow.pyfunc.save_model(str(path), python_model=code, artifacts={"checkpoint": str(checkpoint)},
                             pip_requirements=requirements)


def log_videos(run_dir: Path, paths: list[Path], timeout: float = 10.0) -> bool:
    """Log mp4s (``eval --video``) to the MLflow run of ``run_dir`` as artifacts under ``videos/``;
    False when the run dir has no MLflow run."""
    state = read_state(run_dir)
    if state is None:
        return False
    client = client_for(state["tracking_uri"], timeout)
    for path in paths:
        client.log_artifact(state["run_id"], str(path), "videos")
    return True
