"""The env backends by name, each a module imported on first use (so ``ale_py`` and ``envpool`` load only
when a run asks for them), and the env layer's entry points: check a config, build its vector env, name
the env its runs are evaluated on.

Adding a backend is one module with ``check_config``, ``make`` and ``eval_config`` (see
:mod:`shell.envs.base`) and one line in :data:`BACKENDS`.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any

import gymnasium as gym
import torch

from shell.config import EnvConfig, PolicyConfig
from shell.envs import gymnasium as gymnasium_backend
from shell.envs.base import LaneEnv, OneLane
from shell.errors import ConfigError
from shell.installation import distribution_version

BACKENDS = {
    "gymnasium": "shell.envs.gymnasium",  # gymnasium's vector envs (sync or async)
    "torch": "shell.envs.torch_native",  # batched tensor envs, state on the device
    "ale": "shell.envs.ale",  # ale-py's C++ AtariVectorEnv (the Atari chain)
    "envpool": "shell.envs.envpool",  # EnvPool's C++ thread pool
    "pettingzoo": "shell.envs.pettingzoo",  # PettingZoo Parallel-API multi-agent envs, agents as rows
    "vmas": "shell.envs.vmas",  # VMAS scenarios: batched multi-agent worlds on the device, agents as rows
    "openspiel": "shell.envs.openspiel",  # OpenSpiel's two-player turn-based games, played by pettingzoo's turns
}
"""``env.backend`` name -> module path."""

MULTI_AGENT = {"pettingzoo", "vmas", "openspiel"}
"""Backends of several agents: their ``make`` and ``from_factory`` (a factory of their own kind of env) return a
:class:`shell.envs.base.LaneEnv` with a lane per group of agents; every other backend's vector env is one lane."""

RENDERS = {"gymnasium", "pettingzoo", "vmas"}
"""Backends that render (``render_mode``) and take sub-env ``wrappers`` (pettingzoo and vmas refuse wrappers
themselves)."""

PACKAGES = {
    "ale": ("ale_py",),
    "envpool": ("envpool",),
    "gymnasium": tuple(dict.fromkeys(module for module, _ in gymnasium_backend.ENV_PACKAGES.values())),
    "pettingzoo": ("pettingzoo", "mpe2"),
    "vmas": ("vmas",),
    "openspiel": ("open_spiel", "pettingzoo"),
}
"""``env.backend`` name -> the third-party env packages its module may import (the gymnasium backend loads
``ale_py`` and ``minigrid`` for their ids: :data:`shell.envs.gymnasium.ENV_PACKAGES`); the torch-native backend
imports none. :func:`env_package_versions` lists them in this order, each at its first appearance."""


def env_package_versions() -> dict[str, str | None]:
    """``{package: installed version or None}`` of the env packages of :data:`PACKAGES` that this process has
    imported so far (a run records them in versions.json), in the order of :data:`PACKAGES`."""
    names = dict.fromkeys(name for packages in PACKAGES.values() for name in packages)
    return {name: distribution_version(name) for name in names if name in sys.modules}


def backend(name: str) -> ModuleType:
    """The module of backend ``name``, imported now.

    Raises:
        ConfigError: no backend has that name (one line listing those that do).
    """
    if name not in BACKENDS:
        raise ConfigError(f"env.backend = {name!r} is not allowed; choose one of {list(BACKENDS)}")
    return importlib.import_module(BACKENDS[name])


def check_config(cfg: EnvConfig) -> None:
    """The backend's own rules on the env config, before anything starts.

    Raises:
        ConfigError: an unknown backend, or a key the backend cannot serve (one line).
    """
    backend(cfg.backend).check_config(cfg)


def eval_env_config(cfg: EnvConfig) -> EnvConfig:
    """The env config a run of ``cfg`` is evaluated on: gymnasium's env of the same id for the C++ and
    torch-native backends (the reference implementation, so results compare across backends)."""
    return backend(cfg.backend).eval_config(cfg)


def check_eval_env(cfg: EnvConfig, device: torch.device) -> None:
    """Where runs of ``cfg`` are evaluated on another backend's env, build and close one now, so that an
    env that cannot be built there (an id gymnasium lacks, a missing extra) stops the run before
    training, not after.

    Raises:
        ConfigError: one line naming the problem and why that env is needed.
    """
    eval_cfg = eval_env_config(cfg)
    if eval_cfg.backend == cfg.backend:
        return
    try:
        make_env(eval_cfg, device, num_envs=1).close()
    except ConfigError as exc:
        raise ConfigError(f"{str(exc).rstrip('.')}; runs on env.backend = {cfg.backend!r} are evaluated on "
                          f"{eval_cfg.backend}'s env of the same id (or set run.eval_episodes = 0)") from None


