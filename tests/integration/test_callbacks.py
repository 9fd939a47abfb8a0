"""Callbacks of ``train()``: called with each update's metrics row; True ends the run after that update
(final checkpoint and evaluation as usual); an exception from one propagates out of ``train()``."""

import csv
from pathlib import Path

import pytest

from shell.api import train
from shell.checkpoint import latest_checkpoint, load_checkpoint
from shell.config import config_from_dict
from shell.logs import CSV_FIELDS


def small_config(**run):
    return config_from_dict({"env": {"id": "CartPole-v1", "num_envs": 2},
                             "ppo": {"num_steps": 16, "num_minibatches": 2, "update_epochs": 1},
                             "run": {"total_timesteps": 6 * 32, "eval_episodes": 2, "device": "cpu", **run}})


def metrics(run: Path) -> list[dict[str, str]]:
    with open(run / "metrics.csv", newline="") as f:
        return list(csv.DictReader(f))


def test_callbacks_see_every_row_and_true_stops_after_that_update(tmp_path):
    seen: list[dict] = []
    other: list[int] = []

    def stop_at_four(row):
        seen.append(dict(row))
        return row["update"] == 4

    summary = train(small_config(eval_every=2), run_dir=tmp_path / "run", progress=False,
                    callbacks=[stop_at_four, lambda row: other.append(row["update"])]).summary
    assert [r["update"] for r in seen] == [1, 2, 3, 4] and other == [1, 2, 3, 4]  # every callback, every row
    assert set(seen[0]) == set(CSV_FIELDS)
    assert [r["eval_return"] == "" for r in seen] == [True, False, True, False]  # evaluations after 2 and 4
    assert [int(r["update"]) for r in metrics(tmp_path / "run")] == [1, 2, 3, 4]
    assert summary["stopped_early"] is True and summary["interrupted"] is False
    assert summary["updates"] == 4 and summary["env_steps"] == 4 * 32 and summary["eval_episodes"] == 2
    assert load_checkpoint(latest_checkpoint(tmp_path / "run" / "checkpoints"))["update"] == 4


def test_a_run_that_no_callback_stops_is_not_stopped_early(tmp_path):
    summary = train(small_config(), run_dir=tmp_path / "run", progress=False, callbacks=[lambda row: None]).summary
    assert summary["stopped_early"] is False and summary["updates"] == 6


def test_an_exception_from_a_callback_propagates_with_the_row_written(tmp_path):
    class Stop(Exception):
        pass

    def fail_at_three(row):
        if row["update"] == 3:
            raise Stop

    with pytest.raises(Stop):
        train(small_config(), run_dir=tmp_path / "run", progress=False, callbacks=[fail_at_three])
    assert [int(r["update"]) for r in metrics(tmp_path / "run")] == [1, 2, 3]
    assert not (tmp_path / "run" / "summary.json").exists()
