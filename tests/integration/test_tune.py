"""``main.py tune``: the search space, bad input, failing trials, and studies interrupted by SIGINT or
SIGKILL and rerun, which must end with exactly ``--trials`` counted trials and no parameters trained
to completion twice.

Trials here are tiny (CartPole, 4 envs x 64 steps, 2 seeds); the workers' heartbeat is 2 s, so a
killed trial is found stale 6 s after its last beat.
"""

import csv
import io
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import attrs
import optuna
import pytest

from shell.config import load_config
from shell.errors import ConfigError
from shell.tune import (
    DEFAULT_SPACE,
    NO_HEARTBEAT,
    SURPLUS,
    Settings,
    _fail_unborn_trials,
    _is_surplus,
    _pruner,
    best_params,
    open_storage,
    parse_space,
    resolve_settings,
    trial_config,
)
from shell.tune.outputs import (
    IMPORTANCE_MIN_TRIALS,
    _draw_history,
    _draw_importances,
    importances_note,
    write_outputs,
)
from shell.tune.study import load_study, retry_callback

from .conftest import ROOT, run_main

SPACE = """
[tune.space]
ppo.learning_rate = { log_uniform = [1e-4, 3e-3] }
ppo.update_epochs = { int = [1, 3] }
policy.hidden_sizes = { choice = [[16], [32, 32]] }
"""
TINY = ["--config", "cartpole", "--seeds", "0", "1", "--set", "env.num_envs=4", "--set", "ppo.num_steps=64",
        "--set", "run.eval_episodes=3", "--heartbeat", "2"]


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def tune_args(tmp_path: Path, study_dir: Path, trials: int = 3, jobs: int = 2, steps: int = 8192) -> list[str]:
    space = write(tmp_path / "space.toml", SPACE)
    return ["tune", *TINY, "--space", str(space), "--trials", str(trials), "--jobs", str(jobs),
            "--total-timesteps", str(steps), "--study-dir", str(study_dir)]


def start(args: list[str], cwd: Path = ROOT) -> subprocess.Popen:
    """main.py in a session of its own, so that the test can signal its process group as a terminal does."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, str(ROOT / "main.py"), *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, cwd=cwd, start_new_session=True)


def wait_for_training(study_dir: Path, timeout: float = 120.0) -> int:
    """Until some trial's run has written a metrics row: a trial is then in the middle of training; its number."""
    deadline = time.time() + timeout
    while True:
        for metrics in study_dir.glob("trials/*/s*/metrics.csv"):
            if len(metrics.read_text().splitlines()) >= 2:
                return int(metrics.parent.parent.name)
        assert time.time() < deadline, "no trial started training"
        time.sleep(0.05)


def trials_of(study_dir: Path, name: str = "cartpole") -> list[optuna.trial.FrozenTrial]:
    return optuna.load_study(study_name=name, storage=f"sqlite:///{study_dir / 'study.db'}").trials


def assert_no_params_trained_twice(study_dir: Path, trials: list[optuna.trial.FrozenTrial]) -> None:
    """No two trials with the same parameters both finished a run of the same seed (a retry repeats
    only runs its original did not finish)."""
    finished = Counter()
    for t in trials:
        for summary in (study_dir / "trials" / f"{t.number:04d}").glob("s*/summary.json"):
            if not json.loads(summary.read_text())["interrupted"]:
                finished[(json.dumps(t.params, sort_keys=True), summary.parent.name)] += 1
    assert finished and max(finished.values()) == 1, finished


def assert_study_whole(study_dir: Path, total: int, seeds: int = 2) -> list[optuna.trial.FrozenTrial]:
    """Exactly ``total`` COMPLETE or PRUNED trials, none RUNNING; each COMPLETE one trained every seed."""
    trials = trials_of(study_dir)
    states = Counter(t.state.name for t in trials)
    assert states["COMPLETE"] + states["PRUNED"] == total, states
    assert states["RUNNING"] == 0, states
    for t in trials:
        if t.state.name == "COMPLETE":
            assert len(t.user_attrs["evals"]) == seeds and t.value == pytest.approx(sum(t.user_attrs["evals"]) / seeds)
            for seed in range(seeds):
                run = study_dir / "trials" / f"{t.number:04d}" / f"s{seed}"
                summary = json.loads((run / "summary.json").read_text())
                assert summary["interrupted"] is False and summary["eval_return_mean"] == t.user_attrs["evals"][seed]
    assert_no_params_trained_twice(study_dir, trials)
    return trials


