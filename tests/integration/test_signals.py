"""Signals in every phase of a run, async workers under Ctrl-C, and evaluations that would never end.

Ctrl-C in a terminal signals the whole process group, so these tests start main.py in a
session of its own and signal the group with ``os.killpg``, as a terminal does.
"""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from shell.checkpoint import load_checkpoint
from shell.config import config_from_dict
from shell.envs import make_env

from .conftest import ROOT

CUSTOM = "tests.integration.custom_envs"
TINY = ["--set", "env.num_envs=2", "--set", "ppo.num_steps=32", "--set", "ppo.num_minibatches=2",
        "--set", "ppo.update_epochs=2", "--set", "run.eval_episodes=2"]


def start(*args: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, str(ROOT / "main.py"), *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT, start_new_session=True)


def wait_for(predicate, timeout: float = 120.0) -> None:
    deadline = time.time() + timeout
    while not predicate():
        assert time.time() < deadline, "timed out waiting for the run"
        time.sleep(0.05)


def metrics_rows(run: Path) -> int:
    path = run / "metrics.csv"
    return len(path.read_text().splitlines()) - 1 if path.exists() else 0


def signal_group(proc: subprocess.Popen, sig: int) -> float:
    """Signal the process group as a terminal's Ctrl-C does; return the time it was sent."""
    os.killpg(proc.pid, sig)
    return time.time()


def finish(proc: subprocess.Popen, timeout: float = 60.0) -> tuple[str, str, float]:
    out, err = proc.communicate(timeout=timeout)
    return out, err, time.time()


def assert_interrupted(run: Path, out: str, err: str, code: int, returncode: int) -> dict:
    assert returncode == code, err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    assert err.strip().splitlines()[-1].startswith("interrupted by")
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["interrupted"] is True and summary["exit_code"] == code
    assert json.loads((run / "summary.json").read_text()) == summary
    assert load_checkpoint(summary["checkpoint"])["env_steps"] == summary["env_steps"]
    return summary


@pytest.mark.parametrize("mode", ["sync", "async", "threads"])
def test_ctrl_c_to_the_process_group_in_every_vectorization_mode(tmp_path, mode):
    run = tmp_path / "run"
    proc = start("--config", "cartpole", "--set", f"env.vectorization_mode='{mode}'", "--set", "env.num_envs=4",
                 "--total-timesteps", "100000000", "--run-dir", str(run))
    wait_for(lambda: metrics_rows(run) >= 2)
    sent = signal_group(proc, signal.SIGINT)
    out, err, ended = finish(proc)
    summary = assert_interrupted(run, out, err, 130, proc.returncode)
    assert summary["env_steps"] > 0 and ended - sent < 5


def test_closing_an_async_env_whose_workers_died_does_not_raise():
    cfg = config_from_dict({"env": {"id": "CartPole-v1", "num_envs": 2, "vectorization_mode": "async"}}).env
    import torch

    env = make_env(cfg, torch.device("cpu"))
    env.reset(seed=0)
    for process in env.env.unwrapped.processes:
        process.kill()
        process.join()
    env.close()  # BrokenPipeError / EOFError inside gymnasium must not escape
    assert all(not p.is_alive() for p in env.env.unwrapped.processes)


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_signal_during_the_final_evaluation(tmp_path, sig, code):
    # Episodes never end and the cap is huge: without polling, the evaluation would run forever.
    run = tmp_path / "run"
    proc = start("--config", "cartpole", "--set", f"env.id={CUSTOM}:NeverEnding-v0", *TINY,
                 "--set", "run.eval_max_episode_steps=1000000000", "--total-timesteps", "64", "--run-dir", str(run))
    wait_for(lambda: metrics_rows(run) >= 1)
    time.sleep(1.0)  # well inside the evaluation
    sent = signal_group(proc, sig)
    out, err, ended = finish(proc)
    summary = assert_interrupted(run, out, err, code, proc.returncode)
    assert summary["env_steps"] == 64 and summary["eval_episodes"] == 0
    assert ended - sent < 5


