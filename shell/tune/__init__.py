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
(``--storage postgresql://...``; the tune extra brings psycopg 3), which is how several machines share one
study. Workers may open a fresh database at the same moment (the one that loses the race to create the
tables tries again), and each storage operation is retried while the server cannot be reached (up to
``STORAGE_RETRY_SECONDS``), so a server restart loses nothing. Trials record
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
partial value) and queued for one retry (one that had not begun its first run is queued again as it
was, its retry unspent), and the worker exits 130/143; the parent waits for all of
them, writes the outputs and exits 130/143. A second signal to the parent kills the workers at once
(their trials are then found by the heartbeat and retried). A worker whose parent is gone (``kill
-9`` of the parent alone) stops its trial the same way.

Outputs in the study dir: ``best.toml`` (a complete config for ``main.py --config``),
``trials.csv``, ``history.png`` and ``importances.png`` (Optuna's matplotlib plots; with fewer than
``IMPORTANCE_MIN_TRIALS`` = 10 completed trials the importances carry a caveat, in the plot's title and in
the summary's ``importances_note``).

Modules (each imports only those above it):

- :mod:`shell.tune.space`: the search space, ``[tune.space]`` parsed and checked; ``DEFAULT_SPACE``.
- :mod:`shell.tune.settings`: the command's input resolved into ``Settings``; a trial's config.
- :mod:`shell.tune.study`: Optuna's storage, the study, its pruner and sampler, counting trials, the file
  lock; all use of Optuna's private API and of raw SQL; ``best_params``, a study's best parameters as config
  values (Optuna's own ``study.best_params`` gives a choice of lists as its JSON text).
- :mod:`shell.tune.outputs`: ``trials.csv``, ``best.toml``, the plots and the command's summary.
- :mod:`shell.tune.worker`: a worker process and its trials (``run_worker``).
- :mod:`shell.tune.parent`: the ``tune`` command, the parent that starts the workers and waits.
"""

from shell.tune.parent import tune
from shell.tune.settings import Settings, resolve_settings, trial_config
from shell.tune.space import DEFAULT_SPACE, parse_space
from shell.tune.study import _fail_unborn_trials, _is_surplus, _pruner, best_params, open_storage
from shell.tune.worker import NO_HEARTBEAT, SURPLUS, run_worker

__all__ = ["DEFAULT_SPACE", "NO_HEARTBEAT", "SURPLUS", "Settings", "_fail_unborn_trials", "_is_surplus", "_pruner",
           "best_params", "open_storage", "parse_space", "resolve_settings", "run_worker", "trial_config", "tune"]
