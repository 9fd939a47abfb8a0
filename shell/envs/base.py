"""The env layer's interface: what every backend hands the trainer, and what a backend module provides.

A vector env of any backend has ``num_envs``, ``device``, ``observation_space`` and
``action_space`` (one sub-env's), ``max_episode_steps`` (the time limit, None for none),
``valid`` (``[N]`` bool: the rows whose next step is a real transition; false only where a
NEXT_STEP source's next step is a dummy that resets, DESIGN.md "Rows and the validity mask"), and
``reset(seed) -> obs``, ``step(action) -> StepResult``, ``close()``. Everything it returns is a
tensor on the device; numpy appears only inside a backend, at its library's boundary.

A backend is a module listed in :data:`shell.envs.registry.BACKENDS` with three functions:

- ``check_config(cfg: EnvConfig) -> None``: the backend's own config rules (ConfigError, one line),
  called from the API before anything starts (shell.config knows no backend);
- ``make(cfg, num_envs, device, render_mode=None, wrappers=None) -> VecEnv``: its vector env;
- ``eval_config(cfg) -> EnvConfig``: the env config its runs are evaluated on (gymnasium's env of
  the same id for the C++ and torch-native backends).
"""

from __future__ import annotations

from typing import Any, NamedTuple, Protocol

import numpy as np
import torch
from gymnasium import spaces

from shell.actions import COMPOSITES, action_parts, box_action_layout
from shell.config import EnvConfig
from shell.errors import ConfigError, clipped, space_text
from shell.observations import Obs
from shell.seeding import ResetSeed


class StepResult(NamedTuple):
    """One vector step, all tensors on the device.

    Attributes:
        obs: the observation to act on next (the reset observation for sub-envs whose
            episode just ended): ``[N, S]`` float32 for flat spaces, ``[N, ...]`` images in
            their own dtype, or a dict of those (shell/observations.py).
        reward: ``[N]`` float32.
        terminated: ``[N]`` bool (for training: with ``env.terminal_on_life_loss`` also a lost life).
        truncated: ``[N]`` bool (time limit, not termination).
        final_obs: like ``obs``, the true last observation where an episode
            ended this step and ``obs`` elsewhere; ``None`` when the env knows that
            no episode was truncated without terminating (the gymnasium backend),
            as then no bootstrap needs it.
        episode_done: ``[N]`` bool, an episode ended this step; ``None`` (and the two
            fields below too) when the env knows that none did (the gymnasium backend).
        episode_return: ``[N]`` float32 raw return of that episode (where ``episode_done``).
        episode_length: ``[N]`` long, its length (where ``episode_done``).
        episode_start: ``[N]`` bool, ``obs`` is the first observation of an episode; None means
            "where this step ended one" (``terminated | truncated``, SAME_STEP autoreset). A
            NEXT_STEP source sets it on the dummy step that resets (see :class:`GymVecEnv`).
    """

    obs: Obs
    reward: torch.Tensor
    terminated: torch.Tensor
    truncated: torch.Tensor
    final_obs: Obs | None
    episode_done: torch.Tensor | None
    episode_return: torch.Tensor | None
    episode_length: torch.Tensor | None
    episode_start: torch.Tensor | None = None
    valid: torch.Tensor | None = None
    action_mask: torch.Tensor | None = None
    ended: torch.Tensor | None = None


class Rows(NamedTuple):
    """One lane's rows to act on: what a lane env's reset returns per lane, and what a step's
    :class:`StepResult` carries for the next step (its ``obs``, ``valid`` and ``action_mask``).

    Attributes:
        obs: ``[N, ...]`` the observation (or a dict of parts, shell/observations.py).
        valid: ``[N]`` bool, the rows whose next step is a real transition (DESIGN.md, "Rows and the
            validity mask").
        action_mask: ``[N, A]`` bool, the legal actions of ``obs``; None for a lane without masks.
    """

    obs: Obs
    valid: torch.Tensor
    action_mask: torch.Tensor | None = None


class LaneSpec(NamedTuple):
    """What a lane's policy, storage and evaluation are built from: static for the env's life.

    Attributes:
        observation_space: one row's observation space, as the policy sees it.
        action_space: one row's action space.
        num_envs: the lane's rows ``N`` (copies times the lane's agents per copy).
        rows_per_copy: the lane's rows in each copy of the env, copy-major (1 for a single-agent env).
        agents: the lane's agents in row order within a copy (None for a single-agent env).
        turns: the rows are seats of a turn-based game: a row acts (is ``valid``) only at its seat's turn, and
            what it receives while it waits belongs to its last move (DESIGN.md, "Turns"; :func:`core.turn_gae`).
    """

    observation_space: spaces.Space
    action_space: spaces.Space
    num_envs: int
    rows_per_copy: int = 1
    agents: list[str] | None = None
    turns: bool = False


