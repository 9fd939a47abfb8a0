"""The study and everything that talks to Optuna's storage: importing Optuna, opening the storage, creating
or loading the study with its sampler and pruner, counting its trials, the file lock under which the workers
of one machine count and start trials, and failing trials whose worker died before their first heartbeat.

All of this package's use of Optuna's private API, and all of its raw SQL, is in this module; the comment
below says what it relies on.
"""

# Optuna's private behaviour this module relies on. Checked against Optuna 5.0.0 (the tests run on it) and
# by reading the sources of 4.0.0, 4.2.0, 4.3.0, 4.4.0 and 4.6.0: all of it is the same there except as noted.
# - ``Study._storage``: the storage under a study; for an RDBStorage, Optuna wraps it in its
#   ``_CachedStorage``, whose ``_backend`` is the RDBStorage (_rdb_engine). _fail_unborn_trials calls its
#   ``set_trial_state_values(trial_id, state=FAIL)`` (as Optuna's own fail_stale_trials does) and
#   ``get_trial(trial_id)``.
# - ``FrozenTrial._trial_id``: the storage's id of a trial (``number`` counts within one study).
# - ``RDBStorage.engine`` (an undocumented attribute): its SQLAlchemy engine. open_storage has every SQLite
#   transaction begin with the raw ``BEGIN IMMEDIATE`` (_begin_immediate); _fail_unborn_trials reads the
#   table ``trial_heartbeats`` (column ``trial_id``), where RDBStorage keeps a row per trial that has sent a
#   heartbeat (its model ``TrialHeartbeatModel``).
# - ``optuna.exceptions.UpdateFinishedTrialError``: what ``set_trial_state_values`` raises when another
#   process finished the trial first. It exists from Optuna 4.3.0 on; 4.0 to 4.2 raise a plain RuntimeError
#   there, and the ``except`` clause that names the class would itself fail with AttributeError.
# - ``RDBStorage`` itself, subclassed by _retrying_storage_class: its constructor creates the tables (two
#   processes that do so at once on a fresh database collide: open_storage retries), and each of its methods that
#   the ``BaseStorage`` and heartbeat interfaces name writes in one transaction of its own, committed at its end,
#   so a call that failed with a lost connection changed nothing and can be made again (_retried).
# - The system attributes that the retry callbacks (RetryFailedTrialCallback; RetryHeartbeatStaleTrialCallback
#   from 4.9) give a queued retry: ``failed_trial``, the first trial of its series, and ``retry_history``
#   (_retry_of and _is_retry; Optuna's own accessors for them are experimental).

from __future__ import annotations

import copy
import functools
import inspect
import json
import math
import random
import sys
import threading
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from shell.errors import ConfigError
from shell.installation import install_hint
from shell.tune.settings import Settings
from shell.tune.space import decode_params


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


STORAGE_RETRY_SECONDS = 300.0
"""How long an operation on an open storage is retried while its database cannot be reached (a server
restarting, a network outage), every second or sooner; then it fails."""

OPEN_ATTEMPTS = 20
"""How many times opening a storage is tried when it fails because another process created the same tables
at the same moment (two workers starting together on a fresh database)."""


