"""The equilibrium-seeking options of the update: ppo.magnet_coef / ppo.magnet_every (magnetic mirror descent's
magnet, Sokota et al. 2023), ppo.ent_coef_end (the entropy coefficient's schedule) and ppo.average_decay (an
average policy)."""

from __future__ import annotations

import csv

import numpy as np
import pytest
import torch

pytest.importorskip("pyspiel")

import core
from shell.api import resume, train
from shell.config import load_config
from shell.errors import ConfigError
from shell.runner import Trainer

SHORT = {"env.num_envs": 8, "ppo.num_steps": 32, "ppo.update_epochs": 2, "run.eval_episodes": 0, "run.eval_every": 0,
         "run.loggers": [], "run.exploitability": False, "ppo.magnet_coef": 0.0, "ppo.magnet_every": 0,
         "ppo.average_decay": 0.0}  # kuhn.toml's update without its magnet and average
UPDATE = 8 * 32
TIMING = {"seconds", "sps"}


def kuhn(**overrides):
    return load_config("kuhn", {**SHORT, "run.total_timesteps": 4 * UPDATE, **overrides})


def rows(run_dir) -> list[dict[str, str]]:
    with open(run_dir / "metrics.csv") as f:
        return [{k: v for k, v in row.items() if k not in TIMING} for row in csv.DictReader(f)]


MAGNET = {"ppo.magnet_coef": 0.5, "ppo.magnet_every": 2}
STEADY = {"ppo.anneal_lr": False}  # the learning rate of an update then does not depend on the total


def test_a_refreshed_magnet_is_saved_in_the_checkpoint_and_restored_by_a_resume(tmp_path):
    whole = train(config=kuhn(**MAGNET, **STEADY), run_dir=tmp_path / "whole", progress=False)
    half = train(config=kuhn(**MAGNET, **STEADY, **{"run.checkpoint_every": 1}), run_dir=tmp_path / "half",
                 total_timesteps=3 * UPDATE, progress=False)
    checkpoints = sorted((half.run_dir / "checkpoints").glob("ckpt_*.pt"))
    second, third = (torch.load(checkpoints[i], weights_only=False) for i in (-2, -1))
    # refreshed after update 2: update 3's checkpoint holds update 2's policy as its magnet
    for key, value in second["model"].items():
        assert torch.equal(third["magnet"][key], value), key
    assert any(not torch.equal(third["model"][k], v) for k, v in second["model"].items())
    # a resume restores it: the magnet is update 2's policy, not the model's weights
    trainer = Trainer(kuhn(**MAGNET, **STEADY), tmp_path / "again", progress=False)
    trainer.load_state_dict(third)
    magnet = trainer.lanes.only.ppo.magnet.state_dict()
    assert all(torch.equal(magnet[k], v) for k, v in second["model"].items())
    trainer.env.close()
    resume(half.run_dir, total_timesteps=4 * UPDATE, progress=False)
    # the games in play at the checkpoint start anew on resume, so only the rows before it repeat exactly
    assert rows(half.run_dir)[:3] == rows(whole.run_dir)[:3] and len(rows(half.run_dir)) == 4


@pytest.mark.parametrize("magnet", [{"ppo.magnet_coef": 0.5}, MAGNET])
def test_the_magnet_changes_the_update_and_repeats_with_the_seed(tmp_path, magnet):
    plain = rows(train(config=kuhn(), run_dir=tmp_path / "plain", progress=False).run_dir)
    first = rows(train(config=kuhn(**magnet), run_dir=tmp_path / "a", progress=False).run_dir)
    again = rows(train(config=kuhn(**magnet), run_dir=tmp_path / "b", progress=False).run_dir)
    assert first == again
    assert [r["policy_loss"] for r in first] != [r["policy_loss"] for r in plain]


def test_the_uniform_magnet_is_an_entropy_bonus_of_the_same_coefficient():
    # KL(pi || uniform over the legal moves) = ln n_legal - H(pi): the same gradient as -H(pi)
    logits = torch.randn(5, 3, dtype=torch.float64, requires_grad=True)
    mask = torch.tensor([[1, 1, 0], [1, 1, 1], [0, 1, 1], [1, 0, 1], [1, 1, 0]], dtype=torch.bool)
    (kl_grad,) = torch.autograd.grad(core.magnet_kl(logits, torch.zeros_like(logits), mask).sum(), logits)
    (entropy_grad,) = torch.autograd.grad(-core.masked_entropy(logits, mask).sum(), logits)
    torch.testing.assert_close(kl_grad, entropy_grad)