def test_signal_during_a_periodic_evaluation(tmp_path):
    run = tmp_path / "run"
    proc = start("--config", "cartpole", "--set", f"env.id={CUSTOM}:NeverEnding-v0", *TINY,
                 "--set", "run.eval_every=1", "--set", "run.eval_max_episode_steps=1000000000",
                 "--total-timesteps", "6400", "--run-dir", str(run))
    wait_for(lambda: (run / "tensorboard").exists())
    time.sleep(2.0)
    sent = signal_group(proc, signal.SIGINT)
    out, err, ended = finish(proc)
    summary = assert_interrupted(run, out, err, 130, proc.returncode)
    assert summary["env_steps"] == 64 and ended - sent < 5  # stopped inside the first evaluation


def test_signal_to_the_eval_command(main, tmp_path):
    run, marker = tmp_path / "run", tmp_path / "reset"
    assert main("--config", "cartpole", "--set", f"env.id={CUSTOM}:NeverEnding-v0", *TINY,
                "--set", f"env.kwargs={{reset_marker = '{marker}'}}",
                "--set", "run.eval_max_episode_steps=1000000000", "--set", "run.eval_episodes=0",
                "--total-timesteps", "64", "--run-dir", str(run)).returncode == 0
    marker.unlink()
    proc = start("eval", str(run), "--episodes", "1")
    wait_for(marker.exists)  # the evaluation's episode has started (not the interpreter's imports)
    time.sleep(0.5)
    sent = signal_group(proc, signal.SIGINT)
    _out, err, ended = finish(proc)
    assert proc.returncode == 130 and "Traceback" not in err and ended - sent < 5
    assert err.strip().splitlines()[-1] == "interrupted by SIGINT; nothing was written"
    assert not (run / "checkpoints" / "eval.json").exists()


def test_a_second_ctrl_c_is_never_swallowed(tmp_path):
    # The env's close() hangs for 60 s after the first Ctrl-C: the second one must stop the run at once.
    run = tmp_path / "run"
    proc = start("--config", "cartpole", "--set", f"env.id={CUSTOM}:SlowClose-v0", *TINY,
                 "--total-timesteps", "100000000", "--run-dir", str(run))
    wait_for(lambda: metrics_rows(run) >= 2)
    signal_group(proc, signal.SIGINT)
    wait_for(lambda: any((run / "checkpoints").glob("ckpt_*.pt")) and (run / "checkpoints").exists(), 30)
    time.sleep(1.0)  # now inside the hanging close()
    sent = signal_group(proc, signal.SIGINT)
    _out, err, ended = finish(proc)
    assert proc.returncode == 130 and ended - sent < 5
    assert "Traceback" not in err
    assert err.strip().splitlines()[-1].startswith("stopped at once by a second SIGINT")
    assert load_checkpoint(sorted((run / "checkpoints").glob("ckpt_*.pt"))[-1])["update"] >= 2


# ----------------------------------------------------------------------------- evaluation cap
def test_evaluation_of_a_never_ending_env_is_capped(main, tmp_path):
    run = tmp_path / "run"
    proc = main("--config", "cartpole", "--set", f"env.id={CUSTOM}:NeverEnding-v0", *TINY,
                "--total-timesteps", "64", "--run-dir", str(run), timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert summary["eval_max_episode_steps"] == 10_000  # no registered time limit: the default cap
    assert summary["eval_truncated_episodes"] == summary["eval_episodes"] == 2
    assert summary["eval_return_mean"] == 10_000.0  # reward 1 per step, cut at the cap
    proc = main("eval", str(run), "--episodes", "3")
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["eval_max_episode_steps"] == 10_000 and result["eval_truncated_episodes"] == 3


def test_evaluation_cap_defaults_to_the_time_limit_and_can_be_set(main, tmp_path):
    proc = main("--config", "pendulum", *TINY, "--total-timesteps", "64", "--run-dir", str(tmp_path / "a"))
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert summary["eval_max_episode_steps"] == 200 and summary["eval_truncated_episodes"] == 2
    proc = main("--config", "cartpole", *TINY, "--total-timesteps", "64", "--set", "run.eval_max_episode_steps=5",
                "--run-dir", str(tmp_path / "b"))
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    # an untrained CartPole policy does not fall within 5 steps: both episodes are cut by the cap
    assert summary["eval_max_episode_steps"] == 5 and summary["eval_truncated_episodes"] == 2
    assert summary["eval_return_mean"] == 5.0
    result = json.loads(main("eval", str(tmp_path / "b"), "--episodes", "2").stdout.strip().splitlines()[-1])
    assert result["eval_max_episode_steps"] == 5 and result["eval_return_mean"] == 5.0