class LaneEnv(Protocol):
    """The env contract the trainer, the evaluation and inference use (DESIGN.md, "The fourth round"):
    records, not attributes. ``lanes`` names each lane (one per group of agents; ``None`` for a
    single-agent env) with its :class:`LaneSpec`; ``copies`` is the number of env copies (sub-envs);
    ``reset(seed) -> {lane: Rows}``; ``step({lane: action [N, ...]}) -> {lane: StepResult}``, each result
    with ``valid``, ``action_mask`` (of its ``obs``) and ``ended`` (``[copies]`` bool: the copy's episode
    ended at this step) filled; ``mask_sources() -> {lane: str | None}`` (where each lane's masks come
    from, settled by the first reset); ``render()`` (copy 0's frame), ``close()``, and ``call``,
    ``get_attr``, ``set_attr`` on every sub-env for callbacks (ConfigError where a backend has no
    gymnasium sub-envs)."""

    lanes: dict[str | None, LaneSpec]
    copies: int
    device: torch.device
    max_episode_steps: int | None
    render_fps: int | None  # the frame rate of render()'s frames (the env's metadata), None where unknown

    def reset(self, seed: ResetSeed | None = None) -> dict[str | None, Rows]: ...

    def step(self, actions: dict[str | None, torch.Tensor]) -> dict[str | None, StepResult]: ...

    def mask_sources(self) -> dict[str | None, str | None]: ...

    def render(self) -> Any: ...

    def close(self) -> None: ...


def no_sub_envs(backend: str, what: str) -> ConfigError:
    """The one-line refusal of a callback's ``what`` on a backend without gymnasium sub-envs."""
    return ConfigError(f"a callback's {what}: env.backend = {backend!r} has no gymnasium sub-envs to change; a "
                       "curriculum needs env.backend = 'gymnasium'")


