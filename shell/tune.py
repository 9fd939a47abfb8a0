"""Hyperparameter search with Optuna: ``main.py tune``.

    python main.py tune --config acrobot.toml --trials 24 [--jobs 2] [--seeds 0 1 2]
                        [--total-timesteps T] [--set section.key=value ...] [--study-dir DIR]
                        [--storage URL] [--study NAME] [--space FILE] [--pruner median|hyperband|none]

A trial samples a config from the search space, trains it on each of its seeds in turn (``--seeds``,
else the config's ``[tune] seeds``, else 0 1 2; normal run dirs, ``STUDY_DIR/trials/<number>/s<seed>``)
and scores it by the mean of the runs' final
deterministic evaluations. The periodic evaluations (``[tune] evals`` per run) are reported to
Optuna as intermediate values, the mean over the seeds so far, so its pruner (median by default,
or Hyperband) can stop a poor trial early.

Processes. The ``tune`` command validates everything, creates or loads the study, then starts
``--jobs`` worker processes (``python -m shell tune-worker`` with this interpreter; it reads its settings
as JSON on stdin)
and waits for them. Workers are processes, not threads: PPO in one process does not gain from
threads, and each trial sets torch's global seed and thread count. They are started with
``subprocess`` (fork and exec), not forked copies of the parent, so no torch state crosses a fork;
each runs main.py's signal handling, and its stderr goes to ``STUDY_DIR/logs/worker_<i>.log``
while one line per trial reaches the terminal.

Storage. Optuna's RDB storage: SQLite in the study dir by default, or any SQLAlchemy URL
(``--storage postgresql://...``), which is how several machines share one study. Trials record
a heartbeat; a trial left RUNNING by a killed process is marked FAIL once its heartbeat is older
than three intervals, and retried once (Optuna's retry callback) with the same parameters; so is
a trial killed between its creation and its first heartbeat, which Optuna's check does not see.

Counting. ``--trials N`` is the study's total of COMPLETE and PRUNED trials; FAIL ones do not
count, so a rerun of the same command continues up to N. A worker starts a trial only while
``counted + running < N``; the workers of one machine take turns (a file lock in the study dir)
to count and start one, so they never overshoot. Workers on other machines are ordered by their
trials' start times: a trial that finds N others counted or started before it ends at once as
FAIL, marked ``surplus``.

Signals. A terminal's Ctrl-C reaches the parent and every worker (one process group); the parent
also forwards SIGINT/SIGTERM to its workers, so a signal sent to the parent alone stops them too.
A worker's first signal stops its trial at the trainer's next poll (later ones, such as the
forwarded copy of a terminal's Ctrl-C, are ignored): the trial is marked FAIL (never COMPLETE with a
partial value) and queued for one retry, and the worker exits 130/143; the parent waits for all of
them, writes the outputs and exits 130/143. A second signal to the parent kills the workers at once
(their trials are then found by the heartbeat and retried). A worker whose parent is gone (``kill
-9`` of the parent alone) stops its trial the same way.

Outputs in the study dir: ``best.toml`` (a complete config for ``main.py --config``),
``trials.csv``, ``history.png`` and ``importances.png`` (Optuna's matplotlib plots).
"""

from __future__ import annotations

import copy
import csv
import io
import json
import math
import os
import signal
import statistics
import subprocess
import sys
import time
import types
import typing
import warnings
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any, TextIO

import attrs

from shell.config import (
    SECTIONS,
    TUNE_SECTION,
    Config,
    config_from_saved,
    dump_toml,
    load_config,
    read_toml,
    resolve_config_path,
    section_from_dict,
    split_key,
)
from shell.errors import ConfigError, TrainingError
from shell.files import atomic_write
from shell.installation import install_hint, source_checkout
from shell.stop import StopRequest, exit_code

KINDS = ("log_uniform", "uniform", "int", "choice")
PRUNERS = ("median", "hyperband", "none")
DEFAULT_EVALS = 4
DEFAULT_SEEDS = (0, 1, 2)  # the seeds of a trial when neither --seeds nor [tune] seeds names them
DEFAULT_HEARTBEAT = 10
MAX_FAILURES_IN_A_ROW = 5
# Objective-defining keys: the seeds come from --seeds, evaluations from the tuner.
FIXED_KEYS = {"run.seed": "--seeds", "run.eval_every": "[tune] evals", "run.eval_episodes": "the config or --set",
              "run.eval_max_episode_steps": "the config or --set"}

DEFAULT_SPACE: dict[str, dict[str, Any]] = {
    "env.num_envs": {"choice": [16, 32]},
    "env.normalize_obs": {"choice": [False, True]},
    "ppo.num_steps": {"choice": [128, 256]},
    "ppo.num_minibatches": {"choice": [2, 4, 8]},
    "ppo.update_epochs": {"int": [4, 10]},
    "ppo.learning_rate": {"log_uniform": [5e-4, 3e-3]},
    "ppo.anneal_lr": {"choice": [True, False]},
    "ppo.gamma": {"choice": [0.98, 0.99, 0.995]},
    "ppo.gae_lambda": {"choice": [0.9, 0.95, 0.98]},
    "ppo.ent_coef": {"log_uniform": [1e-4, 2e-2]},
    "policy.hidden_sizes": {"choice": [[64, 64], [128, 128]]},
}
"""PPO's usual keys, around the values of the shipped classic-control configs. Batches of 2,048 to
8,192 transitions, at most 8 minibatches and 10 epochs keep a trial's update work at most twice the
shipped Acrobot config's (smaller batches made trials several times slower); every choice of
``num_minibatches`` divides every ``num_envs * num_steps``."""


