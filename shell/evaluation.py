"""Deterministic evaluation of a policy on fresh envs."""

from __future__ import annotations

import numpy as np
import torch

from shell.config import EnvConfig
from shell.envs import make_env

EVAL_SEED_OFFSET = 1_000_000


def evaluate(agent: torch.nn.Module, env_cfg: EnvConfig, episodes: int, seed: int,
             device: torch.device) -> list[float]:
    """Run ``episodes`` episodes with the deterministic policy (u = mean, or argmax).

    One sub-env per episode, seeded ``seed + EVAL_SEED_OFFSET + i`` so the
    evaluation never reuses a training seed; each sub-env's first episode counts.

    Returns:
        The raw episodic returns, in sub-env order.
    """
    if episodes <= 0:
        return []
    env = make_env(env_cfg, device, num_envs=episodes)
    returns: list[float | None] = [None] * episodes
    try:
        obs = env.reset(seed=seed + EVAL_SEED_OFFSET)
        ep_return = np.zeros(episodes)
        with torch.inference_mode():
            while any(r is None for r in returns):
                action = agent.get_action(obs, deterministic=True).action
                step = env.step(action)
                ep_return += step.reward.cpu().numpy()
                done = (step.terminated | step.truncated).cpu().numpy()
                for i in np.flatnonzero(done):
                    if returns[i] is None:
                        returns[i] = float(ep_return[i])
                ep_return[done] = 0.0
                obs = step.obs
    finally:
        env.close()
    return returns
