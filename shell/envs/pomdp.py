"""Partially observed versions of classic-control tasks, registered with gymnasium on ``import shell``.

As the RL Zoo's ``CartPoleNoVel-v1`` and ``PendulumNoVel-v1`` (sb3-contrib's recurrent benchmarks):
the velocity entries of the observation are set to 0, the observation space is unchanged, so a
policy must infer velocities from the history of positions.

- ``CartPoleNoVel-v1``: CartPole-v1 with indices 1 (cart velocity) and 3 (pole angular velocity) zeroed;
  500-step time limit.
- ``PendulumNoVel-v1``: Pendulum-v1 with index 2 (angular velocity) zeroed; 200-step time limit.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.envs.classic_control import CartPoleEnv, PendulumEnv
from gymnasium.wrappers import TransformObservation

HIDDEN = {"CartPoleNoVel-v1": (CartPoleEnv, (1, 3), 500), "PendulumNoVel-v1": (PendulumEnv, (2,), 200)}


def _make(env_id: str, **kwargs: Any) -> gym.Env:
    env_class, hidden, _ = HIDDEN[env_id]
    env = env_class(**kwargs)
    mask = np.ones(env.observation_space.shape, dtype=env.observation_space.dtype)
    mask[list(hidden)] = 0

    def hide(obs: np.ndarray) -> np.ndarray:
        return obs * mask

    return TransformObservation(env, hide, env.observation_space)


def make_cartpole_novel(**kwargs: Any) -> gym.Env:
    """CartPole-v1 without velocities (before the registered 500-step TimeLimit)."""
    return _make("CartPoleNoVel-v1", **kwargs)


def make_pendulum_novel(**kwargs: Any) -> gym.Env:
    """Pendulum-v1 without its angular velocity (before the registered 200-step TimeLimit)."""
    return _make("PendulumNoVel-v1", **kwargs)


def register() -> None:
    """Register the ids with gymnasium (idempotent)."""
    for env_id, entry_point in (("CartPoleNoVel-v1", make_cartpole_novel), ("PendulumNoVel-v1", make_pendulum_novel)):
        if env_id not in gym.registry:
            gym.register(id=env_id, entry_point=entry_point, max_episode_steps=HIDDEN[env_id][2])