def assert_outputs(study_dir: Path, trials: list[optuna.trial.FrozenTrial], out: str) -> None:
    summary = json.loads(out.strip().splitlines()[-1])
    complete = [t for t in trials if t.state.name == "COMPLETE"]
    best = max(complete, key=lambda t: t.value)
    assert summary["counted"] == 3 and summary["best_trial"] == best.number
    rows = (study_dir / "trials.csv").read_text().splitlines()
    assert rows[0].startswith("number,state,value") and len(rows) == 1 + len(trials)
    # best.toml is a whole config, without [tune], with the best trial's values
    text = (study_dir / "best.toml").read_text()
    assert "[tune" not in text
    config = load_config(str(study_dir / "best.toml"))
    assert config.ppo.learning_rate == best.params["ppo.learning_rate"]
    assert config.ppo.update_epochs == best.params["ppo.update_epochs"]
    assert json.dumps(config.policy.hidden_sizes) == best.params["policy.hidden_sizes"]
    assert config.env.num_envs == 4 and config.run.total_timesteps == 8192 and config.run.eval_every == 0
    for name in ("history", "importances"):
        assert (study_dir / f"{name}.png").read_bytes()[:4] == b"\x89PNG"


# ----------------------------------------------------------------------------- the space
def test_space_tables_nested_or_dotted_and_choice_values_round_trip():
    nested = parse_space({"ppo": {"gamma": {"uniform": [0.9, 0.99]}}, "policy": {"hidden_sizes": {
        "choice": [[64], [64, 64]]}}, "env": {"kwargs": {"size": {"int": [4, 64], "log": True}}}}, "x")
    dotted = parse_space({"ppo.gamma": {"uniform": [0.9, 0.99]}, "policy.hidden_sizes": {"choice": [[64], [64, 64]]},
                          "env.kwargs.size": {"int": [4, 64], "log": True}}, "x")
    assert nested == dotted
    by_key = {p.key: p for p in nested}
    hidden = by_key["policy.hidden_sizes"]
    assert hidden.labels == ["[64]", "[64, 64]"] and hidden.decode("[64, 64]") == [64, 64]
    assert by_key["env.kwargs.size"].log and by_key["env.kwargs.size"].decode(8) == 8
    parse_space(DEFAULT_SPACE, "default")  # the default space passes its own checks


@pytest.mark.parametrize(("space", "needle"), [
    ({"ppo.gama": {"uniform": [0.9, 0.99]}}, "unknown key ppo.gama; did you mean 'gamma'?"),
    ({"pop.gamma": {"uniform": [0.9, 0.99]}}, "unknown section 'pop'"),
    ({"ppo.gamma": {"normal": [0.9, 0.01]}}, "name exactly one distribution"),
    ({"ppo.gamma": 0.99}, "expected a distribution"),
    ({"ppo.gamma": {"uniform": [0.99, 0.9]}}, "needs low < high"),
    ({"ppo.gamma": {"uniform": [0.9, 1.5]}}, "ppo.gamma = 1.5 is out of range"),
    ({"ppo.learning_rate": {"log_uniform": [0, 1e-3]}}, "a log scale needs low > 0"),
    ({"ppo.num_steps": {"uniform": [32, 256]}}, "ppo.num_steps is an int; use int or choice"),
    ({"ppo.update_epochs": {"int": [1.5, 4]}}, "int needs integer bounds"),
    ({"policy.activation": {"choice": ["tanh", "swish"]}}, "'swish' is not allowed"),
    ({"policy.activation": {"choice": []}}, "non-empty list"),
    ({"policy.activation": {"choice": ["tanh", "tanh"]}}, "lists a value twice"),
    ({"ppo.gamma": {"uniform": [0.9, 0.99], "log": True}}, "only int takes 'log = true'"),
    ({"run.seed": {"int": [0, 9]}}, "run.seed is not tuned; it comes from --seeds"),
    ({}, "non-empty table"),
])
def test_bad_spaces_are_one_line_config_errors(space, needle):
    with pytest.raises(ConfigError) as info:
        parse_space(space, "space.toml")
    message = str(info.value)
    assert needle in message and message.startswith("space.toml") and "\n" not in message


