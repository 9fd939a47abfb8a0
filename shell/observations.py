"""Observation layouts: what each part of an observation is, and its tensors after the env boundary.

An observation space becomes an :class:`ObsLayout`: one :class:`ObsPart` for a plain space, or
one per key for a Dict. Each part has a kind that fixes its encoding all the way to the encoder:

- ``"flat"``: a Box that is not an image, flattened to ``[N, S]`` float32 (observation
  normalisation applies to these parts only);
- ``"onehot"``: a Discrete(n, start), one-hot ``[N, n]`` float32;
- ``"image"``: a Box of rank 3 whose two largest axes are at least 4 (the smallest grid the
  small CNN takes; smaller rank-3 Boxes are flat), kept in the env's layout and dtype (uint8 stays uint8 in storage,
  4x smaller than float32); the image encoder transposes channels-last images and scales.

A plain space gives a tensor observation, a Dict gives a ``dict[str, Tensor]`` in the layout's
key order. :func:`map_obs` applies one function to either.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import gymnasium as gym
import numpy as np
import torch
from gymnasium import spaces

from shell.errors import ConfigError, clipped, space_text

Obs = torch.Tensor | dict[str, torch.Tensor]


class ObservationError(ValueError):
    """An observation that its space cannot hold where the encoder needs it to (a Discrete value out of range)."""

MIN_IMAGE_SIZE = 4
#: A Dict observation of these two keys splits between the heads: the actor sees ``"obs"`` only, the critic
#: ``"critic"`` only (a multi-agent env's centralised critic input, shell/envs/pettingzoo/rows.py).
ACTOR_KEY, CRITIC_KEY = "obs", "critic"
#: The key of an agent's one-hot index beside a multi-agent env's Dict observation (``policy.agent_id``).
AGENT_ID_KEY = "agent_id"


class ObsPart(NamedTuple):
    """One encodable part of an observation.

    Attributes:
        kind: ``"flat"``, ``"onehot"`` or ``"image"``.
        shape: the per-env tensor shape after the boundary: ``(S,)`` flat, ``(n,)`` one-hot,
            the space's ``(H, W, C)`` or ``(C, H, W)`` for an image.
        dtype: the tensor dtype after the boundary (float32, or the image's own dtype).
        space: the gymnasium space of this part.
    """

    kind: str
    shape: tuple[int, ...]
    dtype: torch.dtype
    space: gym.Space


class ObsLayout(NamedTuple):
    """The parts of an observation: ``parts[None]`` for a plain space, one per key for a Dict."""

    parts: dict[str | None, ObsPart]

    @property
    def is_dict(self) -> bool:
        return None not in self.parts

    @property
    def flat_size(self) -> int:
        """Total size of the ``flat`` parts (what observation normalisation covers)."""
        return sum(p.shape[0] for p in self.parts.values() if p.kind == "flat")


SUPPORTED = "Box (any shape; rank 3 = an image), Discrete, or a Dict of those"


def _part(space: gym.Space) -> ObsPart | None:
    if isinstance(space, spaces.Box):
        if space.dtype.kind not in "iufb":
            return None
        if len(space.shape) == 3 and sorted(space.shape)[1] >= MIN_IMAGE_SIZE:
            dtype = torch.uint8 if space.dtype == np.uint8 else torch.float32
            return ObsPart("image", tuple(space.shape), dtype, space)
        return ObsPart("flat", (int(np.prod(space.shape, dtype=np.int64)),), torch.float32, space)
    if isinstance(space, spaces.Discrete):
        return ObsPart("onehot", (int(space.n),), torch.float32, space)
    if isinstance(space, spaces.MultiBinary):
        return ObsPart("flat", (int(np.prod(space.shape, dtype=np.int64)),), torch.float32, space)
    return None


def split_actor_critic(layout: ObsLayout) -> tuple[ObsLayout, ObsLayout | None]:
    """``(actor layout, critic layout)``: a Dict of exactly :data:`ACTOR_KEY` and :data:`CRITIC_KEY` splits
    between them; any other layout serves both (``None`` for the critic's)."""
    if layout.is_dict and set(layout.parts) == {ACTOR_KEY, CRITIC_KEY}:
        return ObsLayout({ACTOR_KEY: layout.parts[ACTOR_KEY]}), ObsLayout({CRITIC_KEY: layout.parts[CRITIC_KEY]})
    return layout, None


def agent_view(own: Any, ids: np.ndarray | None, critic: np.ndarray | None) -> Any:
    """Agents' own observations as a multi-agent policy sees them (shell/envs/pettingzoo/rows.py, and
    :class:`shell.inference.AgentsPolicy` for raw observations).

    Args:
        own: ``[B, ...]`` the agents' own observations, or a dict of such arrays.
        ids: ``[B, M]`` float32 one-hot agent indices to append (``policy.agent_id``): a key
            :data:`AGENT_ID_KEY` beside a dict's keys, else concatenated to ``[B, S + M]``; None: none.
        critic: ``[B, C]`` a centralised critic's input; the result is then a dict of :data:`ACTOR_KEY`
            (what the actor sees) and :data:`CRITIC_KEY`. None: a local critic.
    """
    view = own
    if ids is not None:
        view = {**own, AGENT_ID_KEY: ids} if isinstance(own, dict) else \
            np.concatenate([np.asarray(own, dtype=np.float32), ids], axis=1)
    return view if critic is None else {ACTOR_KEY: view, CRITIC_KEY: critic}


def obs_layout(space: gym.Space) -> ObsLayout:
    """Check an observation space and lay out its parts.

    Args:
        space: the single (per sub-env) observation space, after any ``FilterObservation``.

    Raises:
        ConfigError: one line naming the space, or for a Dict the key, its space and the
            ``env.obs_keys`` to set, when a part cannot be encoded (Text, Tuple, a custom space such as
            MiniGrid's ``mission``, a nested Dict).
    """
    if isinstance(space, spaces.Dict):
        parts: dict[str | None, ObsPart] = {}
        for key, sub in space.spaces.items():
            part = _part(sub)
            if part is None:
                keep = [k for k, s in space.spaces.items() if _part(s)]
                raise ConfigError(f"observation key {clipped(repr(key), 20)} has a space that cannot be encoded: "
                                  f"{space_text(sub, 48)}; set env.obs_keys = {clipped(keep, 30)}")
            parts[key] = part
        if not parts:
            raise ConfigError(f"unsupported observation space {space_text(space)}: an empty Dict")
        return ObsLayout(parts)
    part = _part(space)
    if part is None:
        raise ConfigError(f"unsupported observation space {space_text(space)}; supported: {SUPPORTED}")
    return ObsLayout({None: part})


def _part_to_tensor(obs: np.ndarray, part: ObsPart, device: torch.device) -> torch.Tensor:
    if part.kind == "onehot":
        raw = np.asarray(obs, dtype=np.int64)
        outside = (raw < part.space.start) | (raw >= part.space.start + part.shape[0])
        if outside.any():  # one_hot would raise a RuntimeError that names no observation
            raise ObservationError(f"an observation {int(raw[outside].flat[0])} is outside its space {part.space}")
        index = torch.as_tensor(raw - int(part.space.start))
        return torch.nn.functional.one_hot(index, part.shape[0]).to(device, torch.float32)
    if part.kind == "image":
        array = np.asarray(obs)
        if part.dtype == torch.float32:
            array = _finite(array.astype(np.float32, copy=False))
        return torch.as_tensor(array, device=device)
    flat = _finite(np.asarray(obs, dtype=np.float32).reshape(len(obs), -1))
    return torch.as_tensor(flat, device=device)


def _finite(array: np.ndarray) -> np.ndarray:
    """``array`` (float32), checked: a policy given NaN or an infinity acts with NaN actions, which reach an env in
    silence. An infinity is an env's overflow (a float16 observation past 65504) or a value beyond float32's range."""
    if not np.isfinite(array).all():
        if np.isnan(array).any():
            raise ObservationError("an observation holds NaN")
        raise ObservationError("an observation holds an infinity (or a value beyond float32's range)")
    return array


def to_tensor(obs: Any, layout: ObsLayout, device: torch.device) -> Obs:
    """A batch of raw observations (``[N, ...]`` array, or a dict of them) -> tensors on ``device``.

    Flat parts become ``[N, S]`` float32, one-hot parts ``[N, n]`` float32, images ``[N, ...]``
    in their own dtype (uint8 stays uint8).

    Raises:
        ObservationError: a float part holds NaN or an infinity (naming the Dict key), or a Discrete part holds a
            value outside its space.
    """
    if layout.is_dict:
        parts = {}
        for key, part in layout.parts.items():
            try:
                parts[key] = _part_to_tensor(obs[key], part, device)
            except ObservationError as exc:
                raise ObservationError(f"{exc} in key {key!r}") from None
        return parts
    return _part_to_tensor(obs, layout.parts[None], device)


def map_obs(fn: Callable[[torch.Tensor], torch.Tensor], obs: Obs) -> Obs:
    """``fn`` applied to a tensor observation, or to every tensor of a dict observation."""
    if isinstance(obs, dict):
        return {key: fn(value) for key, value in obs.items()}
    return fn(obs)


def stack_final_obs(obs: Any, final: np.ndarray, mask: np.ndarray, layout: ObsLayout) -> Any:
    """The true last observations: ``obs`` with the rows under ``mask`` replaced by ``final``.

    Args:
        obs: the vector env's batched observation (an array, or a dict of arrays).
        final: gymnasium's ``info["final_obs"]``, a numpy object array of per-env observations.
        mask: ``info["_final_obs"]``, ``[N]`` bool.
    """
    rows = np.flatnonzero(mask)
    if layout.is_dict:
        out = {key: np.array(value, copy=True) for key, value in obs.items()}
        for i in rows:
            for key in out:
                out[key][i] = final[i][key]
        return out
    out = np.array(obs, copy=True)
    out[rows] = np.stack(final[rows])
    return out
