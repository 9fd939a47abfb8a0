"""Batched shapes of the policy: nothing broadcasts into [N, N]."""

import gymnasium as gym
import numpy as np
import pytest
import torch

import core
from shell.config import PolicyConfig
from shell.policies import ActorCritic

BOX = gym.spaces.Box(np.array([-2.0, 0.0], np.float32), np.array([2.0, 1.0], np.float32))


@pytest.mark.parametrize("std", ["parameter", "state"])
@pytest.mark.parametrize("n", [1, 5])
def test_get_action_shapes_and_bounds(std, n):
    agent = ActorCritic(3, BOX, PolicyConfig(std=std, init_log_std=1.0))
    obs = torch.randn(n, 3)
    out = agent.get_action(obs)
    assert out.action.shape == (n, 2) and out.raw_action.shape == (n, 2)
    assert out.log_prob.shape == (n,) and out.value.shape == (n,)
    assert torch.all(out.action[:, 0].abs() <= 2.0) and torch.all((out.action[:, 1] >= 0) & (out.action[:, 1] <= 1))
    assert torch.allclose(out.action, core.squash(out.raw_action, agent.actor.action_scale, agent.actor.action_bias))
    log_prob, entropy, value = agent.evaluate(obs, out.raw_action)
    assert log_prob.shape == entropy.shape == value.shape == (n,)
    assert torch.allclose(log_prob, out.log_prob, atol=1e-5)
    assert torch.equal(value, out.value)


def test_action_scale_is_a_non_persistent_buffer():
    agent = ActorCritic(3, BOX, PolicyConfig())
    assert torch.equal(agent.actor.action_scale, torch.tensor([2.0, 0.5]))
    assert torch.equal(agent.actor.action_bias, torch.tensor([0.0, 0.5]))
    assert "actor.action_scale" not in agent.state_dict()


def test_deterministic_action_is_squashed_mean():
    agent = ActorCritic(3, BOX, PolicyConfig())
    obs = torch.randn(4, 3)
    a1 = agent.get_action(obs, deterministic=True).action
    a2 = agent.get_action(obs, deterministic=True).action
    assert torch.equal(a1, a2)


def test_log_std_is_clamped_so_std_never_underflows():
    agent = ActorCritic(3, BOX, PolicyConfig())
    with torch.no_grad():
        agent.actor.log_std.fill_(-1e4)
    _, std = agent.actor.distribution(torch.randn(2, 3))
    assert torch.all(std > 0)
    out = agent.get_action(torch.randn(2, 3))
    assert torch.isfinite(out.log_prob).all()
