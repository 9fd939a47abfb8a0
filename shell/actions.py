"""Action spaces: what the squashed Gaussian serves of a Box, and the cast at the env boundary.

The policy computes in float32 on the device; an env checks actions against its space's own
bounds in the space's own dtype. Three things sit between the two:

- Rounding. ``tanh(u) * scale + bias`` in float32 can land a rounding step outside the Box
  (Box(-1, 0.2) gives 0.20000002), and float32(0.2) is above a float64 Box's 0.2. The actor
  clamps to the float32 bounds rounded inward (:func:`box_action_layout`); the env boundary
  (:func:`to_env_action`) casts to the space's dtype and clips there, exactly.
- Fixed components (``low == high``). A locked joint is a legitimate space, and refusing it
  would force every user to write a wrapper that removes the component; but its zero scale
  would make the Gaussian's log-Jacobian ``-inf`` and the first update NaN. So the actor holds
  it at its value and leaves it out of the distribution: the Gaussian, the stored raw action,
  the log-prob and the entropy cover only the free components.
- Integer dtypes. The squashed action is rounded and clipped to ``[low, high]``; the log-prob
  stays the density of the raw Gaussian sample ``u`` (see :class:`BoxActionLayout`).

Box actions of any shape are served flattened (``A = prod(shape)``); the env boundary restores
the shape.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import gymnasium as gym
import numpy as np
import torch
from gymnasium import spaces

from shell.errors import ConfigError, clipped, space_text

FLOAT32_MAX = float(np.finfo(np.float32).max)
MAX_EXACT_INT = 2**24  # float32 represents every integer up to this magnitude


class BoxActionLayout(NamedTuple):
    """How the squashed Gaussian serves a Box action space (all arrays are float32 unless noted).

    The Gaussian covers the F free components (``low < high``) of the flattened action
    ``[A]``, ``A = prod(shape)``; the fixed ones (``low == high``) are held at their value.
    For an integer dtype the squashed interval is widened to ``[low - 0.5, high + 0.5]`` so
    that, after rounding, every integer of ``[low, high]`` gets a bin of width 1 (the ends
    included), and the result is clipped to ``[low, high]``. The env action is then a
    deterministic function of the raw Gaussian sample ``u``; the log-prob stays the density of
    ``u``, which is what the policy gradient needs: rounding and clipping are part of the
    environment as the policy sees it, like the tanh's saturation.

    Attributes:
        shape: the space's shape.
        size: ``A = prod(shape)``.
        free_index: ``[F]`` int64, the free components' positions in the flat action.
        fixed_action: ``[A]`` the nearest float32 to each fixed component's value, 0 where free.
        scale: ``[F]`` half-width of the squashed interval.
        bias: ``[F]`` centre of the squashed interval.
        low: ``[F]`` the smallest float32 >= the space's low (the float32 bound rounded inward).
        high: ``[F]`` the largest float32 <= the space's high.
        integer: the space's dtype is an integer one (round, then clip).
    """

    shape: tuple[int, ...]
    size: int
    free_index: np.ndarray
    fixed_action: np.ndarray
    scale: np.ndarray
    bias: np.ndarray
    low: np.ndarray
    high: np.ndarray
    integer: bool

    @property
    def num_free(self) -> int:
        return len(self.free_index)


def float32_inward(low: np.ndarray, high: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Float64 bounds ``[...]`` -> float32 ``(low32, high32)`` with ``low <= low32`` and ``high32 <= high``.

    The nearest float32 can lie outside the interval (float32(0.2) = 0.200000003 > 0.2): step
    it one float32 towards the inside (``np.nextafter``).
    """
    low, high = np.asarray(low, np.float64), np.asarray(high, np.float64)
    low32, high32 = low.astype(np.float32), high.astype(np.float32)
    low32 = np.where(low32.astype(np.float64) < low, np.nextafter(low32, np.float32(np.inf)), low32)
    high32 = np.where(high32.astype(np.float64) > high, np.nextafter(high32, np.float32(-np.inf)), high32)
    return low32.astype(np.float32), high32.astype(np.float32)