def make_game(cfg: EnvConfig) -> Any | None:
    """One turn-based game of ``cfg`` as its library makes it (PettingZoo's AEC env: ``agent_iter``, ``last``,
    ``observe``), for a person to play (``ppo-core play``); None where the backend has no turn-based games.

    Raises:
        ConfigError: as the backend's ``make``; ``env.id`` is not a turn-based game of a backend that has them.
    """
    make = getattr(backend(cfg.backend), "make_game", None)
    return None if make is None else make(cfg)


def factory_backend(name: str) -> str:
    """The backend that runs a user's env factory under ``env.backend = name``: the multi-agent backends take
    factories of their own kind of env; a factory with any other backend makes gymnasium envs."""
    return name if name in MULTI_AGENT else "gymnasium"


def make_env(cfg: EnvConfig, device: torch.device, num_envs: int | None = None, render_mode: str | None = None,
             wrappers: list[Callable[[gym.Env], gym.Env]] | None = None, source: Any = None,
             policy: PolicyConfig | None = None) -> Any:
    """Build the configured backend's own vector env (``num_envs`` defaults to ``cfg.num_envs``) on
    ``cfg.backend``: a :class:`shell.envs.base.VecEnv` of a single-agent backend, or a multi-agent backend's
    :class:`shell.envs.base.LaneEnv`. The trainer, the evaluation and inference use :func:`make_lanes`.

    ``wrappers`` (callables env -> env) wrap each sub-env, as in ``gym.make_vec``, outside the
    config's own (:func:`shell.envs.gymnasium.sub_env_wrappers`); they and ``render_mode`` need the
    gymnasium backend (a multi-agent backend renders too). ``source`` replaces the config's id: a
    ``Callable[[], gymnasium.Env]`` factory, or a ready ``gymnasium.vector.VectorEnv`` (used as it is:
    ``num_envs``, ``render_mode`` and ``wrappers`` do not apply to it); both run on the gymnasium backend,
    except a factory with a multi-agent backend (``env.backend = "pettingzoo"``: a
    ``Callable[[], pettingzoo.ParallelEnv]``). ``policy`` shapes the rows of a multi-agent backend
    (``policy.agent_id``, ``policy.critic``); the other backends take it and ignore it.

    Raises:
        ConfigError: unknown env id or backend, missing optional extra, unsupported space, an id
            the backend does not have, rendering or wrappers asked of a backend that cannot serve them,
            or an ``env.wrappers`` entry that cannot be imported or built.
    """
    num_envs = num_envs or cfg.num_envs
    if isinstance(source, gym.vector.VectorEnv):
        return gymnasium_backend.from_vector_env(source, cfg, device)
    if source is not None:
        if not callable(source):
            raise ConfigError(f"env must be an id, a Callable[[], gymnasium.Env] or a gymnasium.vector.VectorEnv, "
                              f"not {type(source).__name__}")
        return backend(factory_backend(cfg.backend)).from_factory(source, cfg, num_envs, device, render_mode,
                                                                  wrappers, policy)
    module = backend(cfg.backend)
    if cfg.backend not in RENDERS and (render_mode is not None or wrappers):
        raise ConfigError("rendering and wrappers need env.backend = 'gymnasium'")
    return module.make(cfg, num_envs, device, render_mode, wrappers, policy)


def make_lanes(cfg: EnvConfig, device: torch.device, num_envs: int | None = None, render_mode: str | None = None,
               wrappers: list[Callable[[gym.Env], gym.Env]] | None = None, source: Any = None,
               policy: PolicyConfig | None = None) -> LaneEnv:
    """:func:`make_env` as the env contract the trainer, the evaluation and inference use
    (:class:`shell.envs.base.LaneEnv`): a multi-agent backend's env as it is, a single-agent backend's
    vector env as one lane (:class:`shell.envs.base.OneLane`). Arguments and errors: :func:`make_env`."""
    env = make_env(cfg, device, num_envs, render_mode, wrappers, source, policy)
    if cfg.backend in MULTI_AGENT and not isinstance(source, gym.vector.VectorEnv):
        return env
    return OneLane(env, "gymnasium" if source is not None else cfg.backend)
