"""Preallocated rollout storage on the device, time-major ``[T, N, ...]``."""

from __future__ import annotations

from collections.abc import Iterator

import torch

import core
from shell.observations import Obs, ObsLayout, map_obs


class RolloutStorage:
    """One rollout of T steps from N envs, and the flattened minibatches built from it.

    Stores what one step produces (PureJaxRL's ``Transition``): ``obs`` as the
    policy saw it, the raw (pre-tanh) action, its ``log_prob``, ``values``,
    ``rewards`` (with any truncation bootstrap already folded in) and ``dones``.
    """

    def __init__(self, num_steps: int, num_envs: int, layout: ObsLayout | int, action_shape: tuple[int, ...],
                 action_dtype: torch.dtype, device: torch.device):
        T, N = num_steps, num_envs
        self.num_steps, self.num_envs = T, N
        if isinstance(layout, int):  # a flat observation of that size
            self.obs: Obs = torch.zeros((T, N, layout), device=device)
        else:  # each part in its own dtype: uint8 images stay uint8, [T, N, C, H, W] or [T, N, H, W, C]
            parts = {key: torch.zeros((T, N, *p.shape), dtype=p.dtype, device=device)
                     for key, p in layout.parts.items()}
            self.obs = parts[None] if None in parts else parts
        self.raw_actions = torch.zeros((T, N, *action_shape), dtype=action_dtype, device=device)
        self.log_probs = torch.zeros((T, N), device=device)
        self.values = torch.zeros((T, N), device=device)
        self.rewards = torch.zeros((T, N), device=device)
        self.dones = torch.zeros((T, N), dtype=torch.bool, device=device)
        self.advantages = torch.zeros((T, N), device=device)
        self.returns = torch.zeros((T, N), device=device)
        self.step = 0

    def add(self, obs: Obs, raw_action: torch.Tensor, reward: torch.Tensor, done: torch.Tensor) -> None:
        """Write step ``self.step``; raises RuntimeError when the storage is full.

        ``log_probs`` and ``values`` are filled for the whole rollout at once afterwards.
        """
        t = self.step
        if t >= self.num_steps:
            raise RuntimeError(f"RolloutStorage overflow: all {self.num_steps} steps are written; call reset()")
        if isinstance(obs, dict):
            for key, value in obs.items():
                self.obs[key][t] = value
        else:
            self.obs[t] = obs
        self.raw_actions[t] = raw_action
        self.rewards[t] = reward
        self.dones[t] = done
        self.step = t + 1

    def reset(self) -> None:
        self.step = 0

    def set_log_probs_and_values(self, log_probs: torch.Tensor, values: torch.Tensor) -> None:
        """Store the rollout's ``[T*N]`` log-probs and values (computed in one batched pass)."""
        self.log_probs.copy_(log_probs.view_as(self.log_probs))
        self.values.copy_(values.view_as(self.values))

    def compute_advantages(self, last_value: torch.Tensor, gamma: float, gae_lambda: float) -> None:
        """Fill ``advantages`` with core.gae and ``returns = advantages + values``."""
        if self.step != self.num_steps:
            raise RuntimeError(f"compute_advantages on a partial rollout ({self.step}/{self.num_steps} steps)")
        self.advantages.copy_(core.gae(self.rewards, self.values, self.dones, last_value, gamma, gae_lambda))
        torch.add(self.advantages, self.values, out=self.returns)

    def minibatches(self, num_minibatches: int, generator: torch.Generator | None = None) -> Iterator[dict]:
        """Shuffle the flattened ``[T*N]`` batch with ``torch.randperm`` on the device and yield minibatches.

        Each minibatch is a dict of ``mb_`` tensors: ``obs [B, ...]`` (a dict for Dict
        observations), ``raw_actions [B, ...]``, ``log_probs``, ``values``, ``advantages``, ``returns`` (all ``[B]``).
        """
        b = {
            "obs": map_obs(lambda x: x.flatten(0, 1), self.obs),
            "raw_actions": self.raw_actions.flatten(0, 1),
            "log_probs": self.log_probs.flatten(),
            "values": self.values.flatten(),
            "advantages": self.advantages.flatten(),
            "returns": self.returns.flatten(),
        }
        batch_size = self.num_steps * self.num_envs
        size = batch_size // num_minibatches
        perm = torch.randperm(batch_size, device=self.values.device, generator=generator)
        for start in range(0, size * num_minibatches, size):
            mb_inds = perm[start:start + size]
            yield {k: map_obs(lambda x, i=mb_inds: x[i], v) for k, v in b.items()}