def open_storage(url: str, heartbeat: int | None = None, wait: bool = False) -> Any:
    """Optuna's RDB storage at ``url``; with ``heartbeat`` (seconds), trials record a heartbeat and a
    trial whose heartbeat is older than three intervals is failed and retried once. With ``wait`` (a
    worker, started after its parent reached the database), a database that cannot be reached is waited
    for, as a call is once open; without it (the parent), it is a ConfigError at once, since a wrong host
    or port is likelier than an outage.

    Opening it is safe to race: processes that create the tables of a fresh database at the same moment
    try again (up to ``OPEN_ATTEMPTS`` times) and find them made. Once open, each operation that fails
    because the database cannot be reached is retried for up to ``STORAGE_RETRY_SECONDS``.

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
    else:
        # a pooled connection that a server restart closed is found and replaced before it is used
        kwargs["engine_kwargs"] = {"pool_pre_ping": True}
    if heartbeat is not None:
        kwargs[_retry_api()[0]] = retry_callback()
        kwargs.update(heartbeat_interval=heartbeat, grace_period=3 * heartbeat)
    make = _retrying_storage_class(optuna)
    for attempt in range(OPEN_ATTEMPTS):
        try:
            if wait:
                storage = _call_with_retry(lambda: make(url, **copy.deepcopy(kwargs)))
            else:
                storage = make(url, **copy.deepcopy(kwargs))
            if sqlite:
                _begin_immediate(storage.engine)
            return storage
        except ImportError as exc:
            raise ConfigError(f"--storage {masked(url)}: its database driver is missing ({exc}); "
                              f"{install_hint('tune')} brings psycopg for postgresql://; for "
                              "mysql+pymysql://, pip install pymysql") from None
        except Exception as exc:
            if _created_by_another(exc) and attempt + 1 < OPEN_ATTEMPTS:
                time.sleep(random.uniform(0.05, 0.3))  # another process is creating the tables: let it finish
                continue
            message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise ConfigError(f"--storage {masked(url)}: cannot open it: {message} (expected a SQLAlchemy URL such "
                              "as sqlite:///study.db or postgresql://user:password@host/db)") from None
    raise AssertionError("unreachable")


def _created_by_another(exc: BaseException) -> bool:
    """Whether ``exc`` says that another process created a table, type or row at the same moment: a
    UniqueViolation (PostgreSQL's catalogue), "already exists" (SQLite, MySQL), a duplicate key."""
    from sqlalchemy import exc as sa_exc

    if isinstance(exc, sa_exc.IntegrityError):
        return True
    text = str(exc).lower()
    return isinstance(exc, sa_exc.DBAPIError) and ("already exists" in text or "duplicate" in text)


def _unreachable(exc: BaseException) -> bool:
    """Whether ``exc`` (or an exception it was raised from, as Optuna's StorageInternalError is) says that
    the database could not be reached or the connection was lost: SQLAlchemy's OperationalError or
    InterfaceError, or a DBAPIError that invalidated its connection."""
    from sqlalchemy import exc as sa_exc

    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, (sa_exc.OperationalError, sa_exc.InterfaceError)):
            return True
        if isinstance(exc, sa_exc.DBAPIError) and exc.connection_invalidated:
            return True
        exc = exc.__cause__ or exc.__context__
    return False


_retrying_now = threading.local()  # a retried call in progress on this thread: the calls it makes are not retried again


def _retried(method: Callable[..., Any]) -> Callable[..., Any]:
    """``method`` retried while the database cannot be reached, for up to ``STORAGE_RETRY_SECONDS``."""

    @functools.wraps(method)
    def call(*args: Any, **kwargs: Any) -> Any:
        if getattr(_retrying_now, "active", False):
            return method(*args, **kwargs)
        _retrying_now.active = True
        try:
            return _call_with_retry(method, *args, **kwargs)
        finally:
            _retrying_now.active = False

    return call