def box_action_layout(space: spaces.Box) -> BoxActionLayout:
    """Check a Box action space and lay out how the squashed Gaussian serves it.

    Served: any shape (flattened), float or integer dtype, finite bounds within float32 range
    (integers within +-2**24, where float32 holds every integer), fixed components
    (``low == high``) as long as one component is free.

    Raises:
        ConfigError: one line naming the space, for a bool dtype, a bound that is inf or NaN,
            ``low > high``, bounds beyond float32 range (beyond +-2**24 for integers), or a
            space whose every component is fixed.
    """
    kind = space.dtype.kind
    if kind == "b":
        raise ConfigError(f"unsupported action space {space_text(space)}: a bool Box; declare the switches as "
                          "MultiDiscrete([2, ...]) instead")
    if kind not in "iuf":
        raise ConfigError(f"unsupported action space {space_text(space)}: Box dtype {space.dtype} is neither float "
                          "nor integer")
    low = np.asarray(space.low, np.float64).reshape(-1)
    high = np.asarray(space.high, np.float64).reshape(-1)
    if not (np.all(np.isfinite(low)) and np.all(np.isfinite(high))):
        raise ConfigError(f"unsupported action space {space_text(space)}: the tanh-squashed policy needs finite "
                          "Box bounds (no inf or NaN)")
    if np.any(low > high):
        raise ConfigError(f"unsupported action space {space_text(space)}: a Box needs low <= high in every component")
    integer = kind in "iu"
    limit = MAX_EXACT_INT if integer else FLOAT32_MAX
    if np.any(np.abs(low) > limit) or np.any(np.abs(high) > limit):
        what = "integer Box bounds within +-2**24 (float32 holds every integer there)" if integer \
            else "Box bounds within float32 range"
        raise ConfigError(f"unsupported action space {space_text(space)}: the float32 policy needs {what}")
    free = low < high
    if not np.any(free):
        raise ConfigError(f"unsupported action space {space_text(space)}: every component has low == high, so there is "
                          "no action to learn")
    half = 0.5 if integer else 0.0  # integers: every value of [low, high] gets a bin of width 1
    lo, hi = low[free] - half, high[free] + half
    low32, high32 = float32_inward(low[free], high[free])
    fixed_action = np.where(free, 0.0, low).astype(np.float32)
    return BoxActionLayout(
        shape=tuple(space.shape),
        size=len(low),
        free_index=np.flatnonzero(free).astype(np.int64),
        fixed_action=fixed_action,
        scale=((hi - lo) / 2).astype(np.float32),
        bias=((hi + lo) / 2).astype(np.float32),
        low=low32,
        high=high32,
        integer=integer,
    )


def to_env_action(action: torch.Tensor, space: gym.Space) -> np.ndarray:
    """A batch of policy actions -> the numpy actions a vector env of ``space`` takes.

    This is the env boundary: Box actions are reshaped to the space's shape, rounded for an
    integer dtype, clipped to ``[low, high]`` and cast to the space's dtype; Discrete and
    MultiDiscrete indices are cast to the space's dtype. The clip is exact (it runs in a dtype
    that holds both the action and the bounds, and casting to the space's dtype rounds
    monotonically, so it cannot leave them): a no-op for what the actor produced, except where
    no float32 lies inside the interval (a fixed 0.2 in a float64 Box).

    Args:
        action: ``[N, A]`` float Box actions (``A = prod(space.shape)``), ``[N]`` Discrete or
            ``[N, K]`` MultiDiscrete long actions (start included), or ``[N, n]`` MultiBinary bits, on any
            device (MultiBinary bits are reshaped to the space's shape and cast to int8), or ``[N, W]`` float rows
            of a Dict or Tuple space: its parts' columns side by side (:func:`action_parts`; a Discrete part's
            index plus start in one column, exact in float32 up to 2**24).
        space: the single (per sub-env) action space.

    Returns:
        ``[N, *space.shape]`` array of ``space.dtype``, every row inside the space; for a Dict or Tuple space, a
        dict or tuple of such arrays, nested as the space is (what gymnasium's vector envs take).
    """
    out = action.detach().cpu().numpy()
    if isinstance(space, COMPOSITES):
        return _composite_env_action(out, space)
    return _leaf_env_action(out, space)


def _leaf_env_action(out: np.ndarray, space: gym.Space) -> np.ndarray:
    """:func:`to_env_action` of a numpy batch of one leaf space (Box, Discrete, MultiDiscrete, MultiBinary)."""
    if isinstance(space, spaces.Box):
        out = out.reshape(out.shape[0], *space.shape)
        if space.dtype.kind in "iu" and out.dtype.kind == "f":
            out = np.rint(out)
        out = np.clip(out, space.low, space.high)
    elif isinstance(space, spaces.MultiBinary):
        out = out.reshape(out.shape[0], *space.shape)
    return out.astype(space.dtype, copy=False)


