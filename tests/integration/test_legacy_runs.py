"""Run dirs written by old versions (tests/fixtures/runs_<commit>) still work.

For each fixture, a copy must evaluate (``main.py eval``), export (``main.py export``: ``--format pt2`` for
the ee468a1 runs, the default ONNX for the 32f030c and 6ee7eb4 ones, one file per group for a run with
several groups of agents), resume for one more update from its checkpoint (metrics.csv gets exactly one more
row, and the new checkpoint loads), and load with ``shell.load_policy`` and act on one reset of its env (a
multi-agent run's policy maps an agent dict to an action dict; a masked one acts with the env's mask; a
turn-based game's acts for the seat to move). The self-play run of runs_6ee7eb4 must also resume with its
pool of snapshots (rated evaluations with ``eval_vs`` and ``elo`` naming the snapshots the pool holds then),
evaluate to the very results its summary recorded, and play whole games (``main.py play``). The fixtures
keep config.toml, summary.json, metrics.csv, versions.json and the final checkpoint only (tensorboard/ and
best.pt deleted). Each folder was written by a clean checkout of its commit (versions.json names it), in an
empty directory, with

    COMMON="--set run.keep_checkpoints=1 --set run.eval_episodes=2 --set run.eval_max_episode_steps=200"

tests/fixtures/runs_ee468a1 (commit ee468a1; doorkey is the Dict observation with an image):

    main.py --config cartpole --total-timesteps 4096 --run-dir cartpole $COMMON
    main.py --config pendulum --total-timesteps 6400 --run-dir pendulum $COMMON
    main.py --config cartpole-lstm --total-timesteps 2048 --run-dir cartpole-lstm $COMMON \\
        --set policy.rnn_hidden_size=16
    main.py --config doorkey --total-timesteps 2048 --run-dir doorkey $COMMON \\
        --set env.num_envs=16 --set "policy.hidden_sizes=[16]"

tests/fixtures/runs_32f030c (commit 32f030c; simple-spread is one group of three agents sharing a policy
on the pettingzoo backend, simple-tag two groups with a policy each, taxi a Discrete env with
gymnasium's own action mask, info["action_mask"]):

    SMALL="--set env.num_envs=2 --set policy.hidden_sizes=[16]"
    main.py --config simple-spread --total-timesteps 400 --run-dir simple-spread $COMMON $SMALL \\
        --set env.vectorization_mode="sync"
    main.py --config simple-tag --total-timesteps 400 --run-dir simple-tag $COMMON $SMALL \\
        --set env.vectorization_mode="sync"
    main.py --config taxi --total-timesteps 256 --run-dir taxi $COMMON $SMALL

(2 updates each: 2 x 100 env steps for the MPE runs, 2 x 64 for taxi).

tests/fixtures/runs_6ee7eb4 (commit 6ee7eb4; tictactoe is PettingZoo's turn-based tic-tac-toe, configs/
tictactoe.toml: one policy in both seats, every game opened by one random move, a game's opponent uniform-
random moves (20%) or else the learner itself or a snapshot of the self-play pool, taken after every update,
the newest 3 kept; rated evaluations after update 2 and at the end, against random and the pool's snapshots):

    main.py --config tictactoe --seed 0 --total-timesteps 16384 --run-dir tictactoe $COMMON \\
        --set "policy.hidden_sizes=[32, 32]" --set selfplay.snapshot_every=1 --set selfplay.pool_size=3 \\
        --set selfplay.random_prob=0.2 --set run.eval_every=2

(4 updates of 32 x 128 moves; the checkpoint's "selfplay" entry holds snapshot@2, @3 and @4, and the
smaller policy keeps it at 134 KB.)
"""

import csv
import importlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, NamedTuple

import gymnasium as gym
import numpy as np
import pytest
import tomllib

from .conftest import ROOT, run_main

FIXTURES = ROOT / "tests" / "fixtures"


class FixtureSet(NamedTuple):
    commit: str               # the commit that wrote the runs (versions.json's git_commit starts with it)
    runs: list[str]           # the run dirs it holds
    export_format: str | None  # the --format the export test asks for; None: the default (ONNX)


SETS = {"runs_ee468a1": FixtureSet("ee468a1", ["cartpole", "cartpole-lstm", "doorkey", "pendulum"], "pt2"),
        "runs_32f030c": FixtureSet("32f030c", ["simple-spread", "simple-tag", "taxi"], None),
        "runs_6ee7eb4": FixtureSet("6ee7eb4", ["tictactoe"], None)}
RUNS = [(folder, name) for folder in SETS for name in sorted(p.name for p in (FIXTURES / folder).iterdir()
                                                              if p.is_dir())]
EXTRA = {"doorkey": ("minigrid",), "simple-spread": ("pettingzoo", "mpe2"),  # runs whose env needs
         "simple-tag": ("pettingzoo", "mpe2"),                             # an optional package
         "tictactoe": ("pettingzoo", "pygame")}