def test_set_fixes_a_key_and_trials_get_seeds_and_an_evaluation_period(tmp_path):
    config = write(tmp_path / "c.toml", '[env]\nid = "CartPole-v1"\nnum_envs = 4\n[ppo]\nnum_steps = 64\n'
                   'num_minibatches = 2\n[run]\ntotal_timesteps = 2560\n' + SPACE)
    settings, base, notes = resolve_settings(str(config), 5, [3, 4], None, ["ppo.update_epochs=2"], str(tmp_path / "d"),
                                             None, None, None, None, 2)
    assert [p.key for p in settings.space] == ["ppo.learning_rate", "policy.hidden_sizes"]
    assert notes == ["ppo.update_epochs is fixed by the command line, not tuned"]
    assert settings.study == "c" and settings.storage == f"sqlite:///{(tmp_path / 'd').resolve()}/study.db"
    assert Settings.from_json(settings.to_json()) == settings
    trial = trial_config(settings, {"ppo.learning_rate": 1e-3, "policy.hidden_sizes": [16]}, seed=4)
    # 10 updates: 4 periodic evaluations (after updates 2, 4, 6, 8), then the final one after update 10
    assert trial.run.seed == 4 and trial.run.eval_every == 2 and trial.ppo.update_epochs == 2
    assert trial.policy.hidden_sizes == [16] and base.run.eval_every == 0
    # training ignores the [tune] section of the same file
    assert load_config(str(config), ["ppo.update_epochs=2"]).to_dict() == base.to_dict()


def test_seeds_come_from_the_command_else_the_config_else_0_1_2(tmp_path):
    def seeds(tune_table: str, given):
        config = write(tmp_path / "c.toml", tune_table + SPACE)
        return resolve_settings(str(config), 5, given, None, [], str(tmp_path / "d"), None, None, None, None,
                                2)[0].seeds

    assert seeds("", None) == [0, 1, 2]
    assert seeds("[tune]\nseeds = [0, 1, 2, 3, 4, 5]\n", None) == [0, 1, 2, 3, 4, 5]
    assert seeds("[tune]\nseeds = [0, 1, 2, 3, 4, 5]\n", [7, 8]) == [7, 8]
    for bad in ("[]", "[1, -2]", "3", '["a"]'):
        with pytest.raises(ConfigError, match=r"tune.seeds = .*: needs a non-empty list of integers >= 0"):
            seeds(f"[tune]\nseeds = {bad}\n", None)


@pytest.mark.parametrize("name", ["median", "hyperband", "none"])
def test_pruners_decide_from_the_first_seeds_final_evaluation_on(tmp_path, name):
    config = write(tmp_path / "c.toml", SPACE)
    settings, _, _ = resolve_settings(str(config), 5, [0, 1, 2], None, [], str(tmp_path / "d"), None, None, None,
                                      name, 2)
    pruner = _pruner(optuna, settings)
    per_seed = settings.evals + 1  # 4 periodic evaluations and the final one
    if name == "median":
        assert isinstance(pruner, optuna.pruners.MedianPruner) and pruner._n_warmup_steps == per_seed
    elif name == "hyperband":
        assert isinstance(pruner, optuna.pruners.HyperbandPruner)
        assert (pruner._min_resource, pruner._max_resource) == (per_seed, 3 * per_seed)
    else:
        assert isinstance(pruner, optuna.pruners.NopPruner)


def test_trials_that_start_past_the_total_are_surplus(tmp_path):
    study = optuna.create_study(storage=f"sqlite:///{tmp_path / 's.db'}", direction="maximize")
    first, second, third = study.ask(), study.ask(), study.ask()
    assert not _is_surplus(study, first, 2) and not _is_surplus(study, second, 2)
    assert _is_surplus(study, third, 2)  # two trials started before it
    study.tell(first, 1.0)
    study.tell(second, state=optuna.trial.TrialState.FAIL)  # a failed trial frees its slot
    assert not _is_surplus(study, third, 2)