@pytest.mark.parametrize("config, overrides, words", [
    ("pendulum", {"ppo.magnet_coef": 0.1}, "needs Discrete or MultiDiscrete actions"),
    ("kuhn", {"ppo.magnet_coef": 0.1, "policy.recurrent": "gru", "run.exploitability": False}, "recurrent policy"),
    ("kuhn", {"ppo.magnet_coef": 0.0, "ppo.magnet_every": 3}, "set magnet_coef > 0"),
])
def test_a_magnet_the_update_cannot_serve_is_refused_in_one_line(tmp_path, config, overrides, words):
    with pytest.raises(ConfigError) as err:
        train(config=load_config(config, {"run.total_timesteps": 64, "env.num_envs": 2, "ppo.num_steps": 32,
                                          "ppo.num_minibatches": 1, **overrides}),
              run_dir=tmp_path / "run", progress=False)
    assert words in str(err.value) and "\n" not in str(err.value)


def test_the_entropy_coefficient_follows_its_schedule(tmp_path):
    config = kuhn(**{"ppo.ent_coef": 0.2, "ppo.ent_coef_end": 0.05})
    trainer = Trainer(config, tmp_path / "run", progress=False)
    seen = []
    original = trainer.lanes.update

    def update(poll=None):
        seen.append(trainer.lanes.only.ppo.ent_coef)
        return original(poll)

    trainer.lanes.update = update
    trainer.train()
    assert seen == [core.linear_schedule(0.2, 0.05, u, 4) for u in range(4)]
    assert seen[0] == 0.2 and seen[-1] == pytest.approx(0.0875)
    same = rows(train(config=kuhn(**{"ppo.ent_coef": 0.2, "ppo.ent_coef_end": 0.2}), run_dir=tmp_path / "same",
                      progress=False).run_dir)
    fixed = rows(train(config=kuhn(**{"ppo.ent_coef": 0.2}), run_dir=tmp_path / "fixed", progress=False).run_dir)
    assert same == fixed  # a schedule from a value to itself is that value, bit for bit


AVERAGE = {"ppo.average_decay": 0.5}


def test_the_average_policy_is_the_moving_average_of_the_weights_saved_restored_and_loaded(tmp_path):
    from shell.evaluation import eval_checkpoint
    from shell.games.exploitability import exact_exploitability
    from shell.inference import load_agent, load_policy

    run = train(config=kuhn(**AVERAGE, **{"run.checkpoint_every": 1, "run.keep_checkpoints": 10,
                                          "run.exploitability": True}),
                run_dir=tmp_path / "run", progress=False)
    checkpoints = sorted((run.run_dir / "checkpoints").glob("ckpt_*.pt"))
    states = [torch.load(c, weights_only=False) for c in checkpoints]
    assert [s["average_count"] for s in states] == [{"player": n} for n in (1, 2, 3, 4)]
    for key, first in states[0]["model"].items():  # the first update copies; then 0.5 * its own + 0.5 * the policy's
        assert torch.equal(states[0]["average"][key], first), key
        if first.is_floating_point() and key.endswith(("weight", "bias")):
            expected = 0.5 * states[0]["average"][key] + 0.5 * states[1]["model"][key]
            torch.testing.assert_close(states[1]["average"][key], expected, rtol=0, atol=1e-7)
    average = load_agent(run.run_dir, average=True)[0].state_dict()
    assert all(torch.equal(average[k], v) for k, v in states[-1]["average"].items())
    policy, mean_policy = load_policy(run.run_dir, average=False), load_policy(run.run_dir, average=True)
    deployed = load_agent(run.run_dir)[0].state_dict()  # a run with an average is deployed as it
    assert all(torch.equal(deployed[k], v) for k, v in states[-1]["average"].items())
    obs = np.zeros((1, 11), np.float32)
    obs[0, 0] = obs[0, 2] = 1.0  # player_0 holding the jack, nothing bet yet
    legal = {"player_0": np.ones((1, 2), bool)}
    assert not np.allclose(policy.probs({"player_0": obs}, action_mask=legal)["player_0"],
                           mean_policy.probs({"player_0": obs}, action_mask=legal)["player_0"])
    np.testing.assert_array_equal(run.policy.probs({"player_0": obs}, action_mask=legal)["player_0"],  # train's
                                  mean_policy.probs({"player_0": obs}, action_mask=legal)["player_0"])
    assert run.policy.masked and mean_policy.masked
    # a resume goes on from the saved average and its count
    trainer = Trainer(kuhn(**AVERAGE), tmp_path / "again", progress=False)
    trainer.load_state_dict(states[1])
    assert int(trainer.lanes.only.average.n_averaged) == 2
    restored = trainer.lanes.average.state_dict()
    assert all(torch.equal(restored[k], v) for k, v in states[1]["average"].items())
    trainer.env.close()
    # evaluations measure both figures
    result = eval_checkpoint(run.run_dir, episodes=2)
    assert result["average_exploitability"] == pytest.approx(
        exact_exploitability(load_policy(run.run_dir, average=True), "kuhn_poker").exploitability, abs=1e-6)
    assert result["exploitability"] == pytest.approx(
        exact_exploitability(load_policy(run.run_dir, average=False), "kuhn_poker").exploitability, abs=1e-6)
    # the run dir's figure is its deployed policy's: the average, as load_policy(run) returns it
    assert exact_exploitability(run.run_dir).exploitability == pytest.approx(result["average_exploitability"],
                                                                             abs=1e-6)