NO_HEARTBEAT = "its worker stopped sending heartbeats before the trial ended (killed, hung, or its machine went down)"
"""The error a trial keeps when its worker dies: Optuna's heartbeat check fails it, and nothing else ran."""


class TrialInterrupted(Exception):
    """A stop request (signal, or the parent process gone) ended a trial before its result."""

    def __init__(self, signum: int):
        super().__init__(f"interrupted by {signal.Signals(signum).name}")
        self.signum = signum


class SurplusTrial(Exception):
    """The study already had ``--trials`` trials counted or started when this one started."""


class StaleTrial(Exception):
    """Another process failed this trial while it ran: its heartbeat looked stale."""


# ----------------------------------------------------------------------------- the search space
def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


@attrs.frozen
class Param:
    """One dimension of the search space: a config key and its distribution.

    ``kind`` is ``log_uniform`` or ``uniform`` (floats in ``[low, high]``), ``int`` (integers in
    ``[low, high]``, on a log scale when ``log``) or ``choice`` (one of ``choices``, any TOML values;
    Optuna sees lists and tables as their JSON text).
    """

    key: str
    kind: str
    low: float | None = None
    high: float | None = None
    log: bool = False
    choices: tuple[Any, ...] = ()

    @property
    def labels(self) -> list[Any] | None:
        """What Optuna stores for ``choices``: the values themselves when they are all of one plain
        type (bool, number or string), else their JSON text. None for the other kinds."""
        if self.kind != "choice":
            return None
        plain = (all(isinstance(c, bool) for c in self.choices) or all(_is_number(c) for c in self.choices)
                 or all(isinstance(c, str) for c in self.choices))
        return list(self.choices) if plain else [json.dumps(c) for c in self.choices]

    def suggest(self, trial: Any) -> Any:
        """Ask ``trial`` (an ``optuna.Trial``) for this key's value; returns the config value."""
        if self.kind == "log_uniform":
            return trial.suggest_float(self.key, self.low, self.high, log=True)
        if self.kind == "uniform":
            return trial.suggest_float(self.key, self.low, self.high)
        if self.kind == "int":
            return trial.suggest_int(self.key, int(self.low), int(self.high), log=self.log)
        return self.decode(trial.suggest_categorical(self.key, self.labels))

    def decode(self, stored: Any) -> Any:
        """The config value of a parameter value as Optuna stores it."""
        if self.kind == "choice":
            return self.choices[self.labels.index(stored)]
        return int(stored) if self.kind == "int" else float(stored)

    def to_spec(self) -> dict[str, Any]:
        """The TOML form, ``{kind = [low, high]}`` or ``{choice = [...]}``."""
        if self.kind == "choice":
            return {"choice": list(self.choices)}
        spec: dict[str, Any] = {self.kind: [self.low, self.high]}
        if self.log:
            spec["log"] = True
        return spec