@pytest.mark.filterwarnings("ignore::optuna.exceptions.ExperimentalWarning")  # Optuna's matplotlib plots
@pytest.mark.parametrize("complete", [3, 10])
def test_importances_from_few_trials_carry_a_caveat_and_history_has_whole_trial_numbers(tmp_path, complete):
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.ticker import MaxNLocator

    space = write(tmp_path / "space.toml", SPACE)
    settings, _, _ = resolve_settings("cartpole", complete, [0], None, [], str(tmp_path / "d"), None, None, str(space),
                                      None, 2)
    Path(settings.study_dir).mkdir()
    study = optuna.create_study(direction="maximize", sampler=optuna.samplers.RandomSampler(seed=0))
    for i in range(complete):
        trial = study.ask()
        for param in settings.space:
            param.suggest(trial)
        study.tell(trial, float(i % 4))
    summary = write_outputs(study, settings)
    assert set(summary["plots"]) == {"history", "importances"} and summary["notes"] == []
    title = _draw_importances(study, complete).get_title(loc="left")
    assert IMPORTANCE_MIN_TRIALS == 10  # as documented in README.md
    if complete < IMPORTANCE_MIN_TRIALS:
        note = summary["importances_note"]
        assert note == importances_note(3) and "3 completed trials (fewer than 10)" in note and "\n" not in note
        assert title.splitlines()[1] == "from only 3 completed trials (fewer than 10): too few to tell"
    else:
        assert summary["importances_note"] is None and title == "Hyperparameter Importances"
    json.dumps(summary)  # the summary stays one JSON line
    ax = _draw_history(study)
    locator = ax.xaxis.get_major_locator()
    assert isinstance(locator, MaxNLocator) and locator._integer
    assert all(float(tick).is_integer() for tick in ax.get_xticks())
    matplotlib.pyplot.close("all")


def test_the_importances_note_is_absent_while_importances_are_not_drawn(tmp_path):
    space = write(tmp_path / "space.toml", SPACE)
    settings, _, _ = resolve_settings("cartpole", 1, [0], None, [], str(tmp_path / "d"), None, None, str(space),
                                      None, 2)
    Path(settings.study_dir).mkdir()
    study = optuna.create_study(direction="maximize")
    trial = study.ask()
    for param in settings.space:
        param.suggest(trial)
    study.tell(trial, 1.0)
    summary = write_outputs(study, settings)
    assert summary["importances_note"] is None and "importances" not in summary["plots"]


def test_the_summary_counts_surplus_trials_apart_from_failed_ones(tmp_path):
    """A trial that gave way on the last slot (FAIL, error SURPLUS) ran nothing: the summary's ``surplus``, not
    ``failed``; trials.csv keeps both as FAIL with their errors."""
    space = write(tmp_path / "space.toml", SPACE)
    settings, _, _ = resolve_settings("cartpole", 2, [0], None, [], str(tmp_path / "d"), None, None, str(space),
                                      None, 2)
    Path(settings.study_dir).mkdir()
    study = optuna.create_study(direction="maximize")
    for error in (None, SURPLUS, "a run failed", SURPLUS, None):
        trial = study.ask()
        for param in settings.space:
            param.suggest(trial)
        if error is None:
            study.tell(trial, 1.0)
        else:
            trial.set_user_attr("error", error)
            study.tell(trial, state=optuna.trial.TrialState.FAIL)
    summary = write_outputs(study, settings)
    assert (summary["complete"], summary["failed"], summary["surplus"], summary["counted"]) == (2, 1, 2, 2)
    rows = list(csv.DictReader(open(Path(settings.study_dir) / "trials.csv")))
    assert [(r["state"], r["error"]) for r in rows] == [("COMPLETE", ""), ("FAIL", SURPLUS), ("FAIL", "a run failed"),
                                                        ("FAIL", SURPLUS), ("COMPLETE", "")]


def test_best_params_gives_a_choice_of_lists_as_the_list_where_optuna_gives_its_json_text(tmp_path):
    settings, _, _ = resolve_settings("cartpole", 2, [0], None, [], str(tmp_path / "d"), None, None,
                                      str(write(tmp_path / "space.toml", SPACE)), None, 2)
    Path(settings.study_dir).mkdir()
    study = load_study(settings)
    for value in (1.0, 2.0):
        trial = study.ask()
        for param in settings.space:
            param.suggest(trial)
        study.tell(trial, value)
    study = optuna.load_study(study_name=settings.study, storage=settings.storage)  # as a user opens it
    raw, params = study.best_params, best_params(study)
    assert isinstance(raw["policy.hidden_sizes"], str) and params["policy.hidden_sizes"] in ([16], [32, 32])
    assert params == {**raw, "policy.hidden_sizes": json.loads(raw["policy.hidden_sizes"])}
    assert type(params["ppo.update_epochs"]) is int and type(params["ppo.learning_rate"]) is float
    with pytest.raises(ValueError, match="was not made by ppo-core tune"):
        best_params(optuna.create_study())


