"""The ale backend: ale-py's C++ ``AtariVectorEnv`` running the standard Atari chain in threads.

Its runs are evaluated on gymnasium's env of the same id with the chain of
:func:`shell.envs.gymnasium.atari_wrappers` (the same spaces and scores; see bench/BENCHMARKS.md).
"""

from __future__ import annotations

from typing import Any

import attrs
import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector import AutoresetMode

from shell.config import EnvConfig, PolicyConfig
from shell.envs.base import backend_error, refuse_shares, refuse_wrappers
from shell.envs.gymnasium import GymVecEnv, import_env_package
from shell.errors import ConfigError, first_line
from shell.workers import usable_cpus


def check_config(cfg: EnvConfig) -> None:
    """Raises ConfigError for what the C++ chain cannot serve: ``env.wrappers``, ``env.atari = false``
    (this backend is the Atari chain), ``env.max_episode_steps`` (its frame limit is
    ``env.kwargs.max_num_frames_per_episode``)."""
    refuse_wrappers(cfg)
    refuse_shares(cfg)
    if not cfg.atari:
        raise ConfigError("env.backend = 'ale' runs the Atari chain and needs env.atari = true")
    if cfg.max_episode_steps is not None:
        raise ConfigError("env.max_episode_steps does not apply to env.backend = 'ale'; set "
                          "env.kwargs.max_num_frames_per_episode (emulator frames) instead")


def eval_config(cfg: EnvConfig) -> EnvConfig:
    """Evaluated on gymnasium's env of the same id (with the gymnasium Atari chain)."""
    return attrs.evolve(cfg, backend="gymnasium")


def make(cfg: EnvConfig, num_envs: int, device: torch.device, render_mode: str | None = None,
         wrappers: list | None = None, policy: PolicyConfig | None = None) -> GymVecEnv:
    """The vector env of :func:`make_vector_env` behind :class:`GymVecEnv` (which handles a lost life)."""
    return GymVecEnv(GymnasiumFinalObs(make_vector_env(cfg, num_envs)), cfg, device, name=cfg.id, sub_envs=False)


class GymnasiumFinalObs(gym.vector.VectorWrapper):
    """ale-py's ``AtariVectorEnv`` gives ``info["final_obs"]`` as one batched array; gymnasium's vector
    envs give a numpy object array holding the rows whose episode ended, flagged by
    ``info["_final_obs"] [N]`` bool. This wrapper converts the first into the second, so that
    :class:`GymVecEnv` reads one format."""

    def reset(self, *, seed: Any = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        """A list of seeds (one per sub-env, shell/seeding.py) as the array ale-py takes."""
        return self.env.reset(seed=np.asarray(seed, dtype=np.int64) if isinstance(seed, list) else seed,
                              options=options)

    def step(self, actions: Any) -> tuple[Any, Any, Any, Any, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(actions)
        if "final_obs" in info and "_final_obs" not in info:
            ended = np.logical_or(terminated, truncated)
            final = np.empty(len(ended), dtype=object)
            for i in np.flatnonzero(ended):
                final[i] = info["final_obs"][i]
            info = {**info, "final_obs": final, "_final_obs": ended}
        return obs, reward, terminated, truncated, info


# env.kwargs that ale-py's AtariVectorEnv takes as gymnasium's AtariEnv does (the rest have no counterpart there).
ALE_VECTOR_KWARGS = ("repeat_action_probability", "full_action_space", "max_num_frames_per_episode")


def ale_vector_options(cfg: EnvConfig) -> tuple[str, dict[str, Any]]:
    """The game and the ``AtariVectorEnv`` options of ``cfg.id``: its registered
    ``repeat_action_probability``, ``full_action_space`` and ``max_num_frames_per_episode``, each
    overridden by ``env.kwargs``.

    Raises:
        ConfigError: ``cfg.id`` is not an ALE id, or ``env.kwargs`` has a key the vector env does
            not take (``frameskip`` may only be 1, the gymnasium chain's own setting).
    """
    import_env_package(cfg.id)
    try:
        spec = gym.spec(cfg.id)
    except gym.error.Error as exc:
        raise ConfigError(f"cannot make env {cfg.id!r}: {first_line(exc)}") from None
    if "game" not in spec.kwargs:
        raise ConfigError(f"env.backend = 'ale' needs an ALE id such as 'ALE/Pong-v5', not {cfg.id!r}")
    unknown = sorted(set(cfg.kwargs) - set(ALE_VECTOR_KWARGS) - {"frameskip"})
    if unknown or cfg.kwargs.get("frameskip", 1) != 1:
        what = f"env.kwargs key {unknown[0]!r}" if unknown else f"env.kwargs.frameskip = {cfg.kwargs['frameskip']!r}"
        raise ConfigError(f"{what} is not supported by env.backend = 'ale' (it takes frameskip = 1 and "
                          f"{', '.join(ALE_VECTOR_KWARGS)}); use env.backend = 'gymnasium'")
    options = {key: spec.kwargs[key] for key in ALE_VECTOR_KWARGS if key in spec.kwargs}
    options.update({key: cfg.kwargs[key] for key in ALE_VECTOR_KWARGS if key in cfg.kwargs})
    return spec.kwargs["game"], options


def make_vector_env(cfg: EnvConfig, num_envs: int) -> gym.vector.VectorEnv:
    """ale-py's C++ ``AtariVectorEnv`` doing the work of :func:`atari_wrappers` on ``cfg.id``'s game.

    The same chain as ``gymnasium.make(cfg.id, frameskip=1)`` under ``AtariPreprocessing`` and
    ``FrameStackObservation``: the id's registered sticky actions, action set and frame limit
    (overridden by ``env.kwargs``), up to 30 no-op starts, frame skip 4 with max-pooling of the last
    two frames, 84x84 greyscale, ``env.frame_stack`` frames, no fire reset, the game score as
    reward (``env.sign_reward`` clips it for training only) and whole games as episodes (a lost
    life is handled by :class:`GymVecEnv`). Stepping runs in C++ threads, one per core at most.
    One difference: the first stack of an episode is padded with zero frames where
    ``FrameStackObservation`` repeats the first frame. SAME_STEP autoreset, with the final
    observations in ``info["final_obs"]``.

    Raises:
        ConfigError: see :func:`ale_vector_options`; or the vector env could not be built.
    """
    game, options = ale_vector_options(cfg)
    from ale_py.vector_env import AtariVectorEnv

    try:
        return AtariVectorEnv(game, num_envs, num_threads=min(num_envs, usable_cpus()),
                              img_height=84, img_width=84, grayscale=True, stack_num=cfg.frame_stack, frameskip=4,
                              maxpool=True, noop_max=30, episodic_life=False, reward_clipping=False,
                              use_fire_reset=False, autoreset_mode=AutoresetMode.SAME_STEP, **options)
    except Exception as exc:
        raise backend_error(cfg, exc) from None
