"""CartPoleNoVel-v1 with its velocities for the critic only: where an asymmetric actor-critic should help.

Importing this module registers ``CartPoleNoVelPrivileged-v1``: CartPole-v1 (500-step time limit) whose
observation is a Dict of ``"obs"``, the 4 numbers of ``CartPoleNoVel-v1`` (cart velocity and pole angular
velocity set to 0), and ``"privileged"``, the 2 velocities ``[x_dot, theta_dot]`` (float32). With
``policy.critic_keys = ["privileged"]`` the actor sees what ``CartPoleNoVel-v1`` shows and must infer the
velocities from its history, while the critic also reads them (Pinto et al. 2017, arXiv:1710.06542). The
comparison, same config and seeds, the actor's inputs identical on both sides:

    python bench/sweep.py cartpole-lstm --seeds 0-5 --jobs 1 --curve-bar 475
    python bench/sweep.py cartpole-lstm --seeds 0-5 --jobs 1 --curve-bar 475 \\
        --set 'env.id="bench.privileged_cartpole:CartPoleNoVelPrivileged-v1"' --set 'policy.critic_keys=["privileged"]'

The control, ``--set 'env.kwargs={privileged="zeros"}'`` with the second command: the same Dict, network and
config, the privileged key all zeros, so that what differs from the first command is the information alone.
(``bench/sweep.py`` runs ``main.py`` from the repository root, where ``bench.privileged_cartpole`` imports.)
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.envs.classic_control import CartPoleEnv
from gymnasium.wrappers import TransformObservation

from shell.envs.pomdp import HIDDEN

ENV_ID = "CartPoleNoVelPrivileged-v1"
VELOCITIES = list(HIDDEN["CartPoleNoVel-v1"][1])  # the indices CartPoleNoVel-v1 hides: x_dot, theta_dot


def make(privileged: str = "velocities", **kwargs: Any) -> gym.Env:
    """CartPole-v1 with ``{"obs": position-only [4], "privileged": velocities [2]}`` observations;
    ``privileged="zeros"`` keeps the key and its space but fills it with zeros (the control).

    Raises:
        ValueError: ``privileged`` is neither ``"velocities"`` nor ``"zeros"``.
    """
    if privileged not in ("velocities", "zeros"):
        raise ValueError(f"privileged={privileged!r}: choose 'velocities' or 'zeros'")
    keep = 1.0 if privileged == "velocities" else 0.0
    env = CartPoleEnv(**kwargs)
    box = env.observation_space
    space = gym.spaces.Dict({
        "obs": box,
        "privileged": gym.spaces.Box(box.low[VELOCITIES], box.high[VELOCITIES], dtype=box.dtype),
    })
    hide = np.ones(box.shape, dtype=box.dtype)
    hide[VELOCITIES] = 0

    def split(obs: np.ndarray) -> dict[str, np.ndarray]:
        return {"obs": obs * hide, "privileged": obs[VELOCITIES] * keep}

    return TransformObservation(env, split, space)


if ENV_ID not in gym.registry:
    gym.register(id=ENV_ID, entry_point=make, max_episode_steps=500)
