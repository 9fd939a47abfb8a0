"""A worker process (``python -m shell tune-worker``): it runs trials of the study until it has ``--trials``
counted ones or a stop request, one trial at a time, each trial one training run per seed.
"""

from __future__ import annotations

import copy
import math
import os
import signal
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from shell.config import toml_value
from shell.errors import TrainingError
from shell.stop import StopRequest, exit_code
from shell.tune.settings import Settings, trial_config
from shell.tune.study import (
    _counted,
    _counts,
    _fail_unborn_trials,
    _is_retry,
    _is_surplus,
    _optuna,
    _queue_as_it_was,
    _retry_of,
    _stored,
    _StudyLock,
    load_study,
    retry_callback,
    since_outage,
)
from shell.tune.tracking import record_trial, trial_run_config

MAX_FAILURES_IN_A_ROW = 5

NO_HEARTBEAT = "its worker stopped sending heartbeats before the trial ended (killed, hung, or its machine went down)"
"""The error a trial keeps when its worker dies: Optuna's heartbeat check fails it, and nothing else ran."""

SURPLUS = "surplus"
"""The error of a trial that found ``--trials`` others counted or started before it: it ends at once, unrun."""


class TrialInterrupted(Exception):
    """A stop request (signal, or the parent process gone) ended a trial before its result.

    ``ran`` is False when the request came before the trial's first training run began: between
    the worker's last look at the request and Optuna's creating the trial (or popping a queued one).
    """

    def __init__(self, signum: int, ran: bool = True):
        super().__init__(f"interrupted by {signal.Signals(signum).name}{'' if ran else ' before it ran'}")
        self.signum = signum
        self.ran = ran


class SurplusTrial(Exception):
    """The study already had ``--trials`` trials counted or started when this one started."""


class StaleTrial(Exception):
    """Another process failed this trial while it ran: its heartbeat looked stale."""


def run_worker(settings_json: str, stop: StopRequest, console: TextIO = sys.stdout) -> int:
    """One worker: run trials of the study until it has ``trials`` counted ones, or a stop request.

    Returns the exit code: 0, or 130/143 after a stop request (the running trial is then FAIL and
    queued for one retry; one that the request reached before its first run began is queued again as
    it was, its retry unspent).

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
    retry = retry_callback()
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
            if since_outage() > 3 * settings.heartbeat:  # live trials may not have beaten since an outage
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
            if not error.ran and _is_retry(frozen):  # nothing of it ran: its one retry is not spent
                _queue_as_it_was(study, frozen)
                again = "it never ran, so it is queued again as it was"
            else:
                retry(study, copy.deepcopy(frozen))  # as the heartbeat check does for a killed trial: one retry at most
                again = ("it is queued to run again" if not _is_retry(frozen)
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


def _objective(trial: Any, study: Any, settings: Settings, stop: StopRequest, parent_gone: Callable[[], bool],
               say: Callable[[str], None]) -> float:
    """Train the trial's config on each seed; report the evaluations; return the mean final eval."""
    optuna = _optuna()
    from shell.api import train  # imported by run_worker before any trial starts

    trial.set_user_attr("evals", [])  # a retry inherits its original's attributes
    trial.set_user_attr("error", NO_HEARTBEAT)  # what stays if its worker dies; any ending replaces it
    if _is_surplus(study, trial, settings.trials):
        trial.set_user_attr("error", SURPLUS)
        raise SurplusTrial(f"{settings.trials} trials were already counted or running when it started")
    params = {p.key: p.suggest(trial) for p in settings.space}
    retry_of = _retry_of(_stored(study, trial.number))
    say(f"trial {trial.number} started{f' (retry of trial {retry_of})' if retry_of is not None else ''}: "
        + ", ".join(f"{k}={toml_value(v)}" for k, v in params.items()))  # as best.toml spells them
    trial_config(settings, params)  # an invalid combination fails here, before any run dir
    per_seed = settings.evals + 1
    finals: list[float] = []
    run_dirs: list[Path] = []
    for index, seed in enumerate(settings.seeds):
        if stop.requested:
            raise TrialInterrupted(stop.signum, ran=index > 0)
        config, tags = trial_run_config(trial_config(settings, params, seed), settings.study,
                                        Path(settings.study_dir), trial.number, seed)
        run_dir = Path(settings.study_dir) / "trials" / f"{trial.number:04d}" / f"s{seed}"
        run_dirs.append(run_dir)
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

        summary = train(config, run_dir=run_dir, stop=stop, callbacks=[report], progress=False,
                        tracker_tags=tags).summary
        if summary["interrupted"]:
            raise TrialInterrupted(stop.signum or signal.SIGTERM)
        finals.append(float(summary["eval_return_mean"]))
        trial.set_user_attr("evals", finals)
        value = statistics.fmean(finals)
        if index + 1 < len(settings.seeds):
            trial.report(value, (index + 1) * per_seed)
            if trial.should_prune():
                raise optuna.TrialPruned(f"after seed {seed}")
    value = statistics.fmean(finals)
    record_trial(settings.config, Path(settings.study_dir), trial.number, value, run_dirs)
    return value
