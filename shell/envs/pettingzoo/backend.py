"""The PettingZoo backend's functions as the registry calls them (:mod:`shell.envs.registry`): check a config,
name the env its runs are evaluated on, and build a :class:`shell.envs.pettingzoo.vector.ParallelVecEnv` from
``env.id`` or from a user's factory. A factory that makes an AEC env gives a turn-based game: each copy is a
:class:`shell.envs.pettingzoo.turns.TurnGame`.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from typing import Any

import torch

from shell.config import EnvConfig, PolicyConfig
from shell.envs.base import refuse_gymnasium_settings, source_name
from shell.envs.pettingzoo.copies import AsyncCopies, SyncCopies, make_copy
from shell.envs.pettingzoo.groups import check_parallel
from shell.envs.pettingzoo.turns import TurnGame, is_turn_based
from shell.envs.pettingzoo.vector import ParallelVecEnv
from shell.errors import ConfigError, clipped, first_line
from shell.installation import install_hint


def check_config(cfg: EnvConfig) -> None:
    """PettingZoo envs are not gymnasium envs: no wrappers, no Atari chain, no key filter.
    (``env.vectorization_mode = "async"`` steps the copies in worker processes, :class:`AsyncCopies`.)

    Raises:
        ConfigError: ``env.wrappers``, ``env.atari`` or ``env.obs_keys``.
    """
    refuse_gymnasium_settings(cfg)


def eval_config(cfg: EnvConfig) -> EnvConfig:
    """Runs on PettingZoo are evaluated on the same env."""
    return cfg


def make_game(cfg: EnvConfig) -> Any:
    """One turn-based game of ``env.id`` (``env.kwargs`` passed), as its module makes it: PettingZoo's own AEC env
    (``agent_iter``, ``last``, ``observe``), not a :class:`TurnGame` (``ppo-core play``).

    Raises:
        ConfigError: as the backend's ``make``; ``env.id`` makes a parallel env, not a turn-based game.
    """
    game = _factory_from_id(cfg)()
    if not is_turn_based(game):
        game.close()
        raise ConfigError(f"env.id {cfg.id!r} is a parallel env, not a turn-based game (a PettingZoo AEC env)")
    return game


def _factory_from_id(cfg: EnvConfig) -> Callable[[], Any]:
    """``env.id`` -> a function making one env with ``env.kwargs``: ``"module"`` names a module with
    ``parallel_env`` (a parallel env), else with ``env`` (a turn-based AEC game, PettingZoo's classic
    games); ``"module:name"`` names the function (or class) ``name`` in ``module`` that makes either.

    Raises:
        ConfigError: the module cannot be imported (naming the games extra for PettingZoo's classic
            games, which need pygame too, and for pygame; the multiagent extra for the rest of mpe2 and
            pettingzoo), it has no ``name`` (naming both) or ``name`` is
            not callable, or it has neither ``parallel_env`` nor ``env``.
    """
    module_name, colon, attr = cfg.id.partition(":")
    if colon and not attr:
        raise ConfigError(f"env.id {cfg.id!r} names no function after ':'; use 'module' (its parallel_env) "
                          "or 'module:function' (a function of the module that makes a ParallelEnv)")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # a missing package, a misspelt module, or an error inside the module
        top = module_name.split(".")[0]
        if isinstance(exc, ModuleNotFoundError) and exc.name == top and top in ("mpe2", "pettingzoo"):
            extra = "games" if module_name.startswith("pettingzoo.classic") else "multiagent"  # games: pygame too
            raise ConfigError(f"env {cfg.id!r} needs the {top} package; run: {install_hint(extra)}") from None
        if isinstance(exc, ModuleNotFoundError) and exc.name == "pygame" and top == "pettingzoo":
            raise ConfigError(f"env {cfg.id!r} needs pygame (PettingZoo's classic games import it); run: "
                              f"{install_hint('games')}") from None
        raise ConfigError(f"env.backend = 'pettingzoo': cannot import {module_name!r} ({type(exc).__name__}: "
                          f"{first_line(exc)}); env.id names an importable module with parallel_env(), e.g. "
                          "'mpe2.simple_spread_v3', or with env() for a turn-based game, e.g. "
                          "'pettingzoo.classic.tictactoe_v3', or 'module:function' for a function of it that makes "
                          "either (your own module: put its folder on PYTHONPATH)") from None
    if attr:
        make = getattr(module, attr, None)
        if make is None:
            raise ConfigError(f"env {cfg.id!r}: module {module_name!r} has no {attr!r}; after ':' env.id names "
                              "a function of the module that makes a ParallelEnv or an AEC env")
        if not callable(make):
            raise ConfigError(f"env {cfg.id!r}: {module_name}.{attr} is a {type(make).__name__}, not a function "
                              "that makes a ParallelEnv or an AEC env")
    else:
        make = getattr(module, "parallel_env", None) or getattr(module, "env", None)
    if not callable(make):
        raise ConfigError(f"env {cfg.id!r} has neither parallel_env() nor env(): env.backend = 'pettingzoo' needs "
                          "a module of PettingZoo's Parallel API (parallel_env) or AEC API (env, a turn-based game)")
    kwargs = dict(cfg.kwargs)
    return lambda render_mode=None: make(**kwargs, **({"render_mode": render_mode} if render_mode else {}))


def _build(factory: Callable[..., Any], cfg: EnvConfig, num_envs: int, device: torch.device,
           render_mode: str | None, wrappers: list | None, policy: PolicyConfig | None, name: str) -> ParallelVecEnv:
    """The copies of ``factory()`` behind a :class:`ParallelVecEnv`: in this process (``sync``), or in worker
    processes (``async``), where one more copy in this process answers for the spaces. A factory that makes an
    AEC env makes turn-based copies (:class:`TurnGame`, truncated after ``env.max_episode_steps`` moves).

    Raises:
        ConfigError: the factory raised or made something that is neither a Parallel-API nor an AEC env (one
            line); sub-env ``wrappers`` (a PettingZoo env takes none).
    """
    if wrappers:
        raise ConfigError("wrappers need env.backend = 'gymnasium'; a PettingZoo env takes none")
    copies = max(1, num_envs)
    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")  # MPE's pygame renders headless
    in_workers = cfg.vectorization_mode == "async" and copies > 1
    envs: list[Any] = []
    try:
        envs.append(make_copy(factory, render_mode))
        if is_turn_based(envs[0]):  # an AEC env: every copy is played turn by turn
            envs[0], factory = TurnGame(envs[0], cfg.max_episode_steps), _turns(factory, cfg.max_episode_steps)
        check_parallel(envs[0], name)
        for _ in range(1, 1 if in_workers else copies):
            envs.append(make_copy(factory, render_mode))
    except ConfigError:
        SyncCopies(envs, False).close()
        raise
    except Exception as exc:
        SyncCopies(envs, False).close()
        context = f" (env.kwargs = {clipped(repr(dict(cfg.kwargs)), 40)})" if cfg.kwargs else ""
        raise ConfigError(f"cannot make env {name!r}: {type(exc).__name__}: {clipped(first_line(exc), 72)}{context}") \
            from None
    if in_workers:
        def make_copies(with_state: bool) -> AsyncCopies:
            return AsyncCopies(factory, copies, render_mode, with_state, name, shares=cfg.shares)

        return ParallelVecEnv(envs[0], make_copies, copies, cfg, device, policy, name)
    return ParallelVecEnv(envs[0], lambda with_state: SyncCopies(envs, with_state), copies, cfg, device, policy,
                          name)


def _turns(factory: Callable[..., Any], max_moves: int | None) -> Callable[..., TurnGame]:
    """A factory of AEC envs as a factory of :class:`TurnGame` copies."""
    def game(render_mode: str | None = None) -> TurnGame:
        return TurnGame(make_copy(factory, render_mode), max_moves)

    return game


def make(cfg: EnvConfig, num_envs: int, device: torch.device, render_mode: str | None = None,
         wrappers: list | None = None, policy: PolicyConfig | None = None) -> ParallelVecEnv:
    """``num_envs`` copies of ``parallel_env(**env.kwargs)`` (or of the turn-based ``env(**env.kwargs)``) from the
    module ``env.id``.

    Raises:
        ConfigError: see :class:`ParallelVecEnv` and :func:`_factory_from_id`; ``wrappers`` (none apply).
    """
    return _build(_factory_from_id(cfg), cfg, num_envs, device, render_mode, wrappers, policy, cfg.id)


def from_factory(factory: Callable[[], Any], cfg: EnvConfig, num_envs: int, device: torch.device,
                 render_mode: str | None = None, wrappers: list | None = None,
                 policy: PolicyConfig | None = None) -> ParallelVecEnv:
    """``num_envs`` copies of a user's ``factory()`` returning a ``pettingzoo.ParallelEnv`` or a turn-based
    ``pettingzoo.AECEnv``."""
    return _build(factory, cfg, num_envs, device, render_mode, wrappers, policy, source_name(factory))