def _call_with_retry(function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    deadline, delay, failed = None, 0.2, False
    while True:
        try:
            result = function(*args, **kwargs)
        except Exception as exc:
            if not _unreachable(exc):
                raise
            now = time.monotonic()
            if deadline is None:
                deadline = now + STORAGE_RETRY_SECONDS
                first = next((line for line in str(getattr(exc, "__cause__", None) or exc).splitlines() if line),
                             type(exc).__name__)
                print(f"tune: the study's database cannot be reached ({first.strip()[:200]}); retrying for up to "
                      f"{STORAGE_RETRY_SECONDS:.0f} s", file=sys.stderr, flush=True)
            if now >= deadline:
                raise
            failed = True
            time.sleep(delay)
            delay = min(2 * delay, 1.0)
            continue
        if failed:
            global _outage_ended
            _outage_ended = time.monotonic()
            print("tune: the study's database is back; going on", file=sys.stderr, flush=True)
        return result


_outage_ended: float | None = None


def since_outage() -> float:
    """Seconds since this process last saw the database come back after it could not be reached (inf if never).

    Trials sent no heartbeat while the database was away, so right after an outage longer than the grace
    period live trials look stale: a worker waits one grace period after an outage before it fails any.
    """
    return math.inf if _outage_ended is None else time.monotonic() - _outage_ended


@functools.cache
def _retrying_storage_class(optuna: Any) -> type:
    """``RDBStorage`` whose methods are :func:`_retried`: every method (not static or class methods, not
    dunders) of it and its bases, the private ones too, since Optuna's own _CachedStorage calls some of them
    on it (``_create_new_trial``, ``_set_trial_param``, ``_get_trials``, ...). A method that another calls
    runs unretried inside the retried outer call."""
    base = optuna.storages.RDBStorage
    names = {name for cls in base.__mro__ for name in vars(cls) if not name.startswith("__")}
    methods = {name: _retried(getattr(base, name)) for name in sorted(names)
               if inspect.isfunction(inspect.getattr_static(base, name))}
    return type("RetryingRDBStorage", (base,), {**methods, "__module__": __name__})


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


IDENTITY_ATTR = "ppo_core_tune"
"""The study's user attribute that holds its settings (``Settings.identity()``: config, space, seeds, evals)."""


def load_study(settings: Settings, heartbeat: bool = False) -> Any:
    """Create the study or load it; a study made with other settings (config, space, seeds) is refused.

    Raises:
        ConfigError: see :func:`open_storage`; a study of the same name that minimises, or that was
            made with other settings.
    """
    optuna = _optuna()
    storage = open_storage(settings.storage, settings.heartbeat if heartbeat else None, wait=heartbeat)
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
    saved = study.user_attrs.get(IDENTITY_ATTR)
    if saved is None:
        study.set_user_attr(IDENTITY_ATTR, identity)
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


def best_params(study: Any) -> dict[str, Any]:
    """The best trial's parameters as config values, as in ``best.toml`` and the summary's ``best_params``.

    Optuna's own ``study.best_params`` gives a choice of lists or tables as its JSON text
    (``'[64, 64]'`` for ``policy.hidden_sizes``), since Optuna's choices can only be None, bools, numbers
    and strings; this gives the list (``[64, 64]``), decoded with the search space that ``tune`` saves in
    the study.

    Args:
        study: a study made by ``ppo-core tune``, as ``optuna.load_study`` opens it.

    Raises:
        ValueError: a study that ``tune`` did not make (it holds no search space), or one without a completed
            trial (Optuna's own error).
    """
    saved = study.user_attrs.get(IDENTITY_ATTR)
    if not isinstance(saved, dict) or not isinstance(saved.get("space"), dict):
        raise ValueError(f"study {study.study_name!r} was not made by ppo-core tune: it holds no search space")
    return decode_params(saved["space"], study.best_trial.params)


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


def _stored(study: Any, number: int) -> Any:
    """The stored (frozen) trial of this number."""
    return next(t for t in study.get_trials(deepcopy=False) if t.number == number)


def _retry_of(frozen: Any, default: Any = None) -> Any:
    """The number of the trial that ``frozen`` (a stored trial) retries, the first of its series; else ``default``."""
    return frozen.system_attrs.get("failed_trial", default)


def _is_retry(frozen: Any) -> bool:
    """Whether ``frozen`` (a stored trial) is itself a retry of another trial."""
    return "retry_history" in frozen.system_attrs


def _retry_api() -> tuple[str, type]:
    """RDBStorage's keyword for the retry callback and the callback's class: ``heartbeat_stale_trial_callback``
    and RetryHeartbeatStaleTrialCallback (Optuna >= 4.9), else ``failed_trial_callback`` and
    RetryFailedTrialCallback."""
    storages = _optuna().storages
    new = getattr(storages, "RetryHeartbeatStaleTrialCallback", None)
    if new is not None:
        return "heartbeat_stale_trial_callback", new
    return "failed_trial_callback", storages.RetryFailedTrialCallback


def retry_callback() -> Callable[[Any, Any], None]:
    """Optuna's callback that queues one retry of a failed trial, ``callback(study, frozen_trial)``, with
    ``max_retry=1`` (the class of :func:`_retry_api`)."""
    return _retry_api()[1](max_retry=1)


def _queue_as_it_was(study: Any, frozen: Any) -> None:
    """Queue a copy of ``frozen``, a retry that a stop request failed before any of its runs began, with
    its retry attributes unchanged: its one retry is not spent on a trial that never ran."""
    optuna = _optuna()
    study.add_trial(optuna.trial.create_trial(
        state=optuna.trial.TrialState.WAITING, params=frozen.params, distributions=frozen.distributions,
        user_attrs=copy.deepcopy(frozen.user_attrs), system_attrs=copy.deepcopy(frozen.system_attrs)))


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

    def read_beating() -> set[int]:
        with engine.connect() as connection:
            return {row[0] for row in connection.execute(text("SELECT trial_id FROM trial_heartbeats"))}

    beating = _call_with_retry(read_beating)
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
