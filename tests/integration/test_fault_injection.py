"""SIGKILL at each phase of a run (shell/faults.py), then resume: the run dir must come out whole.

After a kill and a resume to the end, the run dir holds a loadable last checkpoint, a
metrics.csv with its header and every update exactly once, a summary, and a working plot.
"""

import csv
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from shell.checkpoint import latest_checkpoint, load_checkpoint
from shell.logs import CSV_FIELDS

from .conftest import ROOT, run_main

# 8 updates of 2 envs x 32 steps; a checkpoint every 2 updates, an evaluation (and checkpoint) every 3.
UPDATES = 8
ARGS = ["--config", "cartpole", "--set", "env.num_envs=2", "--set", "ppo.num_steps=32",
        "--set", "ppo.num_minibatches=2", "--set", "ppo.update_epochs=2", "--set", "run.eval_episodes=2",
        "--set", "run.checkpoint_every=2", "--set", "run.eval_every=3", "--total-timesteps", str(UPDATES * 64)]


def check_run_dir(run: Path, updates: int = UPDATES) -> None:
    with open(run / "metrics.csv", newline="") as f:
        reader = csv.reader(f)
        header = next(reader)
        rows = list(reader)
    assert header == list(CSV_FIELDS) and header[0] == "update"
    assert [int(r[0]) for r in rows] == list(range(1, updates + 1))  # every update exactly once, in order
    state = load_checkpoint(latest_checkpoint(run / "checkpoints"))
    assert state["update"] == updates and state["env_steps"] == updates * 64
    assert not list((run / "checkpoints").glob(".*.tmp"))
    summary = json.loads((run / "summary.json").read_text())
    assert summary["env_steps"] == updates * 64 and summary["interrupted"] is False
    assert summary["eval_episodes"] == 2
    # TensorBoard holds every update's step exactly once too (purged past the checkpoint on resume)
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(run / "tensorboard"))
    events.Reload()
    assert [e.step for e in events.Scalars("train/sps")] == [64 * u for u in range(1, updates + 1)]
    # the contract files are readable as any file the process writes (not mkstemp's 0600)
    umask = os.umask(0)
    os.umask(umask)
    for path in (run / "metrics.csv", latest_checkpoint(run / "checkpoints")):
        assert path.stat().st_mode & 0o777 == 0o666 & ~umask, path
    plot = run_main("plot", str(run), "--out", str(run / "curve.png"))
    assert plot.returncode == 0, plot.stderr[-2000:]
    assert (run / "curve.png").read_bytes()[:4] == b"\x89PNG"


def killed_run(run: Path, kill_at: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PPO_CORE_KILL_AT": kill_at}
    return subprocess.run([sys.executable, str(ROOT / "main.py"), *ARGS, "--run-dir", str(run)],
                          capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)


@pytest.mark.parametrize("kill_at", ["rollout:5", "update:5", "checkpoint:4", "eval:3", "eval:8"])
def test_sigkill_at_a_phase_then_resume(tmp_path, kill_at):
    run = tmp_path / "run"
    proc = killed_run(run, kill_at)
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    assert not (run / "summary.json").exists()
    phase, update = kill_at.split(":")
    rows = (run / "metrics.csv").read_text().splitlines()
    # rows are flushed as they are written: all finished updates are on disk despite the kill
    # (a periodic evaluation comes before its update's row; the final one after the last row)
    in_flight = phase in ("rollout", "update") or (phase == "eval" and int(update) < UPDATES)
    finished = int(update) - in_flight
    assert len(rows) == 1 + finished
    if phase == "checkpoint":
        assert list((run / "checkpoints").glob(".ckpt_*.tmp"))  # killed between the write and the rename
    resumed = run_main("--resume", str(run))
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    check_run_dir(run)


def test_sigkill_at_a_random_time_then_resume(tmp_path):
    run = tmp_path / "run"
    updates = 40
    args = [*ARGS[:-1], str(updates * 64), "--run-dir", str(run)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, str(ROOT / "main.py"), *args], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env=env, cwd=ROOT)
    deadline = time.time() + 120
    while not list((run / "checkpoints").glob("ckpt_*.pt")) and time.time() < deadline:
        time.sleep(0.02)
    time.sleep(random.uniform(0.0, 1.0))
    proc.kill()
    proc.wait(timeout=60)
    resumed = run_main("--resume", str(run))
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    check_run_dir(run, updates)


