"""Trackers (shell/tracking/): a real MLflow server on 127.0.0.1 and W&B offline, read back.

Each tracker must hold every update exactly once, at ``step = env_steps``, also after ``kill -9`` and
``--resume``; a tracker that goes away mid-run costs one warning line, not the run.
"""

import csv
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from shell.logs import CSV_FIELDS

from .conftest import ROOT
from .trackers import TRACKER_ENV, MlflowServer

UPDATES = 8
SMALL = ["--config", "cartpole", "--set", "env.num_envs=2", "--set", "ppo.num_steps=32", "--set",
         "ppo.num_minibatches=2", "--set", "ppo.update_epochs=1", "--set", "run.eval_episodes=2",
         "--set", "run.checkpoint_every=2", "--seed", "3"]


def main(*args: str, env: dict | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    full_env = {**os.environ, "PYTHONPATH": str(ROOT), **TRACKER_ENV, **(env or {})}
    return subprocess.run([sys.executable, str(ROOT / "main.py"), *args], capture_output=True, text=True,
                          env=full_env, timeout=timeout, cwd=ROOT)


def rows(run: Path) -> list[dict[str, str]]:
    with open(run / "metrics.csv", newline="") as f:
        return list(csv.DictReader(f))


def warnings_of(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("warning:")]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    srv = MlflowServer(tmp_path_factory.mktemp("mlflow-server")).start()
    yield srv
    srv.stop()


def mlflow_args(uri: str, updates: int = UPDATES, experiment: str = "tests") -> list[str]:
    return [*SMALL, "--total-timesteps", str(updates * 64), "--set", 'run.loggers=["mlflow"]',
            "--set", f"run.mlflow.tracking_uri={json.dumps(uri)}", "--set", f"run.mlflow.experiment={experiment!r}"]


def check_mlflow_history(client, run_id: str, run: Path, updates: int = UPDATES) -> None:
    """Every metrics.csv column: one point per update (where the row has a value), at step = env_steps."""
    table = rows(run)
    assert [int(r["update"]) for r in table] == list(range(1, updates + 1))
    for column in CSV_FIELDS:
        expected = [(int(r["env_steps"]), float(r[column])) for r in table if r[column] != ""]
        got = sorted((m.step, m.value) for m in client.get_metric_history(run_id, column))
        assert [s for s, _ in got] == [s for s, _ in expected], column
        assert np.allclose([v for _, v in got], [v for _, v in expected], rtol=1e-6), column


def test_mlflow_server_holds_params_metrics_artifacts_and_a_pyfunc_policy(server, tmp_path):
    run = tmp_path / "run"
    proc = main(*mlflow_args(server.uri), "--run-dir", str(run))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert not warnings_of(proc.stderr), proc.stderr[-2000:]
    assert json.loads(proc.stdout.splitlines()[-1])["run_dir"] == str(run)  # MLflow printed nothing after it
    state = json.loads((run / "mlflow.json").read_text())
    client = server.client()
    got = client.get_run(state["run_id"])
    assert got.info.status == "FINISHED" and got.info.run_name == "run"
    assert client.get_experiment(got.info.experiment_id).name == "tests"
    # params: the flattened resolved config
    from shell.config import load_config
    from shell.tracking import flatten_config
    from shell.tracking.mlflow_tracker import param_value

    config = load_config(str(run / "config.toml"))
    assert got.data.params == {k: param_value(v) for k, v in flatten_config(config.to_dict()).items()}
    assert got.data.params["ppo.num_steps"] == "32" and got.data.params["run.loggers"] == '["mlflow"]'
    check_mlflow_history(client, state["run_id"], run)
    summary = json.loads((run / "summary.json").read_text())
    assert got.data.metrics["summary.eval_return_mean"] == pytest.approx(summary["eval_return_mean"])
    # artifacts
    names = {a.path for a in client.list_artifacts(state["run_id"])}
    assert {"config.toml", "summary.json", "learning_curve.png", "checkpoints", "policy"} <= names
    (ckpt,) = client.list_artifacts(state["run_id"], "checkpoints")
    assert ckpt.path == f"checkpoints/{Path(summary['checkpoint']).name}" and ckpt.file_size > 0
    png = client.download_artifacts(state["run_id"], "learning_curve.png", str(tmp_path))
    assert open(png, "rb").read(4) == b"\x89PNG"
    # the pyfunc model acts as load_policy on 100 observations
    import mlflow.pyfunc

    import shell

    os.environ["MLFLOW_TRACKING_URI"] = server.uri
    try:
        model = mlflow.pyfunc.load_model(f"runs:/{state['run_id']}/policy")
    finally:
        del os.environ["MLFLOW_TRACKING_URI"]
    policy = shell.load_policy(run)
    obs = np.random.default_rng(0).uniform(-2, 2, size=(100, 4)).astype(np.float32)
    expected = policy.act(obs)
    predicted = np.asarray(model.predict(obs))
    assert predicted.shape == (100,) and np.array_equal(predicted, expected)
    assert len(set(expected.tolist())) == 2  # both actions appear: the comparison says something
    # eval --video on the tracked run adds the video to the same MLflow run
    video = main("eval", str(run), "--episodes", "1", "--video")
    assert video.returncode == 0, video.stderr[-2000:]
    assert json.loads(video.stdout.splitlines()[-1])["videos_logged_to"] == ["mlflow"]
    (mp4,) = client.list_artifacts(state["run_id"], "videos")
    assert mp4.path.endswith("-episode-0.mp4") and mp4.file_size > 1000


def test_mlflow_after_kill_9_and_resume_holds_every_update_once(server, tmp_path):
    run = tmp_path / "run"
    killed = main(*mlflow_args(server.uri, experiment="resumed"), "--run-dir", str(run),
                  env={"PPO_CORE_KILL_AT": "update:5"})
    assert killed.returncode == -9, killed.stderr[-2000:]
    assert [int(r["update"]) for r in rows(run)] == [1, 2, 3, 4]  # update 5 died in its update
    first = json.loads((run / "mlflow.json").read_text())  # the tracker's run was made before training began
    resumed = main("--resume", str(run), "--total-timesteps", str((UPDATES + 2) * 64))
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert not warnings_of(resumed.stderr), resumed.stderr[-2000:]
    state = json.loads((run / "mlflow.json").read_text())
    assert state["run_id"] == first["run_id"]
    client = server.client()
    check_mlflow_history(client, state["run_id"], run, UPDATES + 2)
    got = client.get_run(state["run_id"])
    assert got.info.status == "FINISHED"
    assert [r.info.run_id for r in client.search_runs([got.info.experiment_id])] == [state["run_id"]]  # one run
    # the resume is recorded as tags: where it started and what it changed
    tags = got.data.tags
    assert tags["ppo_core.resumes"] == "1" and tags["ppo_core.resume.1.update"] == "4"
    assert tags["ppo_core.resume.1.run.total_timesteps"] == f"{UPDATES * 64} -> {(UPDATES + 2) * 64}"


def test_mlflow_server_stopped_mid_run_costs_one_warning_line(tmp_path):
    srv = MlflowServer(tmp_path / "server").start()
    run = tmp_path / "run"
    updates = 60
    env = {**os.environ, "PYTHONPATH": str(ROOT), **TRACKER_ENV}
    proc = subprocess.Popen([sys.executable, str(ROOT / "main.py"), *mlflow_args(srv.uri, updates),
                             "--run-dir", str(run), "--set", "ppo.update_epochs=4"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:  # the tracker's run exists and some rows are written
            if (run / "mlflow.json").exists() and (run / "metrics.csv").exists() and len(rows(run)) >= 6:
                break
            time.sleep(0.05)
        written_at_stop = len(rows(run))
        srv.stop()
        out, err = proc.communicate(timeout=300)
    finally:
        srv.stop()
        if proc.poll() is None:
            proc.kill()
    ended = time.time()
    assert proc.returncode == 0, err[-3000:]
    assert written_at_stop < updates  # the server went away mid-run
    assert len(warnings_of(err)) == 1 and "mlflow" in warnings_of(err)[0], err[-3000:]
    assert [int(r["update"]) for r in rows(run)] == list(range(1, updates + 1))
    held_up = ended - (run / "summary.json").stat().st_mtime  # from the summary to the process's end
    print(f"server stopped after {written_at_stop} of {updates} rows; held up {held_up:.2f} s after the summary")
    assert held_up < 5, held_up
    assert json.loads(out.splitlines()[-1])["env_steps"] == updates * 64


@pytest.mark.parametrize("setting, message", [
    ('run.loggers=["tensorbord"]', "unknown logger 'tensorbord'; did you mean 'tensorboard'?"),
    ('run.mlflow.tracking_uri="htp:/nowhere"', "is not a tracking URI MLflow can use"),
    ('run.mlflow.tracking_uri="http://127.0.0.1:99999"', "expected a port from 0 to 65535"),
    ('run.wandb.colour="red"', "run.wandb.colour: unknown key"),
])
def test_bad_tracker_settings_are_one_line_and_exit_2_with_no_run_dir(tmp_path, setting, message):
    loggers = [] if setting.startswith("run.loggers") else ["--set", 'run.loggers=["mlflow","wandb"]']
    proc = main(*SMALL, "--total-timesteps", "64", "--run-dir", str(tmp_path / "run"), *loggers, "--set", setting)
    assert proc.returncode == 2, proc.stderr[-2000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert message in last and "Traceback" not in proc.stderr
    assert not (tmp_path / "run").exists()


def test_a_missing_extra_names_its_pip_command_and_leaves_no_run_dir(tmp_path, monkeypatch):
    from importlib import util as import_util

    import shell
    from shell.errors import ConfigError
    from shell.tracking import registry

    real = import_util.find_spec
    monkeypatch.setattr(registry.import_util, "find_spec", lambda name, *a: None if name == "wandb" else real(name, *a))
    with pytest.raises(ConfigError, match=r'wandb is not installed; run: pip install -e "\.\[wandb\]"'):
        shell.train("cartpole", overrides={"run.loggers": ["wandb"]}, run_dir=tmp_path / "run", progress=False)
    assert not (tmp_path / "run").exists()


def test_malformed_mlflow_tracking_uri_from_the_environment(tmp_path):
    proc = main(*SMALL, "--total-timesteps", "64", "--run-dir", str(tmp_path / "run"),
                "--set", 'run.loggers=["mlflow"]', env={"MLFLOW_TRACKING_URI": "127.0.0.1:5000"})
    assert proc.returncode == 2 and "MLFLOW_TRACKING_URI = '127.0.0.1:5000'" in proc.stderr.strip().splitlines()[-1]
    assert not (tmp_path / "run").exists()


# ---------------------------------------------------------------------------------------------- W&B offline
def wandb_args(updates: int = UPDATES) -> list[str]:
    return [*SMALL, "--total-timesteps", str(updates * 64), "--set", 'run.loggers=["tensorboard","wandb"]',
            "--set", 'run.wandb={project="ppo-tests", group="g1", tags=["a", "b"], name="first", notes="n"}']


def check_wandb_history(run: Path, run_id: str, updates: int = UPDATES) -> list[dict]:
    """Read back from W&B's offline transaction logs: every update once, every metrics.csv column."""
    from shell.tracking import wandb_offline

    history = [h for h in wandb_offline.history(run, run_id) if "update" in h]
    assert sorted(int(h["update"]) for h in history) == list(range(1, updates + 1))  # each update once
    table = {int(r["update"]): r for r in rows(run)}
    for h in history:
        row = table[int(h["update"])]
        assert h["_step"] == h["update"] and h["env_steps"] == int(row["env_steps"])
        for column in CSV_FIELDS:
            if row[column] == "":
                assert column not in h
            else:
                assert h[column] == pytest.approx(float(row[column]), rel=1e-6), column
    return history


def test_wandb_offline_holds_config_every_column_and_the_summary(tmp_path):
    from shell.config import load_config
    from shell.tracking import wandb_offline

    run = tmp_path / "run"
    proc = main(*wandb_args(), "--run-dir", str(run))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert not warnings_of(proc.stderr) and "wandb:" not in proc.stderr, proc.stderr[-2000:]
    state = json.loads((run / "wandb.json").read_text())
    assert state["mode"] == "offline" and state["project"] == "ppo-tests"
    (log,) = wandb_offline.offline_files(run, state["id"])
    check_wandb_history(run, state["id"])
    config = load_config(str(run / "config.toml")).to_dict()
    assert wandb_offline.config(run, state["id"]) == json.loads(json.dumps(config))  # the resolved config
    summary = json.loads((run / "summary.json").read_text())
    held = wandb_offline.summary(run, state["id"])
    for key in ("eval_return_mean", "env_steps", "train_seconds", "env_id", "checkpoint"):
        assert held[key] == summary[key], key
    # group, tags, name and notes reach the run record
    from wandb.proto import wandb_internal_pb2

    records = [wandb_internal_pb2.Record.FromString(raw) for raw in wandb_offline.read_records(log)]
    (record,) = [r.run for r in records if r.WhichOneof("record_type") == "run"][:1]
    assert (record.project, record.run_group, list(record.tags), record.display_name, record.notes) == \
        ("ppo-tests", "g1", ["a", "b"], "first", "n")
    # eval --video on the tracked run logs the video to the same W&B run
    video = main("eval", str(run), "--episodes", "1", "--video")
    assert video.returncode == 0, video.stderr[-2000:]
    assert json.loads(video.stdout.splitlines()[-1])["videos_logged_to"] == ["wandb"]
    logged = [h for h in wandb_offline.history(run, state["id"]) if h.get("eval/video/_type") == "videos"]
    assert len(logged) == 1 and logged[0]["eval/video/count"] == 1
    (media,) = logged[0]["eval/video/videos"]
    (copy,) = run.glob(f"wandb/offline-run-*-{state['id']}/files/{media['path']}")
    assert copy.read_bytes()[4:8] == b"ftyp" and copy.stat().st_size == media["size"]


def test_wandb_offline_after_kill_9_and_resume_holds_every_update_once(tmp_path):
    from shell.tracking import wandb_offline

    run = tmp_path / "run"
    killed = main(*wandb_args(), "--run-dir", str(run), env={"PPO_CORE_KILL_AT": "update:5"})
    assert killed.returncode == -9, killed.stderr[-2000:]
    first = json.loads((run / "wandb.json").read_text())
    # W&B's offline writer keeps whole 32 KiB blocks: the killed process may have kept none of its rows
    kept = [h["update"] for h in wandb_offline.history(run, first["id"]) if "update" in h]
    assert set(kept) <= {1, 2, 3, 4}
    resumed = main("--resume", str(run), "--total-timesteps", str((UPDATES + 2) * 64))
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert not warnings_of(resumed.stderr), resumed.stderr[-2000:]
    state = json.loads((run / "wandb.json").read_text())
    assert state["id"] == first["id"] and len(wandb_offline.offline_files(run, state["id"])) == 2
    check_wandb_history(run, state["id"], UPDATES + 2)
    # a second kill and resume, now with rows in the tracker from both earlier processes
    again = main("--resume", str(run), "--total-timesteps", str((UPDATES + 4) * 64),
                 env={"PPO_CORE_KILL_AT": f"update:{UPDATES + 4}"})
    assert again.returncode == -9
    final = main("--resume", str(run), "--total-timesteps", str((UPDATES + 4) * 64))
    assert final.returncode == 0, final.stderr[-3000:]
    check_wandb_history(run, state["id"], UPDATES + 4)


def test_the_offline_reader_stops_at_a_torn_tail(tmp_path):
    from shell.tracking import wandb_offline

    run = tmp_path / "run"
    proc = main(*wandb_args(), "--run-dir", str(run))
    assert proc.returncode == 0, proc.stderr[-3000:]
    (log,) = wandb_offline.offline_files(run, json.loads((run / "wandb.json").read_text())["id"])
    whole = list(wandb_offline.read_records(log))
    data = log.read_bytes()
    for cut in (len(data) - 3, len(data) // 2, 7):
        log.write_bytes(data[:cut])
        part = list(wandb_offline.read_records(log))
        assert part == whole[:len(part)]  # a prefix of the records, never a damaged one
    log.write_bytes(data[:4096] + b"\0" * 30000)  # zero-filled as a killed writer may leave it
    part = list(wandb_offline.read_records(log))
    assert part and part == whole[:len(part)] and len(part) < len(whole)


# ---------------------------------------------------------------------------------------------- tune
TUNE_SPACE = """
[tune.space]
ppo.learning_rate = { log_uniform = [1e-4, 3e-3] }
ppo.update_epochs = { int = [1, 3] }
"""


def test_a_tune_study_with_two_jobs_is_one_parent_run_with_a_child_run_per_trial(server, tmp_path):
    space = tmp_path / "space.toml"
    space.write_text(TUNE_SPACE)
    study_dir = tmp_path / "study"
    proc = main("tune", "--config", "cartpole", "--seeds", "0", "--set", "env.num_envs=4", "--set", "ppo.num_steps=64",
                "--set", "run.eval_episodes=3", "--set", 'run.loggers=["mlflow"]',
                "--set", f"run.mlflow.tracking_uri={json.dumps(server.uri)}", "--set", 'run.mlflow.experiment="tune"',
                "--space", str(space), "--trials", "4", "--jobs", "2", "--total-timesteps", "1024",
                "--study-dir", str(study_dir), timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert not warnings_of(proc.stderr), proc.stderr[-3000:]
    result = json.loads(proc.stdout.splitlines()[-1])
    client = server.client()
    parent_id = json.loads((study_dir / "mlflow.json").read_text())["run_id"]
    parent = client.get_run(parent_id)
    runs = client.search_runs([parent.info.experiment_id])
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent_id]
    assert len(runs) == 5 and len(children) == 4  # one parent, a child per trial (one seed)
    assert parent.info.status == "FINISHED" and parent.info.run_name.startswith("study-")
    import optuna

    trials = optuna.load_study(study_name="cartpole", storage=f"sqlite:///{study_dir / 'study.db'}").trials
    assert sorted(int(c.data.tags["ppo_core.trial"]) for c in children) == [t.number for t in trials]
    for child in children:
        trial = trials[int(child.data.tags["ppo_core.trial"])]
        # the trial's parameters are its run's params; its score is a tag, and a point on the parent's run
        assert float(child.data.params["ppo.learning_rate"]) == pytest.approx(trial.params["ppo.learning_rate"])
        assert child.data.params["ppo.update_epochs"] == str(trial.params["ppo.update_epochs"])
        assert float(child.data.tags["ppo_core.trial_value"]) == pytest.approx(trial.value)
        assert child.info.status == "FINISHED" and child.info.run_name == f"trial-{trial.number:04d}-s0"
    points = {m.step: m.value for m in client.get_metric_history(parent_id, "trial_value")}
    assert points == pytest.approx({t.number: t.value for t in trials})
    assert parent.data.tags["ppo_core.best_trial"] == str(result["best_trial"])


def test_a_tracking_server_that_is_down_from_the_start_costs_one_warning_line(tmp_path):
    from .trackers import free_port

    run = tmp_path / "run"
    started = time.monotonic()
    proc = main(*mlflow_args(f"http://127.0.0.1:{free_port()}", 4), "--run-dir", str(run))
    took = time.monotonic() - started
    assert proc.returncode == 0, proc.stderr[-3000:]
    (line,) = warnings_of(proc.stderr)
    assert line.startswith("warning: mlflow: ") and "the run goes on without mlflow" in line
    assert [int(r["update"]) for r in rows(run)] == [1, 2, 3, 4] and not (run / "mlflow.json").exists()
    assert took < 60, took  # MLflow's client gives up after its few retries, not minutes of backoff


def test_a_tune_study_with_wandb_is_one_group_of_trial_runs(tmp_path):
    from wandb.proto import wandb_internal_pb2

    from shell.tracking import wandb_offline

    space = tmp_path / "space.toml"
    space.write_text(TUNE_SPACE)
    study_dir = tmp_path / "study"
    proc = main("tune", "--config", "cartpole", "--seeds", "0", "--set", "env.num_envs=4", "--set", "ppo.num_steps=64",
                "--set", "run.eval_episodes=2", "--set", 'run.loggers=["wandb"]', "--space", str(space),
                "--trials", "2", "--jobs", "2", "--total-timesteps", "512", "--study-dir", str(study_dir), timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert not warnings_of(proc.stderr), proc.stderr[-3000:]
    seen = []
    for run in sorted(study_dir.glob("trials/*/s0")):
        state = json.loads((run / "wandb.json").read_text())
        (log,) = wandb_offline.offline_files(run, state["id"])
        (record,) = [r.run for r in map(wandb_internal_pb2.Record.FromString, wandb_offline.read_records(log))
                     if r.WhichOneof("record_type") == "run"][:1]
        number = int(run.parent.name)
        assert record.run_group == "cartpole" and record.display_name == f"trial-{number:04d}-s0"
        assert {"study:cartpole", f"trial:{number}"} <= set(record.tags)
        assert wandb_offline.summary(run, state["id"])["eval_return_mean"] == \
            json.loads((run / "summary.json").read_text())["eval_return_mean"]
        seen.append(number)
    assert seen == [0, 1]


def test_wandb_takes_what_the_table_leaves_out_from_its_environment_variables(tmp_path):
    from wandb.proto import wandb_internal_pb2

    from shell.tracking import wandb_offline

    run = tmp_path / "run"
    proc = main(*SMALL, "--total-timesteps", "128", "--run-dir", str(run), "--set", 'run.loggers=["wandb"]',
                "--set", 'run.wandb={name="from-table"}',
                env={"WANDB_PROJECT": "env-project", "WANDB_RUN_GROUP": "env-group", "WANDB_NAME": "from-env"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    state = json.loads((run / "wandb.json").read_text())
    (log,) = wandb_offline.offline_files(run, state["id"])
    (record,) = [r.run for r in map(wandb_internal_pb2.Record.FromString, wandb_offline.read_records(log))
                 if r.WhichOneof("record_type") == "run"][:1]
    assert (record.project, record.run_group, record.display_name) == ("env-project", "env-group", "from-table")


def test_first_line_is_one_function_for_errors_and_warnings():
    from shell.errors import first_line

    exc = RuntimeError("\n  server said no\ntraceback follows\n")
    assert first_line(exc) == "server said no"
    assert first_line(exc, with_type=True) == "RuntimeError: server said no"
    assert first_line(KeyError()) == ""
    assert first_line(KeyError(), with_type=True) == "KeyError"
