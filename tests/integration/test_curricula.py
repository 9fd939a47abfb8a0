"""The curriculum of docs/guides/curricula.md: the difficulty rises at the updates its rule names, on
every training sub-env (of every rank) and on the evaluation envs, on one process, under torchrun with 2
ranks (CPU, gloo), and across a kill and a resume (the callback's state is in the checkpoint)."""

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import shell
from shell.callbacks import CallbackContext, takes_context
from shell.errors import ConfigError

from .conftest import ROOT
from .curriculum_driver import example

DRIVER = str(ROOT / "tests" / "integration" / "curriculum_driver.py")
UPDATES = 12


def run_driver(*args: str, torchrun: bool = False, env: dict | None = None) -> subprocess.CompletedProcess:
    launcher = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"] if torchrun \
        else [sys.executable]
    full_env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", **(env or {})}
    return subprocess.run([*launcher, DRIVER, *args], capture_output=True, text=True, env=full_env, timeout=600)


def expected_levels(run: Path) -> dict[int, int]:
    """The level after each update's callbacks, from metrics.csv's eval_return and the example's rule."""
    with open(run / "metrics.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [int(r["update"]) for r in rows] == list(range(1, len(rows) + 1))
    level, levels = 0, {0: 0}
    for r in rows:
        if r["eval_return"] != "" and level < 3 and float(r["eval_return"]) >= 0.8 * 20 / (1 + level):
            level += 1
        levels[int(r["update"])] = level
        if r["eval_return"] != "":  # the evaluation ran at the level set after the update before
            assert float(r["eval_return"]) <= 20 / (1 + levels[int(r["update"]) - 1]) + 1e-6
    return levels


def records(folder: Path, rank: int) -> list[dict]:
    return [json.loads(line) for line in (folder / f"rank{rank}.jsonl").read_text().splitlines()]


def check(run: Path, folder: Path, world_size: int) -> dict[int, int]:
    levels = expected_levels(run)
    assert levels[UPDATES] >= 2  # the difficulty did rise, more than once
    raised = [u for u in range(1, UPDATES + 1) if levels[u] > levels[u - 1]]
    for rank in range(world_size):
        seen = {}
        for rec in records(folder, rank):
            if "update" in rec:
                seen[rec["update"]] = rec  # the last record of an update (a resumed run repeats some)
                assert (rec["rank"], rec["world_size"]) == (rank, world_size)
        assert sorted(seen) == list(range(1, UPDATES + 1))
        for u, rec in seen.items():
            assert rec["difficulty"] == [levels[u]] * 4, (rank, u)  # every sub-env of this rank
        assert records(folder, rank)[-1]["final"] == {"level": levels[UPDATES], "raised_at": raised}
    return levels


def test_the_docs_example_raises_the_difficulty_at_the_right_updates(tmp_path):
    (tmp_path / "rec").mkdir()
    proc = run_driver("train", str(tmp_path / "run"), str(tmp_path / "rec"), str(UPDATES))
    assert proc.returncode == 0, proc.stderr[-3000:]
    check(tmp_path / "run", tmp_path / "rec", 1)
    assert records(tmp_path / "rec", 0)[0] == {"start": 0, "difficulty": [0] * 4}


def test_under_torchrun_every_rank_raises_it_at_the_same_updates(tmp_path):
    (tmp_path / "rec").mkdir()
    proc = run_driver("train", str(tmp_path / "run"), str(tmp_path / "rec"), str(UPDATES), torchrun=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    check(tmp_path / "run", tmp_path / "rec", 2)
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["world_size"] == 2


def test_after_a_kill_and_a_resume_the_level_is_restored(tmp_path):
    (tmp_path / "rec").mkdir()
    run = tmp_path / "run"
    killed = run_driver("train", str(run), str(tmp_path / "rec"), str(UPDATES), env={"PPO_CORE_KILL_AT": "update:7"})
    assert killed.returncode == -9, killed.stderr[-2000:]
    first = expected_levels(run)  # rows 1..6; the last checkpoint is update 6's
    assert first[6] >= 1  # the resume has a level to restore
    resumed = run_driver("resume", str(run), str(tmp_path / "rec"), str(UPDATES))
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    levels = check(run, tmp_path / "rec", 1)
    starts = [r for r in records(tmp_path / "rec", 0) if "start" in r]
    assert starts == [{"start": 0, "difficulty": [0] * 4}, {"start": 6, "difficulty": [levels[6]] * 4}]


def test_context_callbacks_are_told_apart_and_old_ones_keep_working(tmp_path):
    def old(row):
        return None

    def new(row, ctx):
        return None

    class Method:
        def __call__(self, row, ctx):
            return None

    def defaulted(row, index=0):  # a callback of before contexts, with a defaulted second parameter
        return None

    assert not takes_context(old) and takes_context(new) and takes_context(Method()) and not takes_context([].append)
    assert takes_context(lambda *args: None) and not takes_context(defaulted)
    seen = []
    shell.train("cartpole", overrides={"env.num_envs": 2, "ppo.num_steps": 16, "ppo.num_minibatches": 2,
                                       "run.eval_episodes": 0, "run.loggers": []}, total_timesteps=64,
                run_dir=tmp_path / "run", progress=False,
                callbacks=[lambda row: seen.append(("row", row["update"])),
                           lambda row, ctx: seen.append((type(ctx).__name__, ctx.update, ctx.env_steps,
                                                         ctx.run_dir == tmp_path / "run", ctx.env.num_envs))])
    assert seen == [("row", 1), ("CallbackContext", 1, 32, True, 2), ("row", 2), ("CallbackContext", 2, 64, True, 2)]
    assert CallbackContext.__name__ == "CallbackContext"


def test_a_backend_without_gymnasium_sub_envs_says_so_in_one_line(tmp_path):
    def harder(row, ctx):
        ctx.env.set_attr("difficulty", 1)

    message = (r"^a callback's set_attr\('difficulty'\): env.backend = 'torch' has no gymnasium sub-envs to change; "
               r"a curriculum needs env.backend = 'gymnasium'$")
    with pytest.raises(ConfigError, match=message):
        shell.train("cartpole-torch", overrides={"run.eval_episodes": 0, "run.loggers": []}, total_timesteps=64,
                    run_dir=tmp_path / "run", progress=False, callbacks=[harder])


def test_a_resume_without_the_callback_whose_state_the_checkpoint_holds_is_refused(tmp_path):
    ex = example()
    settings = {**ex.SETTINGS, "run.eval_every": 0, "run.eval_episodes": 0}
    shell.train(env=ex.Cue, overrides=settings, total_timesteps=2 * 256, run_dir=tmp_path / "run", progress=False,
                callbacks=[ex.RaiseDifficulty()])
    with pytest.raises(ConfigError, match="holds the state of callback 0"):
        shell.resume(tmp_path / "run", total_timesteps=4 * 256, env=ex.Cue, progress=False)
