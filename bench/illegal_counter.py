"""A gymnasium wrapper that counts the actions an env receives against its own action mask.

Used by bench/masks_vs_sb3.py as ``env.wrappers = [{class = "illegal_counter:CountIllegalActions"}]`` (with
``bench/`` on PYTHONPATH). The mask is the env's own: ``info["action_mask"]`` of the last reset or step, or
``action_masks()`` where the env has it. On close each sub-env appends one line ``steps illegal`` to the file
named by the environment variable ``ILLEGAL_ACTIONS_FILE``.
"""

from __future__ import annotations

import os

import gymnasium as gym
import numpy as np


class CountIllegalActions(gym.Wrapper):
    def __init__(self, env: gym.Env):
        super().__init__(env)
        self.steps = 0
        self.illegal = 0
        self._mask: np.ndarray | None = None

    def _current(self, info: dict) -> np.ndarray | None:
        if "action_mask" in info:
            return np.asarray(info["action_mask"]).astype(bool)
        if self.env.has_wrapper_attr("action_masks"):
            return np.asarray(self.env.get_wrapper_attr("action_masks")()).astype(bool)
        return None

    def reset(self, **kwargs):
        obs, info = self.env.reset(**kwargs)
        self._mask = self._current(info)
        return obs, info

    def step(self, action):
        self.steps += 1
        if self._mask is not None and not self._mask[int(action)]:
            self.illegal += 1
        obs, reward, terminated, truncated, info = self.env.step(action)
        self._mask = self._current(info)
        return obs, reward, terminated, truncated, info

    def close(self):
        path = os.environ.get("ILLEGAL_ACTIONS_FILE")
        if path and self.steps:
            with open(path, "a") as f:
                f.write(f"{self.steps} {self.illegal}\n")
        super().close()
