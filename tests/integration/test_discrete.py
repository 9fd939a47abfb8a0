"""Discrete and MultiDiscrete policies, one-hot observations, unsupported spaces."""

import json

import gymnasium as gym
import numpy as np
import pytest
import torch

import core
from shell.config import PolicyConfig, config_from_dict
from shell.envs import check_action_space
from shell.errors import ConfigError
from shell.observations import obs_layout
from shell.policies import ActorCritic, default_ent_coef
from shell.runner import Trainer


def test_discrete_shapes_and_log_prob_from_logits():
    agent = ActorCritic(4, gym.spaces.Discrete(3), PolicyConfig())
    obs = torch.randn(6, 4)
    out = agent.get_action(obs)
    assert out.action.shape == out.raw_action.shape == out.log_prob.shape == out.value.shape == (6,)
    assert out.action.dtype == torch.long
    logits = agent.actor.net(obs)
    expected = torch.log_softmax(logits, -1).gather(1, out.raw_action[:, None]).squeeze(1)
    assert torch.allclose(out.log_prob, expected, atol=1e-6)
    log_prob, entropy, value = agent.evaluate(obs, out.raw_action)
    assert log_prob.shape == entropy.shape == value.shape == (6,)
    p = torch.softmax(logits, -1)
    assert torch.allclose(entropy, -(p * p.log()).sum(-1), atol=1e-6)


@pytest.mark.parametrize("n", [1, 4])
def test_actions_of_shape_n1_never_broadcast_to_nn(n):
    agent = ActorCritic(4, gym.spaces.Discrete(3), PolicyConfig())
    obs = torch.randn(n, 4)
    raw = agent.get_action(obs).raw_action
    with pytest.raises(ValueError, match=r"\[B, B\]"):
        agent.evaluate(obs, raw[:, None])
    assert agent.evaluate(obs, raw)[0].shape == (n,)


def test_envs_never_mix_logits():
    agent = ActorCritic(4, gym.spaces.Discrete(3), PolicyConfig())
    obs = torch.randn(5, 4)
    raw = agent.get_action(obs).raw_action
    batched = agent.evaluate(obs, raw)[0]
    single = torch.cat([agent.evaluate(obs[i:i + 1], raw[i:i + 1])[0] for i in range(5)])
    assert torch.allclose(batched, single, atol=1e-6)


def test_multidiscrete_with_start_offset():
    space = gym.spaces.MultiDiscrete([3, 2, 4], start=[-1, 5, 10])
    agent = ActorCritic(4, space, PolicyConfig())
    obs = torch.randn(200, 4)
    out = agent.get_action(obs)
    assert out.action.shape == out.raw_action.shape == (200, 3)
    assert torch.equal(out.action - out.raw_action, torch.tensor([-1, 5, 10]).expand(200, 3))
    assert all(space.contains(a) for a in out.action.numpy())
    logits = agent.actor.net(obs).split([3, 2, 4], dim=-1)
    expected = sum(torch.log_softmax(lg, -1).gather(1, out.raw_action[:, k:k + 1]).squeeze(1)
                   for k, lg in enumerate(logits))
    assert torch.allclose(out.log_prob, expected, atol=1e-5)
    log_prob, entropy, _ = agent.evaluate(obs, out.raw_action)
    assert torch.allclose(log_prob, expected, atol=1e-5)
    assert torch.all(entropy <= np.log(3) + np.log(2) + np.log(4) + 1e-5)


def test_default_entropy_coefficients():
    assert default_ent_coef(gym.spaces.Discrete(4)) == pytest.approx(0.01 / np.log(4))
    assert default_ent_coef(gym.spaces.MultiDiscrete([3, 5])) == pytest.approx(0.01 / (np.log(3) + np.log(5)))
    assert default_ent_coef(gym.spaces.Box(-1, 1, (2,))) == 0.0
    assert core.normalized_entropy_coef(4) == default_ent_coef(gym.spaces.Discrete(4))


def test_explicit_ent_coef_wins(tmp_path):
    cfg = config_from_dict({"env": {"id": "CartPole-v1", "num_envs": 2}, "ppo": {"ent_coef": 0.123}})
    trainer = Trainer(cfg, tmp_path / "a")
    assert trainer.lanes.only.ent_coef == 0.123
    trainer.env.close()
    cfg = config_from_dict({"env": {"id": "CartPole-v1", "num_envs": 2}})
    trainer = Trainer(cfg, tmp_path / "b")
    assert trainer.lanes.only.ent_coef == pytest.approx(0.01 / np.log(2))
    trainer.env.close()


def test_observation_spaces():
    assert obs_layout(gym.spaces.Box(-1, 1, (2, 3, 4))).flat_size == 24  # too small for an image: flattened
    assert obs_layout(gym.spaces.Discrete(16)).parts[None].shape == (16,)
    # a Dict of Box and Discrete parts was refused in the first round; it is accepted now
    assert obs_layout(gym.spaces.Dict({"a": gym.spaces.Discrete(2)})).is_dict
    with pytest.raises(ConfigError, match="Tuple"):
        obs_layout(gym.spaces.Tuple((gym.spaces.Discrete(2),)))
    with pytest.raises(ConfigError, match="finite"):
        check_action_space(gym.spaces.Box(-np.inf, np.inf, (2,)))
    check_action_space(gym.spaces.MultiBinary(3))  # served since the masks round: independent Bernoulli bits
    check_action_space(gym.spaces.Tuple((gym.spaces.Discrete(2),)))  # composites: served since the fifth round
    with pytest.raises(ConfigError, match="MultiBinary"):  # the message lists it among the served spaces
        check_action_space(gym.spaces.Text(4))


def test_discrete_observation_env_is_one_hot(tmp_path):
    cfg = config_from_dict({"env": {"id": "FrozenLake-v1", "num_envs": 3},
                            "ppo": {"num_steps": 16, "num_minibatches": 2, "update_epochs": 1},
                            "run": {"total_timesteps": 96, "eval_episodes": 2}})
    trainer = Trainer(cfg, tmp_path)
    obs = trainer.env.reset(seed=0)[None].obs
    assert obs.shape == (3, 16) and obs.dtype == torch.float32
    assert torch.equal(obs.sum(1), torch.ones(3)) and torch.all(obs[:, 0] == 1)  # every start is state 0
    summary = trainer.train()
    assert summary["env_steps"] == 96 and summary["eval_episodes"] == 2


def test_short_cartpole_run_through_main(main, tmp_path):
    proc = main("--config", "cartpole.toml", "--total-timesteps", "2048", "--run-dir", str(tmp_path / "r"),
                "--set", "run.eval_episodes=2")
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert summary["env_id"] == "CartPole-v1" and summary["env_steps"] == 2048
    assert 8 <= summary["eval_return_mean"] <= 500
