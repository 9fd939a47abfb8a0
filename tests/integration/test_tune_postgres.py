"""Studies shared through a real PostgreSQL server that the tests start themselves (the system's binaries; see
postgres_server.py), as several machines share one: each "machine" is a ``tune`` command started from a folder
of its own, with a study dir of its own, sharing only the database.

- Opening a fresh database is safe to race (PostgreSQL and a shared SQLite file).
- Two machines that start together on a fresh database, and a server restarted in the middle of the study:
  both finish, with exactly ``--trials`` trials, none failed, none trained twice.
- A machine killed with SIGKILL in the middle of a trial: the heartbeat fails its trial, the other machine
  runs it again once, and the study ends with exactly ``--trials`` trials.

Machines that race for the study's last slot settle it by start time, and the later trial ends at once as
FAIL marked ``surplus`` (shell/tune's "Counting"): whether that happens depends on how far apart the
machines' trials end, so "none failed" here means no trial failed but the surplus ones, which never trained.

Trials are tiny (CartPole, 4 envs x 64 steps, one seed); the heartbeat is 2 s, so a killed trial is stale 6 s
after its last beat.
"""

import json
import os
import signal
import subprocess
import threading
import time
from collections import Counter
from pathlib import Path

import optuna
import pytest

from shell.tune import NO_HEARTBEAT, SURPLUS, resolve_settings
from shell.tune.study import load_study

from .postgres_server import PostgresServer, missing_reason
from .test_tune import start, wait_for_training

pytestmark = pytest.mark.skipif(missing_reason() is not None, reason=str(missing_reason()))

SPACE = """
[tune.space]
ppo.learning_rate = { log_uniform = [1e-4, 3e-3] }
ppo.update_epochs = { int = [1, 3] }
"""


@pytest.fixture(scope="module")
def postgres():
    server = PostgresServer()
    server.start()
    yield server
    server.remove()


def machine(tmp_path: Path, name: str, url: str, trials: int, steps: int) -> subprocess.Popen:
    """``main.py tune`` from a folder of its own (its study dir inside it), as on another machine."""
    folder = tmp_path / name
    folder.mkdir()
    (folder / "space.toml").write_text(SPACE)
    args = ["tune", "--config", "cartpole", "--seeds", "0", "--set", "env.num_envs=4", "--set", "ppo.num_steps=64",
            "--set", "run.eval_episodes=2", "--heartbeat", "2", "--pruner", "none", "--space", "space.toml",
            "--trials", str(trials), "--jobs", "1", "--total-timesteps", str(steps), "--storage", url,
            "--study", "shared", "--study-dir", "study"]
    return start(args, cwd=folder)


def finish(proc: subprocess.Popen, timeout: float = 180) -> str:
    """Wait for a machine's tune command to succeed; its stderr."""
    _, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, err[-3000:]
    assert "Traceback" not in err
    return err


def failed_apart_from_surplus(trials: list[optuna.trial.FrozenTrial], folders: list[Path]) -> list[int]:
    """The numbers of the FAIL trials that are not surplus; a surplus trial must have started no run."""
    failed = []
    for t in trials:
        if t.state.name != "FAIL":
            continue
        if t.user_attrs.get("error") == SURPLUS:
            assert not [f for f in folders if (f / "study" / "trials" / f"{t.number:04d}").exists()], t.number
        else:
            failed.append(t.number)
    return failed


def assert_study_whole(url: str, folders: list[Path], total: int) -> list[optuna.trial.FrozenTrial]:
    """Exactly ``total`` COMPLETE trials, none RUNNING or WAITING; each trained in exactly one machine's folder,
    and no two trials finished a run of the same parameters."""
    trials = optuna.load_study(study_name="shared", storage=url).trials
    states = Counter(t.state.name for t in trials)
    assert states["COMPLETE"] == total and states["RUNNING"] == states["WAITING"] == 0, states
    finished = Counter()
    for t in trials:
        summaries = [s for f in folders for s in (f / "study" / "trials" / f"{t.number:04d}").glob("s*/summary.json")]
        done = [s for s in summaries if not json.loads(s.read_text())["interrupted"]]
        if t.state.name == "COMPLETE":
            assert len(done) == 1 and json.loads(done[0].read_text())["eval_return_mean"] == t.value
        finished[json.dumps(t.params, sort_keys=True)] += len(done)
    assert max(finished.values()) == 1, finished
    return trials


@pytest.mark.parametrize("kind", ["postgresql", "sqlite"])
def test_opening_a_fresh_database_at_once_from_many_processes_is_safe(postgres, tmp_path, kind):
    url = postgres.new_database() if kind == "postgresql" else f"sqlite:///{tmp_path / 'shared.db'}"
    (tmp_path / "space.toml").write_text(SPACE)
    settings, _, _ = resolve_settings("cartpole", 3, [0], None, [], str(tmp_path / "d"), url, "shared",
                                      str(tmp_path / "space.toml"), None, 2)
    barrier, errors = threading.Barrier(6), []

    def open_it() -> None:
        barrier.wait()
        try:
            load_study(settings, heartbeat=True)
        except Exception as exc:  # before the fix: UniqueViolation, "table studies already exists"
            errors.append(exc)

    threads = [threading.Thread(target=open_it) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert [s.study_name for s in optuna.get_all_study_summaries(url)] == ["shared"]


def test_two_machines_starting_together_through_a_server_restart_lose_and_duplicate_nothing(postgres, tmp_path):
    url = postgres.new_database()
    a, b = (machine(tmp_path, name, url, trials=3, steps=2048) for name in ("a", "b"))
    wait_for_training(tmp_path / "a" / "study")
    postgres.stop()  # down for a few seconds: the heartbeats and reports of running trials meet no server
    time.sleep(3)
    postgres.start()
    said = finish(a) + finish(b)
    folders = [tmp_path / "a", tmp_path / "b"]
    trials = assert_study_whole(url, folders, 3)
    assert failed_apart_from_surplus(trials, folders) == [], said  # nothing failed, so nothing was run again
    assert not [t for t in trials if "failed_trial" in t.system_attrs], said
    said += "".join(p.read_text() for p in tmp_path.glob("*/study/logs/worker_*.log"))
    assert "the study's database cannot be reached" in said and "the study's database is back" in said


def test_a_machine_killed_mid_trial_has_it_failed_by_the_heartbeat_and_retried_once(postgres, tmp_path):
    url = postgres.new_database()
    a = machine(tmp_path, "a", url, trials=2, steps=2048)
    b = machine(tmp_path, "b", url, trials=2, steps=2048)
    killed = wait_for_training(tmp_path / "b" / "study")
    os.killpg(b.pid, signal.SIGKILL)  # the machine goes down: its tune command and its worker, no clean-up
    b.communicate(timeout=30)
    said = finish(a)
    folders = [tmp_path / "a", tmp_path / "b"]
    trials = assert_study_whole(url, folders, 2)
    assert trials[killed].state.name == "FAIL" and trials[killed].user_attrs["error"] == NO_HEARTBEAT, said
    retries = [t for t in trials if t.system_attrs.get("failed_trial") == killed]
    assert len(retries) == 1 and retries[0].state.name == "COMPLETE" and retries[0].params == trials[killed].params
    assert (tmp_path / "a" / "study" / "trials" / f"{retries[0].number:04d}").is_dir()  # the live machine ran it
    assert failed_apart_from_surplus(trials, folders) == [killed], said