def test_the_average_starts_after_average_start_of_the_updates(tmp_path):
    """ppo.average_start = 0.5 of 4 updates: after updates 1 and 2 the average is the policy itself (count 1: the
    copy), after 3 and 4 the moving average from update 2's policy on; a resume keeps the count."""
    run = train(config=kuhn(**AVERAGE, **{"ppo.average_start": 0.5, "run.checkpoint_every": 1,
                                          "run.keep_checkpoints": 10}),
                run_dir=tmp_path / "run", progress=False)
    states = [torch.load(c, weights_only=False) for c in sorted((run.run_dir / "checkpoints").glob("ckpt_*.pt"))]
    assert [s["average_count"] for s in states] == [{"player": n} for n in (1, 1, 2, 3)]
    floats = [k for k, v in states[0]["model"].items() if v.is_floating_point() and k.endswith(("weight", "bias"))]
    for key in floats:
        assert torch.equal(states[0]["average"][key], states[0]["model"][key])
        assert torch.equal(states[1]["average"][key], states[1]["model"][key]), key  # not started: the policy
        expected = 0.5 * states[1]["average"][key] + 0.5 * states[2]["model"][key]
        torch.testing.assert_close(states[2]["average"][key], expected, rtol=0, atol=1e-7)
    assert not torch.equal(states[3]["average"][floats[0]], states[3]["model"][floats[0]])
    with pytest.raises(ConfigError, match="average_start"):
        load_config("kuhn", {"ppo.average_start": 1.0})


def test_an_average_decay_of_one_is_the_equal_weight_mean_of_the_policies_since_average_start(tmp_path):
    """ppo.average_decay = 1: after update k of 4 (average_start 0.5: from update 2's policy on) the average is the
    plain mean of the policies of updates 2..k, each weighing the same."""
    run = train(config=kuhn(**{"ppo.average_decay": 1.0, "ppo.average_start": 0.5, "run.checkpoint_every": 1,
                               "run.keep_checkpoints": 10}), run_dir=tmp_path / "run", progress=False)
    states = [torch.load(c, weights_only=False) for c in sorted((run.run_dir / "checkpoints").glob("ckpt_*.pt"))]
    assert [s["average_count"] for s in states] == [{"player": n} for n in (1, 1, 2, 3)]
    for key, value in states[0]["model"].items():
        if value.is_floating_point() and key.endswith(("weight", "bias")):
            for k in (2, 3):
                mean = torch.stack([s["model"][key] for s in states[1:k + 1]]).mean(0)
                torch.testing.assert_close(states[k]["average"][key], mean, rtol=0, atol=1e-6)


def test_a_run_without_an_average_has_none_to_load(tmp_path):
    from shell.inference import load_policy

    run = train(config=kuhn(**{"run.total_timesteps": UPDATE}), run_dir=tmp_path / "run", progress=False)
    with pytest.raises(ConfigError, match=r"trained without ppo\.average_decay") as err:
        load_policy(run.run_dir, average=True)
    assert "\n" not in str(err.value)
    with pytest.raises(ConfigError, match="average_decay"):
        load_config("kuhn", {"ppo.average_decay": 1.5})
    assert load_policy(run.run_dir).probs is not None  # the deployed policy of a run without one: the policy