def _flatten(table: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{ppo: {gamma: {uniform: [...]}}}`` and ``{"ppo.gamma": {uniform: [...]}}`` -> ``{"ppo.gamma": {...}}``.

    A table of tables is a level of the path; anything else (a distribution such as ``{uniform = [a, b]}``
    or a malformed value, refused later) is a leaf.
    """
    flat: dict[str, Any] = {}
    for name, value in table.items():
        path = f"{prefix}{name}"
        if isinstance(value, dict) and value and all(isinstance(v, dict) for v in value.values()):
            flat.update(_flatten(value, path + "."))
        else:
            flat[path] = value
    return flat


def _parse_param(key: str, spec: Any) -> Param:
    where = f"tune.space.{key}"
    example = "e.g. { log_uniform = [1e-4, 1e-2] }, { uniform = [0.9, 1.0] }, { int = [4, 16] }, { choice = [64, 128] }"
    if not isinstance(spec, dict):
        raise ConfigError(f"{where} = {spec!r}: expected a distribution, {example}")
    kinds = [k for k in spec if k in KINDS]
    if len(kinds) != 1:
        raise ConfigError(f"{where} = {spec!r}: name exactly one distribution of {list(KINDS)}, {example}")
    (kind,) = kinds
    extra = set(spec) - {kind} - ({"log"} if kind == "int" else set())
    if extra:
        raise ConfigError(f"{where}: unknown field(s) {sorted(extra)} in {spec!r}"
                          + ("; only int takes 'log = true'" if "log" in extra else ""))
    value = spec[kind]
    if kind == "choice":
        if not isinstance(value, list) or not value:
            raise ConfigError(f"{where}: choice needs a non-empty list of values, got {value!r}")
        if len({json.dumps(v, sort_keys=True) for v in value}) != len(value):
            raise ConfigError(f"{where}: choice lists a value twice: {value!r}")
        return Param(key, kind, choices=tuple(value))
    if not (isinstance(value, list) and len(value) == 2 and all(_is_number(v) for v in value)):
        raise ConfigError(f"{where}: {kind} needs [low, high] (two numbers), got {value!r}")
    low, high = value
    if not low < high:
        raise ConfigError(f"{where}: {kind} needs low < high, got {value!r}")
    log = spec.get("log", False)
    if not isinstance(log, bool):
        raise ConfigError(f"{where}: log must be true or false, got {log!r}")
    if kind == "int" and not all(isinstance(v, int) for v in value):
        raise ConfigError(f"{where}: int needs integer bounds, got {value!r}")
    if (kind == "log_uniform" or log) and low <= 0:
        raise ConfigError(f"{where}: a log scale needs low > 0, got {value!r}")
    return Param(key, kind, low, high, log)


def _check_param(param: Param) -> None:
    """Refuse a key that does not exist or defines the objective, a distribution that does not fit the
    key's type, and bounds or choices that the key's own validation refuses."""
    where = f"tune.space.{param.key}"
    try:
        section, key, sub = split_key(param.key)
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    if f"{section}.{key}" in FIXED_KEYS:
        raise ConfigError(f"{where}: {section}.{key} is not tuned; it comes from {FIXED_KEYS[f'{section}.{key}']}")
    hint = typing.get_type_hints(SECTIONS[section])[key]
    if typing.get_origin(hint) in (typing.Union, types.UnionType):  # X | None
        hint = next(a for a in typing.get_args(hint) if a is not type(None))
    base = typing.Any if sub else (typing.get_origin(hint) or hint)  # a name in env.kwargs: any TOML value
    allowed = {float: ("log_uniform", "uniform", "int", "choice"), int: ("int", "choice"),
               typing.Any: KINDS}.get(base, ("choice",))
    if param.kind not in allowed:
        kind = str(getattr(base, "__name__", base))
        raise ConfigError(f"{where}: {section}.{key} is {'an' if kind[0] in 'aeiou' else 'a'} {kind}; "
                          f"use {' or '.join(allowed)}")
    for value in param.choices or (param.low, param.high):
        try:
            section_from_dict(section, {key: {sub: value} if sub else value})
        except ConfigError as exc:
            raise ConfigError(f"{where}: {exc}") from None


def parse_space(table: Any, source: str) -> list[Param]:
    """The search space of a ``[tune.space]`` table: ``section.key = { kind = ... }`` per key.

    Raises:
        ConfigError: (one line naming ``source`` and the key) an empty or malformed table, an unknown
            distribution or key, a distribution that does not fit the key, or bounds the key refuses.
    """
    if not isinstance(table, dict) or not table:
        raise ConfigError(f"{source}: [tune.space] must be a non-empty table of section.key = {{ distribution }}")
    try:
        params = [_parse_param(key, spec) for key, spec in _flatten(table).items()]
        for param in params:
            _check_param(param)
    except ConfigError as exc:
        raise ConfigError(f"{source}: {exc}") from None
    return params


# ----------------------------------------------------------------------------- settings
@attrs.frozen
class Settings:
    """Everything a worker needs, sent to it as JSON on stdin (nothing of it is written to disk)."""

    config: dict[str, Any]  # the base config (file, --set, --total-timesteps), as Config.to_dict()
    space: list[Param]
    seeds: list[int]
    evals: int
    trials: int
    storage: str
    study: str
    study_dir: str
    pruner: str
    heartbeat: int
    parent_pid: int

    def to_json(self) -> str:
        data = attrs.asdict(self, recurse=False)
        data["space"] = {p.key: p.to_spec() for p in self.space}
        return json.dumps(data)

    @classmethod
    def from_json(cls, text: str) -> Settings:
        data = json.loads(text)
        data["space"] = [_parse_param(key, spec) for key, spec in data["space"].items()]
        return cls(**data)

    def identity(self) -> dict[str, Any]:
        """What makes trials comparable: a rerun or another machine must use the same."""
        return {"config": self.config, "space": {p.key: p.to_spec() for p in self.space}, "seeds": self.seeds,
                "evals": self.evals}


def _read_tune_table(path: Path) -> dict[str, Any]:
    table = read_toml(path).get(TUNE_SECTION, {})
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [tune] must be a table")
    return table


def resolve_settings(config: str, trials: int, seeds: list[int] | None, total_timesteps: int | None,
                     overrides: list[str], study_dir: str | None, storage: str | None, study: str | None,
                     space: str | None, pruner: str | None, heartbeat: int) -> tuple[Settings, Config, list[str]]:
    """Check the command's input and resolve it into :class:`Settings` (the study dir is not created).

    Returns the settings, the base config and notes for the user (keys fixed by ``--set``).

    Raises:
        ConfigError: a bad config, space, seed list or [tune] table.
    """
    path = resolve_config_path(config)
    base = load_config(config, overrides, total_timesteps=total_timesteps)
    table = _read_tune_table(path)
    unknown = set(table) - {"space", "evals", "pruner", "seeds"}
    if unknown:
        raise ConfigError(f"{path}: unknown key(s) {sorted(unknown)} in [tune]; known: evals, pruner, seeds, space")
    if seeds is None:  # --seeds, else the config's [tune] seeds, else 0 1 2
        seeds = table.get("seeds", list(DEFAULT_SEEDS))
        if (not isinstance(seeds, list) or not seeds
                or not all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in seeds)):
            raise ConfigError(f"{path}: tune.seeds = {seeds!r}: needs a non-empty list of integers >= 0")
    evals = table.get("evals", DEFAULT_EVALS)
    if not isinstance(evals, int) or isinstance(evals, bool) or evals < 0:
        raise ConfigError(f"{path}: tune.evals = {evals!r}: needs an integer >= 0 (periodic evaluations per run)")
    pruner = pruner or table.get("pruner", "median")
    if pruner not in PRUNERS:
        raise ConfigError(f"{path}: tune.pruner = {pruner!r}: choose one of {list(PRUNERS)}")
    if space is not None:
        space_path = Path(space)
        if not space_path.is_file():
            raise ConfigError(f"--space {space}: no such file")
        space_table, source = _read_tune_table(space_path).get("space"), f"--space {space}"
        if space_table is None:
            raise ConfigError(f"--space {space}: no [tune.space] table in it")
    elif "space" in table:
        space_table, source = table["space"], str(path)
    else:
        space_table, source = DEFAULT_SPACE, "the default space"
    params = parse_space(space_table, source)
    fixed = [text.partition("=")[0].strip() for text in overrides]
    if total_timesteps is not None:
        fixed.append("run.total_timesteps")
    is_fixed = [any(p.key == f or p.key.startswith(f + ".") for f in fixed) for p in params]
    notes = [f"{p.key} is fixed by the command line, not tuned" for p, out in zip(params, is_fixed, strict=True) if out]
    params = [p for p, out in zip(params, is_fixed, strict=True) if not out]
    if not params:
        raise ConfigError(f"{source}: every key of the space is fixed by --set or --total-timesteps; nothing to tune")
    if not base.run.eval_episodes:
        raise ConfigError("tuning scores trials by their final evaluation; set run.eval_episodes >= 1")
    if len(set(seeds)) != len(seeds):
        raise ConfigError(f"--seeds {' '.join(map(str, seeds))}: a seed is listed twice")
    name = study or path.stem
    directory = Path(study_dir) if study_dir else _default_study_dir(path.stem)
    url = storage or f"sqlite:///{directory.resolve() / 'study.db'}"
    settings = Settings(config=base.to_dict(), space=params, seeds=list(seeds), evals=evals, trials=trials,
                        storage=url, study=name, study_dir=str(directory.resolve()), pruner=pruner,
                        heartbeat=heartbeat, parent_pid=os.getpid())
    return settings, base, notes


def _default_study_dir(stem: str) -> Path:
    base = Path("runs") / f"tune_{stem}__{datetime.now().strftime('%Y%m%d-%H%M%S')}"
    path, i = base, 1
    while path.exists():
        path, i = base.with_name(f"{base.name}-{i}"), i + 1
    return path


# ----------------------------------------------------------------------------- Optuna plumbing
def _optuna():
    """Import optuna quietly, or say which extra installs it."""
    try:
        import optuna
    except ImportError:
        raise ConfigError(f"tune needs Optuna; run: {install_hint('tune')}") from None
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    warnings.filterwarnings("ignore", category=FutureWarning, module="optuna")
    return optuna


def masked(url: str) -> str:
    """The storage URL with its password hidden, for messages and summaries."""
    try:
        from sqlalchemy.engine import make_url

        return make_url(url).render_as_string(hide_password=True)
    except Exception:
        return url


def open_storage(url: str, heartbeat: int | None = None) -> Any:
    """Optuna's RDB storage at ``url``; with ``heartbeat`` (seconds), trials record a heartbeat and a
    trial whose heartbeat is older than three intervals is failed and retried once.

    Raises:
        ConfigError: a URL SQLAlchemy cannot parse, a missing database driver, or a database that
            cannot be reached or created.
    """
    optuna = _optuna()
    kwargs: dict[str, Any] = {}
    sqlite = url.startswith("sqlite")
    if sqlite:
        # Several processes write one file: a transaction waits up to 60 s for the lock. pysqlite's own
        # (deferred) transactions are turned off so that _begin_immediate can take the write lock first.
        kwargs["engine_kwargs"] = {"connect_args": {"timeout": 60, "isolation_level": None}}
    if heartbeat is not None:
        retry_class = getattr(optuna.storages, "RetryHeartbeatStaleTrialCallback", None)
        if retry_class is not None:  # Optuna >= 4.9
            kwargs["heartbeat_stale_trial_callback"] = retry_class(max_retry=1)
        else:
            kwargs["failed_trial_callback"] = optuna.storages.RetryFailedTrialCallback(max_retry=1)
        kwargs.update(heartbeat_interval=heartbeat, grace_period=3 * heartbeat)
    try:
        storage = optuna.storages.RDBStorage(url, **kwargs)
        if sqlite:
            _begin_immediate(storage.engine)
        return storage
    except ImportError as exc:
        raise ConfigError(f"--storage {masked(url)}: its database driver is missing ({exc}); e.g. pip install "
                          "psycopg2-binary for postgresql://, pymysql for mysql+pymysql://") from None
    except Exception as exc:
        message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ConfigError(f"--storage {masked(url)}: cannot open it: {message} (expected a SQLAlchemy URL such as "
                          "sqlite:///study.db or postgresql://user:password@host/db)") from None


def _begin_immediate(engine: Any) -> None:
    """Start every SQLite transaction with ``BEGIN IMMEDIATE``: it takes the write lock at once (waiting
    for it), where a deferred transaction that reads and then writes can fail at once with "database
    is locked" when another process writes (SQLAlchemy's recipe for pysqlite transactions)."""
    from sqlalchemy import event

    @event.listens_for(engine, "begin")
    def begin(connection: Any) -> None:
        connection.exec_driver_sql("BEGIN IMMEDIATE")


def _pruner(optuna: Any, settings: Settings) -> Any:
    per_seed = settings.evals + 1  # the periodic evaluations, then the final one
    if settings.pruner == "median":
        # no decision before the first seed's final evaluation; five trials first to compare with
        return optuna.pruners.MedianPruner(n_startup_trials=5, n_warmup_steps=per_seed)
    if settings.pruner == "hyperband":
        return optuna.pruners.HyperbandPruner(min_resource=per_seed, max_resource=per_seed * len(settings.seeds),
                                              reduction_factor=3)
    return optuna.pruners.NopPruner()


def _sampler(optuna: Any, settings: Settings) -> Any:
    # constant_liar: workers that sample at the same time do not pick the same point
    return optuna.samplers.TPESampler(n_startup_trials=max(4, min(10, settings.trials // 3)), constant_liar=True)


def _counts(study: Any) -> dict[str, int]:
    counts = {"COMPLETE": 0, "PRUNED": 0, "FAIL": 0, "RUNNING": 0, "WAITING": 0}
    for trial in study.get_trials(deepcopy=False):
        counts[trial.state.name] = counts.get(trial.state.name, 0) + 1
    return counts


def _counted(counts: dict[str, int]) -> int:
    return counts["COMPLETE"] + counts["PRUNED"]


def load_study(settings: Settings, heartbeat: bool = False) -> Any:
    """Create the study or load it; a study made with other settings (config, space, seeds) is refused.

    Raises:
        ConfigError: see :func:`open_storage`; a study of the same name that minimises, or that was
            made with other settings.
    """
    optuna = _optuna()
    storage = open_storage(settings.storage, settings.heartbeat if heartbeat else None)
    try:
        study = optuna.create_study(study_name=settings.study, storage=storage, direction="maximize",
                                    load_if_exists=True, sampler=_sampler(optuna, settings),
                                    pruner=_pruner(optuna, settings))
    except ValueError as exc:
        raise ConfigError(f"study {settings.study!r} in {masked(settings.storage)}: {exc}") from None
    if study.direction != optuna.study.StudyDirection.MAXIMIZE:
        raise ConfigError(f"study {settings.study!r} in {masked(settings.storage)} minimises; "
                          "tune maximises the eval return: pick another --study")
    identity = json.loads(json.dumps(settings.identity()))
    saved = study.user_attrs.get("ppo_core_tune")
    if saved is None:
        study.set_user_attr("ppo_core_tune", identity)
    elif saved != identity:
        differ = [k for k in identity if saved.get(k) != identity[k]]
        detail = ""
        if differ == ["config"]:
            keys = [f"{s}.{k}" for s in identity["config"] for k in identity["config"][s]
                    if saved["config"].get(s, {}).get(k) != identity["config"][s][k]]
            detail = f" ({', '.join(keys)})"
        raise ConfigError(f"study {settings.study!r} in {masked(settings.storage)} was made with other settings: "
                          f"{' and '.join(differ)}{detail} differ; rerun it with the same settings, or pick another "
                          "--study or --study-dir")
    return study


# ----------------------------------------------------------------------------- the parent: tune
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
    if remaining > 0 and not stop.requested:
        failures = _run_workers(settings, min(jobs, remaining), stop)
    result = write_outputs(study_obj, settings)
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
    """Build the base config's env once, so a bad id, kwarg or space is one line here, not a failed trial."""
    import torch

    from shell.envs import make_env

    env = make_env(config.env, torch.device("cpu"), num_envs=1)
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
                proc = subprocess.Popen([sys.executable, "-m", "shell", "tune-worker"], stdin=subprocess.PIPE,
                                        stdout=_stderr_fd(), stderr=log, text=True, env=_worker_environment())
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


def _worker_environment() -> dict[str, str]:
    """The environment of a worker (``python -m shell tune-worker``): ours, plus, when this package runs
    from a source checkout that may not be installed, that checkout first on PYTHONPATH, so the worker
    imports the same code from any folder. An installed package needs nothing."""
    env = dict(os.environ)
    root = source_checkout()
    if root is not None:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(root), env.get("PYTHONPATH")) if p)
    return env


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


# ----------------------------------------------------------------------------- a worker
class _StudyLock:
    """An exclusive ``flock`` on a file in the study dir: the workers of one machine take turns to
    count the study's trials and start one. (Without fcntl, as on Windows, it does nothing and the
    start-time rule of :func:`_is_surplus` alone keeps the count.)"""

    def __init__(self, path: Path):
        self._file = open(path, "a+")  # held for the worker's life
        self._held = False

    def acquire(self) -> None:
        try:
            import fcntl
        except ImportError:
            return
        fcntl.flock(self._file.fileno(), fcntl.LOCK_EX)
        self._held = True

    def release(self) -> None:
        if self._held:
            import fcntl

            fcntl.flock(self._file.fileno(), fcntl.LOCK_UN)
            self._held = False


def _is_surplus(study: Any, trial: Any, total: int) -> bool:
    """Whether ``total`` trials were already counted, or started before this one, when it started.

    On one machine the lock makes this never true; across machines, trials that start at the same
    moment on the last slots are settled by their start times (then numbers): the later ones give way.
    """
    optuna = _optuna()
    states = optuna.trial.TrialState
    mine = (trial.datetime_start, trial.number)
    ahead = 0
    for other in study.get_trials(deepcopy=False, states=(states.COMPLETE, states.PRUNED, states.RUNNING)):
        if other.state == states.RUNNING and (other.number == trial.number
                                              or (other.datetime_start, other.number) > mine):
            continue
        ahead += 1
    return ahead >= total


def trial_config(settings: Settings, params: dict[str, Any], seed: int | None = None) -> Config:
    """The base config with a trial's parameters (config values, not Optuna's stored ones) applied.

    With ``seed``, also the run's seed and the tuner's evaluation period: ``[tune] evals`` periodic
    evaluations, evenly spread over the run. Without, the config as ``best.toml`` writes it.

    Raises:
        ConfigError: the combination is invalid (e.g. a batch that num_minibatches does not divide).
    """
    data = copy.deepcopy(settings.config)
    for key, value in params.items():
        section, name, sub = split_key(key)
        if sub is None:
            data[section][name] = value
        else:
            data[section][name] = {**(data[section][name] or {}), sub: value}
    config = config_from_saved(data)
    if seed is None:
        return config
    num_updates = -(-config.run.total_timesteps // config.batch_size)
    every = -(-num_updates // (settings.evals + 1)) if settings.evals else 0
    return config_from_saved(data, seed=seed, eval_every=every)


def run_worker(settings_json: str, stop: StopRequest, console: TextIO = sys.stdout) -> int:
    """One worker: run trials of the study until it has ``trials`` counted ones, or a stop request.

    Returns the exit code: 0, or 130/143 after a stop request (the running trial is then FAIL and
    queued for one retry).

    Raises:
        ConfigError: the storage cannot be opened.
        TrainingError: ``MAX_FAILURES_IN_A_ROW`` trials in a row failed (a broken space or env).
    """
    optuna = _optuna()
    import torch

    import shell.api  # noqa: F401 - torch and gymnasium load here, not inside a trial's heartbeat

    torch.set_num_threads(1)  # a worker process is the CLI's: small policies train fastest on one thread

    settings = Settings.from_json(settings_json)
    study = load_study(settings, heartbeat=True)
    lock = _StudyLock(Path(settings.study_dir) / ".tune.lock")
    retry = (getattr(optuna.storages, "RetryHeartbeatStaleTrialCallback", None)
             or optuna.storages.RetryFailedTrialCallback)(max_retry=1)
    unborn: dict[int, float] = {}

    def say(text: str) -> None:
        print(f"tune: {text}", file=console, flush=True)

    def parent_gone() -> bool:
        return os.getppid() != settings.parent_pid

    failures_in_a_row, waiting_said = 0, False
    while not stop.requested:
        if parent_gone():
            stop.request(signal.SIGTERM)
            break
        lock.acquire()
        try:
            if stop.requested:  # while it waited for the lock
                break
            optuna.storages.fail_stale_trials(study)  # killed trials: FAIL, and queued for one retry
            _fail_unborn_trials(study, unborn, 3 * settings.heartbeat, retry)
            counts = _counts(study)
            if _counted(counts) >= settings.trials:
                break
            if _counted(counts) + counts["RUNNING"] >= settings.trials:
                lock.release()
                if not waiting_said:
                    say(f"waiting for {counts['RUNNING']} running trial(s) to end")
                    waiting_said = True
                _sleep(1.0, stop, parent_gone)
                continue
            outcome = _run_one_trial(study, settings, lock, stop, parent_gone, say)
        finally:
            lock.release()
        trial, error = outcome
        frozen = _stored(study, trial.number)
        counts = _counts(study)
        tally = f"{_counted(counts)} of {settings.trials} counted"
        if isinstance(error, TrialInterrupted):
            retry(study, frozen)  # as the heartbeat check does for a killed trial: one retry at most
            again = ("it is queued to run again" if "retry_history" not in frozen.system_attrs
                     else "it was a retry already, so it is not queued again")
            say(f"trial {trial.number} FAIL ({error}); {again}")
            break
        if isinstance(error, SurplusTrial):
            say(f"trial {trial.number} not run: {error}")
            continue
        if isinstance(error, StaleTrial):
            continue
        if frozen.state.name == "FAIL":
            failures_in_a_row += 1
            reason = frozen.user_attrs.get("error", "")
            say(f"trial {trial.number} FAIL: {reason} ({tally})")
            if failures_in_a_row >= MAX_FAILURES_IN_A_ROW:
                raise TrainingError(f"{failures_in_a_row} trials in a row failed, the last with: {reason}")
            continue
        failures_in_a_row = 0
        value = f" {frozen.value:.2f}" if frozen.value is not None else ""
        if frozen.state.name == "PRUNED" and frozen.intermediate_values:
            step = max(frozen.intermediate_values)
            value = f" at step {step} ({frozen.intermediate_values[step]:.2f})"
        best = ""
        if counts["COMPLETE"]:
            best = f"; best {study.best_value:.2f} (trial {study.best_trial.number})"
        say(f"trial {trial.number} {frozen.state.name}{value} ({tally}{best})")
    return exit_code(stop.signum) if stop.requested else 0


def _fail_unborn_trials(study: Any, unborn: dict[int, float], grace: float, retry: Callable[..., None]) -> None:
    """Fail (and queue for one retry) RUNNING trials that have had no heartbeat for ``grace`` seconds
    of this process's clock since it first saw them.

    Optuna's stale check skips a trial with no heartbeat at all: one whose process was killed
    between creating it and its first heartbeat, a few milliseconds later, would stay RUNNING for
    ever and hold its slot of the total. ``unborn`` maps trial ids to when they were first seen so
    (a monotonic time, so the clocks of other machines do not matter); live trials leave it at
    their first heartbeat.
    """
    from sqlalchemy import text

    optuna = _optuna()
    running = {t._trial_id: t for t in study.get_trials(deepcopy=False,
                                                          states=(optuna.trial.TrialState.RUNNING,))}
    if not running:
        unborn.clear()
        return
    engine = _rdb_engine(study)
    with engine.connect() as connection:
        beating = {row[0] for row in connection.execute(text("SELECT trial_id FROM trial_heartbeats"))}
    now = time.monotonic()
    for trial_id in list(unborn):
        if trial_id not in running or trial_id in beating:
            del unborn[trial_id]
    for trial_id in running.keys() - beating:
        first_seen = unborn.setdefault(trial_id, now)
        if now - first_seen < grace:
            continue
        try:
            failed = study._storage.set_trial_state_values(trial_id, state=optuna.trial.TrialState.FAIL)
        except optuna.exceptions.UpdateFinishedTrialError:  # another process got there first
            failed = False
        del unborn[trial_id]
        if failed:
            retry(study, copy.deepcopy(study._storage.get_trial(trial_id)))


def _rdb_engine(study: Any) -> Any:
    """The SQLAlchemy engine under the study's storage (Optuna wraps RDBStorage in a cache)."""
    storage = study._storage
    return getattr(storage, "_backend", storage).engine


def _sleep(seconds: float, stop: StopRequest, parent_gone: Callable[[], bool]) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not stop.requested and not parent_gone():
        time.sleep(0.1)


def _run_one_trial(study: Any, settings: Settings, lock: _StudyLock, stop: StopRequest,
                   parent_gone: Callable[[], bool], say: Callable[[str], None]) -> tuple[Any, BaseException | None]:
    """Ask for one trial (Optuna pops a queued retry first) and run it through ``study.optimize``, which
    records its heartbeat and its state. Returns the trial and the exception that ended it, if any."""
    optuna = _optuna()
    state: dict[str, Any] = {}

    def objective(trial: Any) -> float:
        lock.release()  # the trial exists (RUNNING): the next worker may count it and start another
        state["trial"] = trial
        try:
            value = _objective(trial, study, settings, stop, parent_gone, say)
        except BaseException as exc:
            state["error"] = exc
            if isinstance(exc, TrialInterrupted):
                trial.set_user_attr("error", str(exc))
            elif isinstance(exc, optuna.TrialPruned):
                trial.set_user_attr("error", "")
            elif not isinstance(exc, SurplusTrial):
                trial.set_user_attr("error", f"{type(exc).__name__}: {exc}".splitlines()[0][:300])
            raise
        trial.set_user_attr("error", "" if math.isfinite(value) else "non-finite result")
        return value

    try:
        study.optimize(objective, n_trials=1, catch=(), gc_after_trial=False)
    except Exception as exc:
        if exc is state.get("error"):  # the objective's: optimize recorded the trial FAIL
            pass
        elif "trial" in state and _stored(study, state["trial"].number).state.name != "RUNNING":
            # another process failed this trial while it ran (its heartbeat looked stale), so Optuna
            # could not record it; that process queued its retry
            say(f"trial {state['trial'].number} was failed by another process while it ran; its retry runs it again")
            state["error"] = StaleTrial()
        else:
            raise
    return state["trial"], state.get("error")


def _stored(study: Any, number: int) -> Any:
    """The stored (frozen) trial of this number."""
    return next(t for t in study.get_trials(deepcopy=False) if t.number == number)


def _objective(trial: Any, study: Any, settings: Settings, stop: StopRequest, parent_gone: Callable[[], bool],
               say: Callable[[str], None]) -> float:
    """Train the trial's config on each seed; report the evaluations; return the mean final eval."""
    optuna = _optuna()
    from shell.api import train  # imported by run_worker before any trial starts

    trial.set_user_attr("evals", [])  # a retry inherits its original's attributes
    trial.set_user_attr("error", NO_HEARTBEAT)  # what stays if its worker dies; any ending replaces it
    if _is_surplus(study, trial, settings.trials):
        trial.set_user_attr("error", "surplus")
        raise SurplusTrial(f"{settings.trials} trials were already counted or running when it started")
    params = {p.key: p.suggest(trial) for p in settings.space}
    retry_of = _stored(study, trial.number).system_attrs.get("failed_trial")
    say(f"trial {trial.number} started{f' (retry of trial {retry_of})' if retry_of is not None else ''}: "
        + ", ".join(f"{k}={v}" for k, v in params.items()))
    trial_config(settings, params)  # an invalid combination fails here, before any run dir
    per_seed = settings.evals + 1
    finals: list[float] = []
    for index, seed in enumerate(settings.seeds):
        if stop.requested:
            raise TrialInterrupted(stop.signum)
        config = trial_config(settings, params, seed)
        run_dir = Path(settings.study_dir) / "trials" / f"{trial.number:04d}" / f"s{seed}"
        periodic = 0

        def report(row: dict[str, Any], index: int = index, seed: int = seed) -> None:
            nonlocal periodic
            if parent_gone():
                stop.request(signal.SIGTERM)  # the trainer stops at its next poll
            if row["eval_return"] == "":
                return
            periodic += 1
            trial.report(statistics.fmean([*finals, float(row["eval_return"])]), index * per_seed + periodic)
            if trial.should_prune():
                raise optuna.TrialPruned(f"at seed {seed}, update {row['update']}")

        summary = train(config, run_dir=run_dir, stop=stop, callbacks=[report], progress=False).summary
        if summary["interrupted"]:
            raise TrialInterrupted(stop.signum or signal.SIGTERM)
        finals.append(float(summary["eval_return_mean"]))
        trial.set_user_attr("evals", finals)
        value = statistics.fmean(finals)
        if index + 1 < len(settings.seeds):
            trial.report(value, (index + 1) * per_seed)
            if trial.should_prune():
                raise optuna.TrialPruned(f"after seed {seed}")
    return statistics.fmean(finals)


# ----------------------------------------------------------------------------- outputs
def _param_columns(trials: list[Any]) -> list[str]:
    return sorted({key for t in trials for key in t.params})


def write_outputs(study: Any, settings: Settings) -> dict[str, Any]:
    """Write trials.csv, best.toml and the plots into the study dir; return the command's summary."""
    directory = Path(settings.study_dir)
    trials = study.get_trials(deepcopy=False)
    space = {p.key: p for p in settings.space}
    _write_trials_csv(directory / "trials.csv", trials, space)
    counts = _counts(study)
    result: dict[str, Any] = {
        "study": settings.study, "storage": masked(settings.storage), "study_dir": str(directory),
        "trials": settings.trials, "counted": _counted(counts), "complete": counts["COMPLETE"],
        "pruned": counts["PRUNED"], "failed": counts["FAIL"], "running": counts["RUNNING"],
        "waiting": counts["WAITING"], "trials_csv": str(directory / "trials.csv"),
    }
    complete = [t for t in trials if t.state.name == "COMPLETE"]
    if complete:
        best = max(complete, key=lambda t: t.value)
        params = {key: space[key].decode(value) for key, value in best.params.items() if key in space}
        config = trial_config(settings, params)
        header = (f"# Best config of study {settings.study!r}: trial {best.number}, mean final deterministic eval "
                  f"{best.value:.3f} over seeds {settings.seeds}\n# (per seed: {best.user_attrs.get('evals')}) at "
                  f"{config.run.total_timesteps} steps each. Run it with: ppo-core --config <this file>\n"
                  "# Tuned keys: " + ", ".join(f"{k} = {json.dumps(v)}" for k, v in params.items()) + "\n\n")
        atomic_write(directory / "best.toml", lambda f: f.write((header + dump_toml(config)).encode()))
        result.update(best_trial=best.number, best_value=best.value, best_params=params,
                      best_config=str(directory / "best.toml"))
    result["plots"], result["notes"] = _plots(study, directory, len(complete))
    return result


def _write_trials_csv(path: Path, trials: list[Any], space: dict[str, Param]) -> None:
    columns = _param_columns(trials)
    buffer = io.StringIO(newline="")
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["number", "state", "value", "seed_evals", "last_step", "last_reported", "retry_of",
                     "duration_s", "datetime_start", "datetime_complete", "error", *columns])
    for t in trials:
        duration = (t.datetime_complete - t.datetime_start).total_seconds() if t.datetime_complete and \
            t.datetime_start else ""
        evals = t.user_attrs.get("evals") or []
        last = max(t.intermediate_values) if t.intermediate_values else None
        writer.writerow([
            t.number, t.state.name, "" if t.value is None else t.value, " ".join(f"{v:.3f}" for v in evals),
            "" if last is None else last, "" if last is None else t.intermediate_values[last],
            t.system_attrs.get("failed_trial", ""), round(duration, 1) if duration != "" else "",
            t.datetime_start.isoformat(timespec="seconds") if t.datetime_start else "",
            t.datetime_complete.isoformat(timespec="seconds") if t.datetime_complete else "",
            t.user_attrs.get("error", "") if t.state.name == "FAIL" else "",  # a queued retry inherits one
            *[json.dumps(space[c].decode(t.params[c])) if c in t.params and c in space
              else t.params.get(c, "") for c in columns],
        ])
    atomic_write(path, lambda f: f.write(buffer.getvalue().encode()))


def _plots(study: Any, directory: Path, complete: int) -> tuple[dict[str, str], list[str]]:
    """history.png (with >= 1 completed trial) and importances.png (with >= 2); notes for what was skipped."""
    plots: dict[str, str] = {}
    notes: list[str] = []
    if not complete:
        return plots, ["no completed trial yet: no plots"]
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from optuna.visualization import matplotlib as optuna_plots

    drawings: list[tuple[str, Callable[[], Any]]] = [("history", lambda: optuna_plots.plot_optimization_history(study))]
    if complete >= 2:
        drawings.append(("importances", lambda: optuna_plots.plot_param_importances(study)))
    else:
        notes.append("parameter importances need >= 2 completed trials: importances.png not drawn")
    for name, draw in drawings:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                ax = draw()
            figure = ax.figure if hasattr(ax, "figure") else ax.flat[0].figure
            figure.set_size_inches(8, 5)
            figure.tight_layout()
            path = directory / f"{name}.png"
            figure.savefig(path, dpi=110)
            plt.close(figure)
            plots[name] = str(path)
        except Exception as exc:  # a plot is a convenience: never fail the study over one
            notes.append(f"{name}.png not drawn: {type(exc).__name__}: {exc}".splitlines()[0])
    return plots, notes

