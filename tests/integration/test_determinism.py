"""The same seed twice on CPU gives identical results."""

import csv

import torch

from shell.api import train
from shell.config import config_from_dict

SMALL = {"env": {"num_envs": 4}, "ppo": {"num_steps": 50, "num_minibatches": 4, "update_epochs": 2},
         "run": {"total_timesteps": 600, "eval_episodes": 2, "device": "cpu", "seed": 11}}


def _rows(run_dir):
    rows = list(csv.DictReader(open(run_dir / "metrics.csv")))
    for r in rows:
        r.pop("seconds"), r.pop("sps")
    return rows


def test_same_seed_same_results(tmp_path):
    a = train(config_from_dict(SMALL), run_dir=tmp_path / "a").summary
    b = train(config_from_dict(SMALL), run_dir=tmp_path / "b").summary
    assert a["eval_return_mean"] == b["eval_return_mean"]
    assert _rows(tmp_path / "a") == _rows(tmp_path / "b")
    sa = torch.load(a["checkpoint"], weights_only=True)["model"]
    sb = torch.load(b["checkpoint"], weights_only=True)["model"]
    assert all(torch.equal(sa[k], sb[k]) for k in sa)
    other = train(config_from_dict({**SMALL, "run": {**SMALL["run"], "seed": 12}}), run_dir=tmp_path / "c").summary
    sc = torch.load(other["checkpoint"], weights_only=True)["model"]
    assert not all(torch.equal(sa[k], sc[k]) for k in sa)