@pytest.fixture(params=RUNS, ids=[f"{folder}/{name}" for folder, name in RUNS])
def run_dir(request, tmp_path) -> Path:
    """A fresh copy of one fixture run dir, at tmp/<fixture folder>/<run> (the fixtures are never written)."""
    folder, name = request.param
    for module in EXTRA.get(name, ()):
        pytest.importorskip(module)
    return Path(shutil.copytree(FIXTURES / folder / name, tmp_path / folder / name))


def last_json(text: str) -> dict:
    return json.loads(text.strip().splitlines()[-1])


def metrics(run_dir: Path) -> list[dict[str, str]]:
    with open(run_dir / "metrics.csv", newline="") as f:
        return list(csv.DictReader(f))


def config_of(run_dir: Path) -> dict[str, Any]:
    return tomllib.loads((run_dir / "config.toml").read_text())


def act_once(policy: Any, config: dict[str, Any]) -> None:
    """The policy acts on one reset of the run's env (seed 0), with legal actions, the same on a second call."""
    env_cfg = config["env"]
    if env_cfg.get("backend") == "pettingzoo" and not hasattr(importlib.import_module(env_cfg["id"]), "parallel_env"):
        # a turn-based game (a module with env(**kwargs), PettingZoo's AEC env): the seat to move acts, legally
        game = importlib.import_module(env_cfg["id"]).env(**env_cfg.get("kwargs", {}))
        game.reset(seed=0)
        seat = game.agent_selection
        obs = game.observe(seat)  # {"observation", "action_mask"}
        action = policy({seat: obs})[seat]
        assert obs["action_mask"][int(action)], (seat, action)
        assert np.array_equal(action, policy({seat: obs})[seat])
        game.step(int(action))
        game.close()
        return
    if env_cfg.get("backend") == "pettingzoo":  # a module with parallel_env(**kwargs): {agent: obs} -> {agent: action}
        env = importlib.import_module(env_cfg["id"]).parallel_env(**env_cfg.get("kwargs", {}))
        obs, _ = env.reset(seed=0)
        actions = policy(obs)
        assert sorted(actions) == sorted(obs) == sorted(env.agents)
        for agent, action in actions.items():
            space = env.action_space(agent)
            assert space.contains(np.asarray(action, dtype=space.dtype)), (agent, action)
        if not policy.recurrent:
            again = policy(obs)
            assert all(np.array_equal(actions[a], again[a]) for a in actions)
        env.step(actions)
        env.close()
        return
    if env_cfg["id"].startswith("MiniGrid"):
        import minigrid  # noqa: F401  (registers the MiniGrid ids)
    env = gym.make(env_cfg["id"], **env_cfg.get("kwargs", {}))
    obs, info = env.reset(seed=0)  # a Dict's extra keys (MiniGrid's mission) are ignored
    mask = info.get("action_mask")  # Taxi's own mask: a masked policy acts only with it
    action = policy(obs, **({} if mask is None else {"action_mask": mask}))
    assert env.action_space.contains(np.asarray(action, dtype=env.action_space.dtype))
    if mask is not None:
        assert mask[int(action)]
    if not policy.recurrent:  # a recurrent policy's second call continues the episode
        assert np.array_equal(action, policy(obs, **({} if mask is None else {"action_mask": mask})))
    env.close()


@pytest.mark.parametrize("folder", SETS)
def test_fixtures_are_complete_and_small(folder):
    fixtures = FIXTURES / folder
    assert sorted(p.name for p in fixtures.iterdir() if p.is_dir()) == SETS[folder].runs
    for name in SETS[folder].runs:
        files = sorted(str(p.relative_to(fixtures / name)) for p in (fixtures / name).rglob("*") if p.is_file())
        assert [f for f in files if not f.startswith("checkpoints/")] == \
            ["config.toml", "metrics.csv", "summary.json", "versions.json"]
        assert len([f for f in files if f.startswith("checkpoints/ckpt_")]) == 1
        assert sum((fixtures / name / f).stat().st_size for f in files) < 300_000
        versions = json.loads((fixtures / name / "versions.json").read_text())
        assert versions["git_commit"].startswith(SETS[folder].commit) and versions["git_dirty"] is False


def test_eval(run_dir):
    proc = run_main("eval", str(run_dir), "--episodes", "2")
    assert proc.returncode == 0, proc.stderr
    result = last_json(proc.stdout)
    assert result["eval_episodes"] == 2 and np.isfinite(result["eval_return_mean"])