def test_every_storage_call_of_optunas_cache_is_retried_through_an_outage(tmp_path, capsys):
    """The fault kind: a storage method that Optuna's _CachedStorage calls on the RDB storage, private ones
    included, must wait out a database outage like the public ones (seen: ``_set_trial_param`` of a
    ``suggest`` during a PostgreSQL restart failed the trial with StorageInternalError)."""
    import inspect
    import re

    import optuna.storages._cached_storage as cached
    from sqlalchemy import event
    from sqlalchemy import exc as sa_exc

    storage = open_storage(f"sqlite:///{tmp_path / 's.db'}")
    called = set(re.findall(r"_backend\.(\w+)\(", inspect.getsource(cached)))
    assert {"_set_trial_param", "_create_new_trial", "_get_trials"} <= called
    assert [name for name in sorted(called) if not hasattr(getattr(type(storage), name), "__wrapped__")] == []

    dropped: list[str] = []

    @event.listens_for(storage.engine, "before_cursor_execute")
    def drop_once(conn, cursor, statement, parameters, context, executemany):
        if statement.lstrip().upper().startswith("INSERT INTO TRIAL_PARAMS") and not dropped:
            dropped.append(statement)
            raise sa_exc.OperationalError(statement, parameters, Exception("server closed the connection"))

    study = optuna.create_study(storage=storage, direction="maximize")
    trial = study.ask()
    x = trial.suggest_float("x", 0.0, 1.0)
    assert dropped and study.trials[0].params == {"x": x}
    assert "the study's database is back" in capsys.readouterr().err


def test_a_trial_killed_before_its_first_heartbeat_is_failed_and_retried(tmp_path):
    storage = open_storage(f"sqlite:///{tmp_path / 's.db'}", heartbeat=2)
    study = optuna.create_study(storage=storage, direction="maximize")
    with pytest.warns(UserWarning, match="Heartbeat"):  # Optuna expects study.optimize with a heartbeat
        unborn = study.ask()  # RUNNING with no heartbeat, as when its process dies right after creating it
    unborn.suggest_float("x", 0.0, 1.0)
    with pytest.warns(UserWarning, match="Heartbeat"):
        beating = study.ask()
    storage.record_heartbeat(beating._trial_id)
    retry = retry_callback()
    seen: dict[int, float] = {}
    _fail_unborn_trials(study, seen, 0.5, retry)  # first seen now: not failed yet
    assert [t.state.name for t in study.trials] == ["RUNNING", "RUNNING"] and list(seen) == [unborn._trial_id]
    time.sleep(0.6)
    _fail_unborn_trials(study, seen, 0.5, retry)
    trials = study.trials
    assert [t.state.name for t in trials] == ["FAIL", "RUNNING", "WAITING"]  # the live one is left alone
    assert trials[2].system_attrs["failed_trial"] == 0 and trials[2].params == trials[0].params


# ----------------------------------------------------------------------------- bad input: one line, exit 2
@pytest.mark.parametrize(("extra", "space", "needle"), [
    ([], "[tune.space]\nppo.gamma = { beta = [1, 2] }\n", "name exactly one distribution"),
    ([], "[tune.space]\nppo.gama = { uniform = [0.9, 0.99] }\n", "unknown key ppo.gama"),
    (["--storage", "nonsense://nowhere"], SPACE, "--storage nonsense://nowhere: cannot open it"),
    (["--set", "ppo.gama=0.9"], SPACE, "unknown key ppo.gama"),
])
def test_bad_input_to_tune_is_one_line_exit_2_and_leaves_nothing(tmp_path, extra, space, needle):
    study_dir = tmp_path / "study"
    args = ["tune", "--config", "cartpole", "--trials", "2", "--space", str(write(tmp_path / "s.toml", space)),
            "--study-dir", str(study_dir), *extra]
    proc = run_main(*args, timeout=120)
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], proc.stderr
    assert proc.stdout == "" and not study_dir.exists()