def test_resume_after_a_failure_writes_no_update_twice(main, tmp_path):
    # The env raises at its 150th step, in update 5 (2 envs x 32 steps); the last checkpoint is update 3.
    run = tmp_path / "run"
    base = ["--set", "env.id=tests.integration.custom_envs:Raising-v0", "--set", "env.num_envs=2",
            "--set", "ppo.num_steps=32", "--set", "ppo.num_minibatches=2", "--set", "ppo.update_epochs=2",
            "--set", "run.eval_episodes=0", "--set", "run.checkpoint_every=3"]
    proc = main("--config", "pendulum", *base, "--total-timesteps", "100000", "--run-dir", str(run))
    assert proc.returncode == 1 and "the last good checkpoint is" in proc.stderr.strip().splitlines()[-1]
    assert str(run / "checkpoints" / "ckpt_000000000192.pt") in proc.stderr.strip().splitlines()[-1]
    assert len((run / "metrics.csv").read_text().splitlines()) == 1 + 4
    proc = main("--resume", str(run))  # fails again 150 steps later, at update 3 + 5
    assert proc.returncode == 1
    with open(run / "metrics.csv", newline="") as f:
        assert [int(r["update"]) for r in csv.DictReader(f)] == list(range(1, 8))


def test_failure_before_any_checkpoint_names_none(main, tmp_path):
    run = tmp_path / "run"
    proc = main("--config", "pendulum", "--set", "env.id=tests.integration.custom_envs:Raising-v0",
                "--set", "env.num_envs=2", "--set", "ppo.num_steps=100", "--set", "ppo.num_minibatches=2",
                "--set", "run.checkpoint_every=0", "--total-timesteps", "100000", "--run-dir", str(run))
    assert proc.returncode == 1
    line = proc.stderr.strip().splitlines()[-1]
    assert "no checkpoint was written yet" in line and "checkpoints" not in line


def test_resume_with_the_same_total_again_finishes_and_a_smaller_one_is_refused(main, tmp_path):
    # 200 steps round up to 4 updates of 64 (256 steps); resending the same flags must work
    run = tmp_path / "run"
    args = [*ARGS[:-1], "200", "--set", "run.eval_episodes=1"]
    assert main(*args, "--run-dir", str(run)).returncode == 0
    again = main("--resume", str(run), "--total-timesteps", "200")
    assert again.returncode == 0, again.stderr[-2000:]
    assert json.loads(again.stdout.strip().splitlines()[-1])["env_steps"] == 256
    fewer = main("--resume", str(run), "--total-timesteps", "150")
    assert fewer.returncode == 2 and "is fewer" in fewer.stderr.strip().splitlines()[-1]


def test_resume_of_a_run_killed_before_its_first_checkpoint_says_so_in_one_line(main, tmp_path):
    """A run dir with its config and metrics but no checkpoint yet (a kill before the first one): exit 2, one line
    naming the missing checkpoint and what to do instead."""
    run = tmp_path / "run"
    assert main(*ARGS[:-1], "128", "--set", "run.eval_episodes=1", "--run-dir", str(run)).returncode == 0
    for checkpoint in (run / "checkpoints").glob("ckpt_*.pt"):
        checkpoint.unlink()
    resumed = main("--resume", str(run), "--total-timesteps", "256")
    line = resumed.stderr.strip().splitlines()[-1]
    assert resumed.returncode == 2 and line.startswith("error: --resume"), resumed.stderr[-2000:]
    assert "no checkpoint" in line and "before writing its first" in line and "without --resume" in line