def test_export(run_dir):
    export_format = SETS[run_dir.parent.name].export_format
    suffix = export_format or "onnx"
    if suffix == "onnx":
        pytest.importorskip("onnxruntime")
    checkpoints = run_dir / "checkpoints"
    (checkpoint,) = checkpoints.glob("ckpt_*.pt")
    proc = run_main("export", str(run_dir), *(["--format", export_format] if export_format else []))
    assert proc.returncode == 0, proc.stderr
    last_json(proc.stdout)  # the result is one line of JSON
    groups = config_of(run_dir)["env"].get("groups") or {}
    # a run with several groups of agents has a policy per group: a file each, named after the group
    expected = [f"{checkpoint.stem}.{g}.{suffix}" for g in sorted(groups)] if len(groups) > 1 \
        else [f"{checkpoint.stem}.{suffix}"]
    assert sorted(p.name for p in checkpoints.glob(f"*.{suffix}")) == expected
    for name in expected:  # each file loads with its runtime
        if suffix == "onnx":
            import onnxruntime

            onnxruntime.InferenceSession(str(checkpoints / name), providers=["CPUExecutionProvider"])
        else:
            import torch

            torch.export.load(checkpoints / name)


def test_resume_one_more_update(run_dir):
    import shell

    before = metrics(run_dir)
    summary = json.loads((run_dir / "summary.json").read_text())
    config = config_of(run_dir)
    total = summary["env_steps"] + config["env"]["num_envs"] * config["ppo"]["num_steps"]
    proc = run_main("--resume", str(run_dir), "--total-timesteps", str(total), "--device", "cpu")
    assert proc.returncode == 0, proc.stderr
    result = last_json(proc.stdout)
    assert (result["updates"], result["env_steps"]) == (summary["updates"] + 1, total)
    after = metrics(run_dir)
    assert after[:-1] == before  # the old rows are kept as they were, and one row follows
    assert (int(after[-1]["update"]), int(after[-1]["env_steps"])) == (summary["updates"] + 1, total)
    checkpoint = run_dir / "checkpoints" / f"ckpt_{total:012d}.pt"
    assert checkpoint.is_file()
    act_once(shell.load_policy(checkpoint), config)  # the new checkpoint loads and acts


def test_load_policy_acts(run_dir):
    import shell  # registers CartPoleNoVel-v1

    act_once(shell.load_policy(run_dir), config_of(run_dir))


# -- the self-play run of runs_6ee7eb4: its pool of snapshots resumes, rates and plays

SELFPLAY = FIXTURES / "runs_6ee7eb4" / "tictactoe"
SEATS = ["player_1", "player_2"]


@pytest.fixture
def selfplay_run(tmp_path) -> Path:
    """A fresh copy of runs_6ee7eb4/tictactoe (a self-play run with a pool of 3 snapshots)."""
    for module in EXTRA["tictactoe"]:
        pytest.importorskip(module)
    return Path(shutil.copytree(SELFPLAY, tmp_path / "runs_6ee7eb4" / "tictactoe"))


def without_distinct(eval_vs: dict[str, Any]) -> dict[str, Any]:
    """``eval_vs`` without each seat's ``distinct`` (written since 2026-12-07), as 6ee7eb4 wrote it."""
    return {name: {seat: {k: v for k, v in rates.items() if k != "distinct"} for seat, rates in seats.items()}
            for name, seats in eval_vs.items()}


def check_rated(result: dict[str, Any], snapshots: list[str], games: int) -> None:
    """``eval_vs`` has random then the pool's ``snapshots`` (in that order), each seat's ``games`` games as rates;
    ``elo`` rates them and the policy, random anchored at 0."""
    assert list(result["eval_vs"]) == ["random", *snapshots]
    for name, seats in result["eval_vs"].items():
        assert sorted(seats) == SEATS, name
        for seat, rates in seats.items():
            assert rates["games"] == games, (name, seat)
            assert sorted(rates) in (["draw", "games", "loss", "win"], ["distinct", "draw", "games", "loss", "win"])
            assert rates["win"] + rates["draw"] + rates["loss"] == pytest.approx(1.0), (name, seat)
    assert sorted(result["elo"]) == sorted(["random", "policy", *snapshots])
    assert result["elo"]["random"] == 0.0
    assert all(np.isfinite(v) for v in result["elo"].values())


def test_selfplay_fixture_holds_a_pool():
    """The fixture is what the tests below take it for: 4 updates, a "selfplay" entry with 3 snapshots (taken
    after updates 2, 3 and 4), and a summary of a rated evaluation against them (read as written by 6ee7eb4)."""
    import torch

    state = torch.load(SELFPLAY / "checkpoints" / "ckpt_000000016384.pt", map_location="cpu", weights_only=False)
    assert (state["update"], state["env_steps"]) == (4, 16384)
    assert state["selfplay"]["taken_at"] == [2, 3, 4] and len(state["selfplay"]["snapshots"]) == 3
    summary = json.loads((SELFPLAY / "summary.json").read_text())
    assert (summary["updates"], summary["env_steps"], summary["eval_episodes"]) == (4, 16384, 2)
    check_rated(summary, ["snapshot@2", "snapshot@3", "snapshot@4"], games=1)
    rows = metrics(SELFPLAY)  # the evaluation after update 2 was rated too
    assert [(r["update"], r["eval_return"] != "", r["elo"] != "") for r in rows] == \
        [("1", False, False), ("2", True, True), ("3", False, False), ("4", False, False)]