# ----------------------------------------------------------------------------- failures and interruptions
def test_a_trial_that_raises_or_goes_non_finite_is_fail_and_the_study_goes_on(tmp_path):
    config = write(tmp_path / "faulty.toml", """
[env]
id = "tests.integration.custom_envs:Raising-v0"
num_envs = 2
[ppo]
num_steps = 32
num_minibatches = 2
update_epochs = 1
[run]
total_timesteps = 256
eval_episodes = 2
[tune.space]
env.kwargs.fail_at = { int = [20, 1000000000] }
env.kwargs.mode = { choice = ["raise", "nan"] }
""")
    study_dir = tmp_path / "study"
    study_dir.mkdir()
    study = optuna.create_study(study_name="faulty", storage=f"sqlite:///{study_dir / 'study.db'}",
                                direction="maximize")
    study.enqueue_trial({"env.kwargs.fail_at": 20, "env.kwargs.mode": "raise"})
    study.enqueue_trial({"env.kwargs.fail_at": 20, "env.kwargs.mode": "nan"})
    proc = run_main("tune", "--config", str(config), "--trials", "2", "--seeds", "0", "--study-dir", str(study_dir),
                    "--heartbeat", "2", timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    trials = trials_of(study_dir, "faulty")
    assert [t.state.name for t in trials] == ["FAIL", "FAIL", "COMPLETE", "COMPLETE"]
    assert "simulated physics blow-up" in trials[0].user_attrs["error"]
    assert "non-finite" in trials[1].user_attrs["error"]
    assert json.loads(proc.stdout.strip().splitlines()[-1])["failed"] == 2


INTERRUPTED = ("interrupted by SIGINT", "interrupted by SIGINT before it ran")


def series(trial: optuna.trial.FrozenTrial) -> int:
    """The first trial of ``trial``'s retry series: the one it retries, else itself."""
    return trial.system_attrs.get("failed_trial", trial.number)


@pytest.mark.parametrize("queued_before", [False, True], ids=["sampled", "queued-retry"])
def test_a_trial_that_a_stop_reaches_before_it_runs_is_queued_again_as_it_was(tmp_path, monkeypatch, queued_before):
    """The signal lands after the worker's last look at the stop request but before the trial's first run:
    Optuna has already created the trial, or popped a queued retry. That trial ran nothing, so it is
    queued again as it was; a retry keeps its one retry (the kind of fault: a stop at any moment must
    leave each interrupted series queued once)."""
    import torch

    from shell.stop import StopRequest
    from shell.tune import worker

    settings, _, _ = resolve_settings("cartpole", 3, [0], 256, ["env.num_envs=4", "ppo.num_steps=64"],
                                      str(tmp_path / "study"), None, None, str(write(tmp_path / "s.toml", SPACE)),
                                      None, 2)
    settings = attrs.evolve(settings, parent_pid=os.getppid())  # this process is the worker; pytest its parent
    Path(settings.study_dir).mkdir()
    study = load_study(settings)
    if queued_before:  # trial 0 failed while it ran, and its retry is queued
        first = study.ask()
        for param in settings.space:
            param.suggest(first)
        study.tell(first, state=optuna.trial.TrialState.FAIL)
        retry_callback()(study, study.trials[0])
    stop = StopRequest()

    def surplus_check_as_the_signal_lands(*args, **kwargs):  # the first thing a trial does
        stop.request(signal.SIGINT)
        return False

    monkeypatch.setattr(worker, "_is_surplus", surplus_check_as_the_signal_lands)
    threads = torch.get_num_threads()
    try:
        assert worker.run_worker(settings.to_json(), stop, console=io.StringIO()) == 130
    finally:
        torch.set_num_threads(threads)
    trials = trials_of(Path(settings.study_dir))
    unrun = trials[1 if queued_before else 0]  # the queued retry popped, or a new trial sampled
    assert unrun.state.name == "FAIL" and unrun.user_attrs["error"] == "interrupted by SIGINT before it ran"
    assert not (Path(settings.study_dir) / "trials").exists()  # it trained nothing
    (queued,) = [t for t in trials if t.state.name == "WAITING"]
    assert queued.params == unrun.params
    if queued_before:  # the same retry of trial 0 as before, its one retry unspent
        assert unrun.system_attrs["retry_history"] == queued.system_attrs["retry_history"] == [0]
        assert series(queued) == series(unrun) == 0
    else:
        assert series(queued) == unrun.number and queued.system_attrs["retry_history"] == [unrun.number]


def test_sigint_mid_trial_fails_it_exits_130_and_a_rerun_completes_the_study(tmp_path):
    study_dir = tmp_path / "study"
    args = tune_args(tmp_path, study_dir)
    proc = start(args)
    wait_for_training(study_dir)
    os.killpg(proc.pid, signal.SIGINT)  # as a terminal's Ctrl-C: the parent and both workers
    sent = time.time()
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err[-3000:]
    assert time.time() - sent < 15 and "Traceback" not in err
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["interrupted"] is True and summary["exit_code"] == 130 and summary["running"] == 0
    counted_before = summary["counted"]
    trials = trials_of(study_dir)
    interrupted = [t for t in trials if t.state.name == "FAIL"]
    assert interrupted and all(t.user_attrs["error"] in INTERRUPTED for t in interrupted), err[-3000:]
    assert not [t for t in trials if t.state.name == "RUNNING"]
    # each interrupted trial's series (the trial and its retries) is queued once, with its parameters; a
    # worker that asked for a trial as the signal came may have popped and failed a retry before it ran
    queued = [t for t in trials if t.state.name == "WAITING"]
    assert sorted(t.system_attrs["failed_trial"] for t in queued) == sorted({series(t) for t in interrupted}), err
    assert all(t.params == trials[t.system_attrs["failed_trial"]].params for t in queued)
    with (study_dir / "trials.csv").open() as f:  # the error is the failed trial's, not its queued retry's
        rows = list(csv.DictReader(f))
    assert all(r["error"] in INTERRUPTED for r in rows if r["state"] == "FAIL")
    assert [r["error"] for r in rows if r["state"] == "WAITING"] == [""] * len(queued)

    rerun = run_main(*args, timeout=300)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    trials = assert_study_whole(study_dir, 3)
    # the retries ran first, as far as the total left room for them
    ran = [t for t in queued if trials[t.number].state.name in ("COMPLETE", "PRUNED")]
    assert len(ran) == min(len(queued), 3 - counted_before)
    assert_outputs(study_dir, trials, rerun.stdout)
    # the same command on a finished study starts no trial
    again = run_main(*args, timeout=120)
    assert again.returncode == 0, again.stderr[-3000:]
    assert len(trials_of(study_dir)) == len(trials)
    best = run_main("--config", str(study_dir / "best.toml"), "--total-timesteps", "256", "--run-dir",
                    str(tmp_path / "best_run"))
    assert best.returncode == 0, best.stderr[-3000:]


def test_sigkill_mid_trial_then_a_rerun_retries_the_killed_trials_once(tmp_path):
    study_dir = tmp_path / "study"
    args = tune_args(tmp_path, study_dir)
    proc = start(args)
    wait_for_training(study_dir)
    os.killpg(proc.pid, signal.SIGKILL)  # the parent and its workers, with no chance to clean up
    proc.communicate(timeout=30)
    killed = [t for t in trials_of(study_dir) if t.state.name == "RUNNING"]
    assert killed

    rerun = run_main(*args, timeout=300)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    trials = assert_study_whole(study_dir, 3)
    for t in killed:  # failed by the heartbeat check, and run again once with the same parameters
        assert trials[t.number].state.name == "FAIL"
        if t.params:  # it reached its objective, which leaves the reason a dead worker cannot write
            assert trials[t.number].user_attrs["error"] == NO_HEARTBEAT
        retries = [r for r in trials if r.system_attrs.get("failed_trial") == t.number]
        assert len(retries) == 1 and retries[0].state.name in ("COMPLETE", "PRUNED")
        # the retry carries over every parameter the killed trial had drawn (none if it was killed before
        # sampling, some if killed while sampling) and samples the rest
        assert t.params.items() <= retries[0].params.items()
    # a rerun with other settings is refused: the study's trials would not be comparable
    other = run_main(*args, "--seeds", "5", timeout=120)
    assert other.returncode == 2 and "was made with other settings: seeds differ" in other.stderr, other.stderr[-2000:]


def test_workers_import_this_package_not_the_users_folder(tmp_path):
    """A user's own ``core.py`` and ``shell/`` in the folder a study runs from: training from there imports this
    package, and so must the tune workers (``python -m shell`` would put the folder first on their path)."""
    user = tmp_path / "user"
    (user / "shell").mkdir(parents=True)
    for path in (user / "core.py", user / "shell" / "__init__.py"):
        path.write_text("raise ImportError('the user file ' + __file__ + ' was imported')\n")
    study_dir = tmp_path / "study"
    proc = run_main(*tune_args(tmp_path, study_dir, trials=1, jobs=1, steps=1024), cwd=user)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "the user file" not in proc.stderr + proc.stdout
    assert [t.state.name for t in trials_of(study_dir)] == ["COMPLETE"]
