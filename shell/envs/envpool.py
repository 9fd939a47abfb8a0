"""The envpool backend: EnvPool's C++ vector envs, stepping in a thread pool (NEXT_STEP autoreset).

What is EnvPool's own business lives here: its pool options (kept out of the gymnasium env its
runs are evaluated on), the options it would abort the process on, and its seeding (EnvPool seeds
a pool when it builds it and ignores ``reset(seed=...)``, so :class:`SeededPool` rebuilds the pool
at a seeded reset). The light import of its classic-control family is in
:mod:`shell.envs.envpool_import`.
"""

from __future__ import annotations

import warnings
from typing import Any

import attrs
import gymnasium as gym
import torch

from shell.config import EnvConfig, PolicyConfig
from shell.envs.base import backend_error, refuse_shares, refuse_wrappers
from shell.envs.envpool_import import envpool_registration
from shell.envs.gymnasium import GymVecEnv
from shell.errors import ConfigError, said
from shell.installation import install_hint
from shell.seeding import ResetSeed, base_seed

# env.kwargs that configure EnvPool's pool rather than the env (dropped for the gymnasium evaluation env;
# "seed" is refused for training now, but configs saved before that may carry it)
ENVPOOL_OPTIONS = ("num_threads", "batch_size", "thread_affinity_offset", "seed")




def check_config(cfg: EnvConfig) -> None:
    """Raises ConfigError for ``env.wrappers`` (EnvPool's sub-envs are not gymnasium envs) and
    ``env.atari`` (EnvPool has its own Atari chain; use env.backend = 'ale' or 'gymnasium')."""
    refuse_wrappers(cfg)
    refuse_shares(cfg)
    if cfg.atari:
        raise ConfigError("env.atari runs on env.backend = 'ale' or 'gymnasium', not 'envpool'")


def eval_config(cfg: EnvConfig) -> EnvConfig:
    """Evaluated on gymnasium's env of the same id, without the pool's own options."""
    kwargs = {k: v for k, v in cfg.kwargs.items() if k not in ENVPOOL_OPTIONS}
    return attrs.evolve(cfg, backend="gymnasium", kwargs=kwargs)


def make(cfg: EnvConfig, num_envs: int, device: torch.device, render_mode: str | None = None,
         wrappers: list | None = None, policy: PolicyConfig | None = None) -> GymVecEnv:
    """EnvPool's vector env of ``cfg.id``, rebuilt with the seed of a seeded reset (:class:`SeededPool`)."""
    pool = SeededPool(make_vector_env(cfg, num_envs), lambda seed: make_vector_env(cfg, num_envs, seed))
    return GymVecEnv(pool, cfg, device, name=cfg.id, sub_envs=False)


class SeededPool(gym.vector.VectorWrapper):
    """An EnvPool vector env whose ``reset(seed=s)`` builds a new pool seeded ``s`` (sub-env i gets
    ``s + i``) and resets that, since EnvPool ignores the seed of ``reset`` (and warns). A reset
    without a seed resets the pool as it is."""

    def __init__(self, env: gym.vector.VectorEnv, build: Any):
        super().__init__(env)
        self._build = build

    def reset(self, *, seed: ResetSeed | None = None, options: dict[str, Any] | None = None):
        seed = base_seed(seed)  # one seed for the pool: a list's first (shell/seeding.py)
        if seed is not None:
            self.env.close()
            self.env = self._build(seed)
        return self.env.reset(options=options)


def _check_envpool_options(kwargs: dict[str, Any], num_envs: int) -> None:
    """Refuse pool options that EnvPool would abort the process on, or that this loop cannot run.

    Raises:
        ConfigError: ``seed`` given (it comes from ``run.seed``), ``num_threads`` or
            ``thread_affinity_offset`` not an int (>= 0, >= -1), or ``batch_size`` other than 0 or
            ``num_envs`` (EnvPool's async mode returns a subset of the sub-envs per step).
    """
    if "seed" in kwargs:
        raise ConfigError("env.kwargs.seed: the envpool backend seeds its pool from run.seed (by run.seed_scheme, "
                          f"as on the other backends); drop it and pass {said('seed', 'N')}")
    for key, low in (("num_threads", 0), ("thread_affinity_offset", -1)):
        value = kwargs.get(key, low)
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ConfigError(f"env.kwargs.{key} = {value!r}: EnvPool needs an int >= {low}")
    batch = kwargs.get("batch_size", 0)
    if isinstance(batch, bool) or not isinstance(batch, int) or batch not in (0, num_envs):
        raise ConfigError(f"env.kwargs.batch_size = {batch!r}: every sub-env steps at every rollout step, so it "
                          f"must be 0 or env.num_envs ({num_envs}); EnvPool's async mode is not supported")


def make_vector_env(cfg: EnvConfig, num_envs: int, seed: int | None = None) -> gym.vector.VectorEnv:
    """EnvPool's C++ vector env of ``cfg.id`` (``envpool.make_gymnasium``), stepping in a thread pool.

    EnvPool autoresets NEXT_STEP: :class:`GymVecEnv` keeps its dummy steps out of the rollout.
    ``env.kwargs`` go to ``make_gymnasium`` as they are, and ``env.max_episode_steps`` as its
    ``max_episode_steps``. EnvPool seeds its sub-envs when it builds the pool (sub-env i gets
    ``seed + i``; EnvPool's own default seed where ``seed`` is None) and ignores ``reset(seed=...)``,
    so :class:`SeededPool` rebuilds the pool with the seed it is given (0.5 ms for CartPole,
    30 ms for HalfCheetah). The pool runs one thread unless ``env.kwargs.num_threads`` says otherwise
    (EnvPool's default is one per core): CartPole-v1 with 16 envs trained about twice as fast that
    way on 2 cores, where the training process's own thread needs one of them.

    Raises:
        ConfigError: no envpool (naming the pip command), an id EnvPool does not have, pool
            options it would abort on (:func:`_check_envpool_options`), or kwargs it refuses (one line).
    """
    try:
        envpool = envpool_registration(cfg.id)  # only the classic-control family for its ids (envpool_import)
    except ImportError:
        raise ConfigError("env.backend = 'envpool' needs the envpool package; run: "
                          f"{install_hint('envpool')}") from None
    if cfg.id not in envpool.list_all_envs():
        raise ConfigError(f"env.backend = 'envpool' has no env {cfg.id!r} (EnvPool names its Atari games without "
                          "'ALE/', e.g. 'Pong-v5'); for other ids use env.backend = 'gymnasium'")
    _check_envpool_options(cfg.kwargs, num_envs)
    kwargs: dict[str, Any] = {"num_threads": 1, **cfg.kwargs}
    if cfg.max_episode_steps is not None:
        kwargs["max_episode_steps"] = cfg.max_episode_steps
    if seed is not None:
        kwargs["seed"] = seed
    try:
        with warnings.catch_warnings():  # EnvPool's float64 space bounds, cast to float32 by gymnasium's Box
            warnings.filterwarnings("ignore", message=r".*Box (low|high)'s precision lowered", category=UserWarning)
            env = envpool.make_gymnasium(cfg.id, num_envs=num_envs, **kwargs)
            env.single_observation_space, env.single_action_space  # noqa: B018 - built (and cached) on first use
            return env
    except Exception as exc:
        raise backend_error(cfg, exc) from None
