"""sb3-contrib's invalid-action test envs under gymnasium ids, for ``configs/invalid-action.toml``.

Importing this module registers (the ``"module:EnvId"`` form of ``env.id`` imports it):

- ``InvalidActionEnvDiscrete-v0``: ``sb3_contrib.common.envs.InvalidActionEnvDiscrete(dim=80,
  n_invalid_actions=60)``, the env of MaskablePPO's documented example: the observation is a state in
  Discrete(80), the reward 1 for the action equal to it, 100 steps per episode (a time limit, so
  truncated), and 60 of the 79 other actions are illegal in each state, given by ``action_masks()``;
- ``InvalidActionEnvMultiDiscrete-v0``: ``InvalidActionEnvMultiDiscrete(dims=[3, 3], n_invalid_actions=2)``.

Both need sb3-contrib (the ``bench`` extra). Their states and invalid actions come from unseeded
generators, so runs on them are not reproducible (on either side of a comparison).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym

from shell.errors import ConfigError
from shell.installation import install_hint


def _contrib_env(name: str, **kwargs: Any) -> gym.Env:
    try:
        from sb3_contrib.common import envs
    except ImportError:
        raise ConfigError(f"{name} needs sb3-contrib; run: {install_hint('bench')}") from None
    return getattr(envs, name)(**kwargs)


def make_discrete(**kwargs: Any) -> gym.Env:
    """``InvalidActionEnvDiscrete(dim=80, n_invalid_actions=60)`` (keywords override)."""
    return _contrib_env("InvalidActionEnvDiscrete", **{"dim": 80, "n_invalid_actions": 60, **kwargs})


def make_multi_discrete(**kwargs: Any) -> gym.Env:
    """``InvalidActionEnvMultiDiscrete(dims=[3, 3], n_invalid_actions=2)`` (keywords override)."""
    return _contrib_env("InvalidActionEnvMultiDiscrete", **{"dims": [3, 3], "n_invalid_actions": 2, **kwargs})


for _id, _entry in (("InvalidActionEnvDiscrete-v0", make_discrete),
                    ("InvalidActionEnvMultiDiscrete-v0", make_multi_discrete)):
    if _id not in gym.registry:
        gym.register(_id, entry_point=_entry, disable_env_checker=True)
