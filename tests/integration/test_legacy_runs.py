"""Run dirs written by an old version (tests/fixtures/runs_ee468a1, commit ee468a1) still work.

For each fixture, a copy must evaluate (``main.py eval``), export (``main.py export --format pt2``),
resume for one more update from its checkpoint, and load with ``shell.load_policy``. The fixtures
keep config.toml, summary.json, metrics.csv, versions.json and the final checkpoint only. They were
written by a clean checkout of ee468a1 (versions.json names it) with

    COMMON="--set run.keep_checkpoints=1 --set run.eval_episodes=2 --set run.eval_max_episode_steps=200"
    main.py --config cartpole --total-timesteps 4096 --run-dir cartpole $COMMON
    main.py --config pendulum --total-timesteps 6400 --run-dir pendulum $COMMON
    main.py --config cartpole-lstm --total-timesteps 2048 --run-dir cartpole-lstm $COMMON \\
        --set policy.rnn_hidden_size=16
    main.py --config doorkey --total-timesteps 2048 --run-dir doorkey $COMMON \\
        --set env.num_envs=16 --set "policy.hidden_sizes=[16]"

(2 updates each; doorkey is the Dict observation with an image) and tensorboard/ deleted.
"""

import csv
import json
import shutil
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import tomllib

from .conftest import ROOT, run_main

FIXTURES = ROOT / "tests" / "fixtures" / "runs_ee468a1"
RUNS = sorted(p.name for p in FIXTURES.iterdir() if p.is_dir())
EXTRA = {"doorkey": "minigrid"}  # fixtures whose env needs an optional package


@pytest.fixture(params=RUNS)
def run_dir(request, tmp_path) -> Path:
    """A fresh copy of one fixture run dir (the fixtures themselves are never written)."""
    if request.param in EXTRA:
        pytest.importorskip(EXTRA[request.param])
    return Path(shutil.copytree(FIXTURES / request.param, tmp_path / request.param))


def last_json(text: str) -> dict:
    return json.loads(text.strip().splitlines()[-1])


def metrics(run_dir: Path) -> list[dict[str, str]]:
    with open(run_dir / "metrics.csv", newline="") as f:
        return list(csv.DictReader(f))


def test_fixtures_are_complete_and_small():
    assert RUNS == ["cartpole", "cartpole-lstm", "doorkey", "pendulum"]
    for name in RUNS:
        files = sorted(str(p.relative_to(FIXTURES / name)) for p in (FIXTURES / name).rglob("*") if p.is_file())
        assert [f for f in files if not f.startswith("checkpoints/")] == \
            ["config.toml", "metrics.csv", "summary.json", "versions.json"]
        assert len([f for f in files if f.startswith("checkpoints/ckpt_")]) == 1
        assert sum((FIXTURES / name / f).stat().st_size for f in files) < 300_000
        assert json.loads((FIXTURES / name / "versions.json").read_text())["git_commit"].startswith("ee468a1")


def test_eval(run_dir):
    proc = run_main("eval", str(run_dir), "--episodes", "2")
    assert proc.returncode == 0, proc.stderr
    result = last_json(proc.stdout)
    assert result["eval_episodes"] == 2 and np.isfinite(result["eval_return_mean"])


def test_export_pt2(run_dir):
    proc = run_main("export", str(run_dir), "--format", "pt2")
    assert proc.returncode == 0, proc.stderr
    result = last_json(proc.stdout)
    assert result["format"] == "pt2" and Path(result["export"]).is_file()


def test_resume_one_more_update(run_dir):
    before = metrics(run_dir)
    summary = json.loads((run_dir / "summary.json").read_text())
    config = tomllib.loads((run_dir / "config.toml").read_text())
    total = summary["env_steps"] + config["env"]["num_envs"] * config["ppo"]["num_steps"]
    proc = run_main("--resume", str(run_dir), "--total-timesteps", str(total), "--device", "cpu")
    assert proc.returncode == 0, proc.stderr
    result = last_json(proc.stdout)
    assert (result["updates"], result["env_steps"]) == (summary["updates"] + 1, total)
    after = metrics(run_dir)
    assert after[:-1] == before  # the old rows are kept as they were, and one row follows
    assert (int(after[-1]["update"]), int(after[-1]["env_steps"])) == (summary["updates"] + 1, total)
    assert (run_dir / "checkpoints" / f"ckpt_{total:012d}.pt").is_file()


def test_load_policy_acts(run_dir):
    import shell  # registers CartPoleNoVel-v1

    policy = shell.load_policy(run_dir)
    env_id = tomllib.loads((run_dir / "config.toml").read_text())["env"]["id"]
    if env_id.startswith("MiniGrid"):
        import minigrid  # noqa: F401  (registers the MiniGrid ids)
    obs, _ = gym.make(env_id).reset(seed=0)  # a Dict's extra keys (MiniGrid's mission) are ignored
    action = policy(obs)
    assert policy.action_space.contains(np.asarray(action, dtype=policy.action_space.dtype))
    if not policy.recurrent:  # a recurrent policy's second call continues the episode
        assert np.array_equal(action, policy(obs))