def test_selfplay_resumes_with_its_pool(selfplay_run):
    """Three more updates from the legacy checkpoint: a snapshot after each (the pool keeps the newest 3, so
    snapshot@2-@4 leave for @5-@7), a rated evaluation after update 6 (run.eval_every = 2) in metrics.csv, and
    the final one, against random and the pool of then, in the summary."""
    before = metrics(selfplay_run)
    total = 16384 + 3 * 32 * 128
    proc = run_main("--resume", str(selfplay_run), "--total-timesteps", str(total), "--device", "cpu")
    assert proc.returncode == 0, proc.stderr
    result = last_json(proc.stdout)
    assert (result["updates"], result["env_steps"]) == (7, total)
    summary = json.loads((selfplay_run / "summary.json").read_text())
    assert (summary["updates"], summary["env_steps"], summary["eval_episodes"]) == (7, total, 2)
    assert summary["eval_vs"] == result["eval_vs"] and summary["elo"] == result["elo"]
    check_rated(summary, ["snapshot@5", "snapshot@6", "snapshot@7"], games=1)
    after = metrics(selfplay_run)
    assert after[:len(before)] == before
    assert [(int(r["update"]), int(r["env_steps"])) for r in after[len(before):]] == \
        [(5, 16384 + 4096), (6, 16384 + 2 * 4096), (7, total)]
    assert [(r["eval_return"] != "", r["elo"] != "") for r in after[len(before):]] == \
        [(False, False), (True, True), (False, False)]
    assert np.isfinite(float(after[-2]["eval_return"])) and np.isfinite(float(after[-2]["elo"]))
    assert (selfplay_run / "checkpoints" / f"ckpt_{total:012d}.pt").is_file()


def test_selfplay_eval_rates_the_pool(selfplay_run):
    """``eval`` of the legacy checkpoint plays random and the pool's three snapshots and rates them all: with the
    run's 2 episodes (its seeds, a deterministic policy, the snapshots' own rating seeds) it gives the very
    eval_vs and elo that 6ee7eb4's final evaluation wrote in summary.json; eval.json is written beside it."""
    proc = run_main("eval", str(selfplay_run), "--episodes", "2")
    assert proc.returncode == 0, proc.stderr
    result = last_json(proc.stdout)
    assert (result["env_steps"], result["eval_episodes"]) == (16384, 2)
    check_rated(result, ["snapshot@2", "snapshot@3", "snapshot@4"], games=1)
    summary = json.loads((selfplay_run / "summary.json").read_text())
    assert without_distinct(result["eval_vs"]) == summary["eval_vs"]  # distinct: counted since 6ee7eb4
    assert all(rates["distinct"] == 1 for seats in result["eval_vs"].values() for rates in seats.values())
    assert result["elo"] == summary["elo"]
    assert result["eval_return_mean"] == summary["eval_return_mean"]
    eval_json = json.loads((selfplay_run / "checkpoints" / "eval.json").read_text())
    assert (eval_json["eval_vs"], eval_json["elo"]) == (result["eval_vs"], result["elo"])


@pytest.mark.parametrize(("seat", "moves", "agent_moves", "outcome"), [
    ("player_1", [0, 1, 2], [4, 5], {"seat": "player_1", "score": 1.0, "result": "win", "moves": 5}),
    ("player_2", [0, 1], [2, 8, 5], {"seat": "player_2", "score": -1.0, "result": "loss", "moves": 5}),
])
def test_selfplay_plays_a_game(selfplay_run, seat, moves, agent_moves, outcome):
    """``play`` a whole game against the legacy run's policy, in each seat, from moves on stdin: every scripted
    move is legal against the agent's deterministic replies (those 6ee7eb4's policy makes), and the game ends
    with the result printed as the last line."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, str(ROOT / "main.py"), "play", str(selfplay_run), "--seat", seat,
                           "--seed", "0"], input="".join(f"{m}\n" for m in moves), capture_output=True, text=True,
                          cwd=ROOT, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "illegal move" not in proc.stdout, proc.stdout
    result = last_json(proc.stdout)
    assert result["result"] in ("win", "draw", "loss"), proc.stdout
    assert result == outcome, proc.stdout
    other = SEATS[1 - SEATS.index(seat)]
    assert [int(line.rsplit(" ", 1)[1]) for line in proc.stdout.splitlines()
            if line.startswith(f"{other} (agent) plays ")] == agent_moves