class OneLane:
    """A single-agent backend's vector env (:class:`VecEnv`) as a :class:`LaneEnv` of one lane, named
    ``None``, whose rows are the N sub-envs (one copy each).

    Args:
        env: the backend's vector env (closed with this object).
        backend: the backend's name, for messages.
    """

    def __init__(self, env: VecEnv, backend: str = "gymnasium"):
        self.env, self.backend = env, backend
        self.lanes = {None: LaneSpec(env.observation_space, env.action_space, env.num_envs)}
        self.copies = env.num_envs
        self.device = env.device
        self.max_episode_steps = env.max_episode_steps
        self.render_fps = getattr(env, "render_fps", None)

    def reset(self, seed: ResetSeed | None = None) -> dict[str | None, Rows]:
        obs = self.env.reset(seed=seed)
        return {None: Rows(obs, self.env.valid, self.env.action_mask)}

    def step(self, actions: dict[str | None, torch.Tensor]) -> dict[str | None, StepResult]:
        step = self.env.step(actions[None])
        return {None: step._replace(valid=self.env.valid, action_mask=self.env.action_mask,
                                    ended=step.terminated | step.truncated)}

    def mask_sources(self) -> dict[str | None, str | None]:
        return {None: getattr(self.env, "mask_source", None)}

    def render(self) -> Any:
        """Sub-env 0's frame (``render_mode = "rgb_array"``)."""
        frames = self.env.render()
        return frames[0] if isinstance(frames, (tuple, list)) else frames

    def _sub_envs(self, what: str) -> Any:
        sub_envs = getattr(self.env, "sub_envs", None)
        vector = sub_envs() if callable(sub_envs) else None
        if vector is None:
            raise no_sub_envs(self.backend, what)
        return vector

    def call(self, name: str, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        return self._sub_envs(f"call({name!r})").call(name, *args, **kwargs)

    def get_attr(self, name: str) -> tuple[Any, ...]:
        return self._sub_envs(f"get_attr({name!r})").get_attr(name)

    def set_attr(self, name: str, values: Any) -> None:
        self._sub_envs(f"set_attr({name!r})").set_attr(name, values)

    def close(self) -> None:
        self.env.close()


class VecEnv(Protocol):
    """What the trainer, the evaluation and the export use of a backend's vector env (see the module doc)."""

    num_envs: int
    device: torch.device
    observation_space: spaces.Space
    action_space: spaces.Space
    max_episode_steps: int | None

    @property
    def valid(self) -> torch.Tensor: ...

    @property
    def action_mask(self) -> torch.Tensor | None:
        """``[N, A]`` bool: the legal actions of the observation to act on next (None: no masks)."""
        ...

    def reset(self, seed: int | None = None) -> Obs: ...

    def step(self, action: torch.Tensor) -> StepResult: ...

    def close(self) -> None: ...


def check_action_space(space: spaces.Space) -> None:
    """Raise ConfigError (one line naming the space) for an action space the policies cannot serve.

    Served: Box of any shape (flattened; float or integer dtype, finite bounds, fixed
    ``low == high`` components held at their value, see :func:`shell.actions.box_action_layout`),
    Discrete(n >= 2, start), MultiDiscrete(1-D nvec with an entry >= 2, start), of any
    integer dtype, and MultiBinary of any shape (independent bits, flattened); Dict and Tuple spaces of
    those, nested (shell.policies.composite: one joint distribution over the parts).
    """
    if isinstance(space, COMPOSITES):
        for part in action_parts(space):
            try:
                check_action_space(part.space)
            except ConfigError as exc:  # the part named, the line kept short (its space summed up if need be)
                message, suffix = str(exc), f" (action part {clipped(part.name, 30)!r})"
                if len(message + suffix) > 190:
                    message = message.replace(space_text(part.space), space_text(part.space, 24))
                raise ConfigError(message + suffix) from None
        return
    if isinstance(space, spaces.Box):
        box_action_layout(space)
        return
    if isinstance(space, spaces.Discrete):
        if space.n < 2:
            raise ConfigError(f"unsupported action space {space_text(space)}: a Discrete action space needs n >= 2")
        return
    if isinstance(space, spaces.MultiDiscrete):
        if space.nvec.ndim != 1 or not np.any(space.nvec >= 2):
            raise ConfigError(f"unsupported action space {space_text(space)}: MultiDiscrete needs a 1-D nvec with an "
                              "entry >= 2")
        return
    if isinstance(space, spaces.MultiBinary):
        if int(np.prod(space.shape, dtype=np.int64)) < 1:
            raise ConfigError(f"unsupported action space {space_text(space)}: a MultiBinary action space needs a bit")
        return
    raise ConfigError(
        f"unsupported action space {space_text(space)}; supported: Box with finite bounds, Discrete, MultiDiscrete, "
        "MultiBinary, Dict and Tuple"
    )


def refuse_wrappers(cfg: EnvConfig) -> None:
    """For backends whose sub-envs are not gymnasium envs: ``env.wrappers`` cannot wrap them.

    Raises:
        ConfigError: ``env.wrappers`` is not empty.
    """
    if cfg.wrappers:
        raise ConfigError(f"env.wrappers need env.backend = 'gymnasium', not {cfg.backend!r}")


def refuse_shares(cfg: EnvConfig) -> None:
    """For backends that step their sub-envs themselves (a C++ pool, a batch of tensors): ``env.shares`` splits
    gymnasium's and PettingZoo's sub-envs over processes (gymnasium's over threads too) and means nothing to them.

    Raises:
        ConfigError: ``env.shares`` is set, or ``env.vectorization_mode = "threads"``.
    """
    refuse_threads(cfg)
    if cfg.shares is not None:
        raise ConfigError(f"env.shares applies to env.backend = 'gymnasium' or 'pettingzoo', not {cfg.backend!r}")


def refuse_threads(cfg: EnvConfig) -> None:
    """For every backend but gymnasium's: ``env.vectorization_mode = "threads"`` steps shares of gymnasium
    sub-envs in threads (:class:`shell.envs.shards.ThreadShares`).

    Raises:
        ConfigError: ``env.vectorization_mode = "threads"``.
    """
    if cfg.vectorization_mode == "threads":
        raise ConfigError(f"env.vectorization_mode = 'threads' applies to env.backend = 'gymnasium', not "
                          f"{cfg.backend!r}")


def refuse_gymnasium_settings(cfg: EnvConfig) -> None:
    """For the multi-agent backends: the settings that only gymnasium envs take.

    Raises:
        ConfigError: ``env.wrappers``, ``env.atari`` / ``env.terminal_on_life_loss`` or ``env.obs_keys`` is set, or
            ``env.vectorization_mode = "threads"``.
    """
    refuse_wrappers(cfg)
    refuse_threads(cfg)
    if cfg.atari or cfg.terminal_on_life_loss:
        raise ConfigError(f"env.atari and env.terminal_on_life_loss need a gymnasium backend, not {cfg.backend!r}")
    if cfg.obs_keys is not None:
        raise ConfigError(f"env.obs_keys is for gymnasium Dict observations; env.backend = {cfg.backend!r} takes none")


def source_name(source: Any) -> str:
    """The name messages give a user's env factory or ready vector env: its ``__name__`` (a
    ``functools.partial``'s function's), else its type's name."""
    func = getattr(source, "func", source)  # functools.partial
    return getattr(func, "__name__", None) or type(source).__name__


def backend_error(cfg: EnvConfig, exc: Exception) -> ConfigError:
    """One line for a C++ backend's vector env that could not be built from ``cfg`` (pybind11's
    many-line type errors are cut to what they mean)."""
    msg = " ".join(str(exc).split()) or type(exc).__name__
    if isinstance(exc, TypeError) and "incompatible constructor arguments" in msg:  # pybind11's, many lines long
        msg = "a value in env.kwargs has a type the C++ env does not accept"
    return ConfigError(f"cannot make env {cfg.id!r} with env.backend = {cfg.backend!r}: {msg} "
                       f"(env.kwargs = {clipped(repr(dict(cfg.kwargs)), 40)})")