# ---------------------------------------------------------------------------------------------- composite actions

COMPOSITES = (spaces.Dict, spaces.Tuple)
LEAVES = (spaces.Box, spaces.Discrete, spaces.MultiDiscrete, spaces.MultiBinary)


class ActionPart(NamedTuple):
    """One leaf of a composite (Dict or Tuple) action space.

    Attributes:
        name: the part's name: its Dict key or Tuple index, nested ones joined by dots (``"kind"``, ``"0"``,
            ``"move.x"``); what ``policy.action_links`` names.
        path: the keys and indices from the top space down to the part.
        space: the part's own space (Box, Discrete, MultiDiscrete or MultiBinary).
        width: the part's columns in the policy's flat action row: ``prod(shape)`` for a Box, 1 for a Discrete,
            ``K`` for a MultiDiscrete, ``n`` bits for a MultiBinary.
    """

    name: str
    path: tuple[str | int, ...]
    space: gym.Space
    width: int


def action_width(space: gym.Space) -> int:
    """The columns a leaf space takes in a composite's flat action row (see :class:`ActionPart`)."""
    if isinstance(space, spaces.Discrete):
        return 1
    if isinstance(space, spaces.MultiDiscrete):
        return int(space.nvec.size)
    return int(np.prod(space.shape, dtype=np.int64))


def action_parts(space: gym.Space) -> list[ActionPart]:
    """The leaves of a Dict or Tuple action space, depth first in the space's own order (a Dict's key order).

    Raises:
        ConfigError: one line naming the space, for an empty Dict or Tuple, or a part that is neither a Dict, a
            Tuple, nor a Box, Discrete, MultiDiscrete or MultiBinary (a Text, Graph or Sequence part).
    """
    parts: list[ActionPart] = []

    def walk(sub: gym.Space, path: tuple[str | int, ...]) -> None:
        if isinstance(sub, COMPOSITES):
            items = sub.spaces.items() if isinstance(sub, spaces.Dict) else enumerate(sub.spaces)
            if not len(sub.spaces):
                raise ConfigError(f"unsupported action space {space_text(space)}: an empty {type(sub).__name__} "
                                  "has no action to learn")
            for key, child in items:
                walk(child, (*path, key))
        elif isinstance(sub, LEAVES):
            parts.append(ActionPart(".".join(map(str, path)), path, sub, action_width(sub)))
        else:
            where = ".".join(map(str, path))
            raise ConfigError(f"unsupported action space {space_text(space, 32)}: its part {clipped(where, 20)!r} is "
                              f"a {type(sub).__name__}, not a Box, Discrete, MultiDiscrete, MultiBinary, Dict or Tuple")

    walk(space, ())
    return parts


def action_row(action: np.ndarray | dict | tuple, row: int) -> np.ndarray | dict | tuple:
    """Row ``row`` of a batch of env actions (:func:`to_env_action`'s result), keeping a composite's structure."""
    if isinstance(action, dict):
        return {key: action_row(part, row) for key, part in action.items()}
    if isinstance(action, tuple):
        return tuple(action_row(part, row) for part in action)
    return action[row]


def _composite_env_action(out: np.ndarray, space: gym.Space) -> dict | tuple:
    """The flat float rows ``[N, W]`` of a composite action -> the structure the vector env takes: a Dict of
    batched parts (``{key: [N, ...]}``) or a tuple of them, nested as the space is, each part cast as
    :func:`to_env_action` casts a space of its kind."""
    leaves = action_parts(space)
    parts = iter(leaves)
    columns = iter(np.split(out, np.cumsum([p.width for p in leaves])[:-1], axis=1))

    def build(sub: gym.Space) -> Any:
        if isinstance(sub, spaces.Dict):
            return {key: build(child) for key, child in sub.spaces.items()}
        if isinstance(sub, spaces.Tuple):
            return tuple(build(child) for child in sub.spaces)
        part, column = next(parts), next(columns)
        if isinstance(part.space, spaces.Discrete):
            column = column[:, 0]
        if not isinstance(part.space, spaces.Box):
            column = np.rint(column).astype(np.int64)
        return _leaf_env_action(column, part.space)

    return build(space)
