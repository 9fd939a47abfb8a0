"""Invalid-action masks at the env boundary: where an env puts them, and their checks.

Three conventions are in use, chosen by ``env.action_mask`` (default ``"auto"``):

- ``"info"``: ``info["action_mask"]`` on reset and on every step (gymnasium's Taxi);
- ``"obs"``: a Dict observation key ``"action_mask"`` (PettingZoo's classic games and many custom
  envs). The key is read as the mask and removed from the observation space the policy sees, so it
  never reaches an encoder;
- ``"method"``: an ``action_masks()`` method of the env (sb3-contrib's ``ActionMasker`` and
  ``InvalidActionEnv*``), called through the vector env (``VectorEnv.call``) after every reset and
  step;
- ``"none"``: no masks.

``"auto"`` takes ``"obs"`` when the observation space is a Dict with that key, else ``"method"``
when the env has ``action_masks``, else ``"info"`` when the first reset's info holds
``"action_mask"``, else none. Masks are only for Discrete, MultiDiscrete and MultiBinary actions.

Layout of one sub-env's mask (True = legal):

- Discrete(n): ``[n]``;
- MultiDiscrete(nvec): the K component masks concatenated, ``[sum(nvec)]`` (sb3-contrib's layout);
- MultiBinary(n): ``[n]``, True where the bit may be set (a forbidden bit is always 0).

Its dtype is bool, or an integer dtype holding only 0 and 1 (Taxi's int8). The vector env hands the
trainer ``[N, A]`` bool tensors on the device.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces

MASK_KEY = "action_mask"
METHOD = "action_masks"
SOURCES = ("auto", "none", "info", "obs", "method")
PENDING_INFO = "auto-info"  # "auto" that found neither key nor method: decided by the first reset's info


class MaskError(ValueError):
    """A mask of the wrong shape, dtype or values, or a convention that finds no mask (one line)."""


def mask_size(space: spaces.Space) -> int | None:
    """The size ``A`` of one sub-env's mask for an action space; None for a space that takes no mask."""
    if isinstance(space, spaces.Discrete):
        return int(space.n)
    if isinstance(space, spaces.MultiDiscrete):
        return int(np.sum(space.nvec))
    if isinstance(space, spaces.MultiBinary):
        return int(np.prod(space.shape, dtype=np.int64))
    return None


def component_sizes(space: spaces.Space) -> list[int]:
    """The mask's components: ``[n]``, ``nvec``, or ``[]`` for MultiBinary (every mask is legal there)."""
    if isinstance(space, spaces.Discrete):
        return [int(space.n)]
    if isinstance(space, spaces.MultiDiscrete):
        return [int(n) for n in space.nvec]
    return []


def has_mask_key(space: spaces.Space) -> bool:
    return isinstance(space, spaces.Dict) and MASK_KEY in space.spaces


def without_mask_key(space: spaces.Space) -> spaces.Space:
    """A Dict observation space without its ``"action_mask"`` key (the space the policy sees)."""
    if not has_mask_key(space):
        return space
    kept = {k: v for k, v in space.spaces.items() if k != MASK_KEY}
    if not kept:
        raise MaskError(f"the observation space {space} holds only {MASK_KEY!r}: there is nothing to observe")
    return spaces.Dict(kept)


def has_method(vector_env: Any) -> bool:
    """Whether the sub-envs have ``action_masks`` (asked through ``call("has_wrapper_attr", ...)``)."""
    try:
        return bool(vector_env.call("has_wrapper_attr", METHOD)[0])
    except Exception:  # a vector env without call (a C++ pool) or a sub-env that cannot say
        return False


def resolve_source(setting: str, vector_env: Any, observation_space: spaces.Space,
                   action_space: spaces.Space) -> str | None:
    """The convention to read masks with: ``"info"``, ``"obs"``, ``"method"``, :data:`PENDING_INFO`, or None.

    Raises:
        MaskError: an explicit convention that finds no mask (no Dict key, no method), or masks asked
            for an action space that takes none (Box).
    """
    if setting == "none":
        return None
    size = mask_size(action_space)
    if setting == "auto":
        if size is None:
            return None
        if has_mask_key(observation_space):
            return "obs"
        if has_method(vector_env):
            return "method"
        return PENDING_INFO
    if size is None:
        raise MaskError(f"env.action_mask = {setting!r}: action masks need a Discrete, MultiDiscrete or MultiBinary "
                        f"action space, not {action_space}")
    if setting == "obs" and not has_mask_key(observation_space):
        raise MaskError(f"env.action_mask = 'obs' needs a Dict observation with key {MASK_KEY!r}; the env's "
                        f"observation space is {observation_space}")
    if setting == "method" and not has_method(vector_env):
        raise MaskError(f"env.action_mask = 'method' needs an {METHOD}() method on the env; it has none")
    return setting


def read_mask(source: str, obs: Any, info: dict, vector_env: Any, num_envs: int) -> Any:
    """The raw batched mask of one reset or step, as the convention gives it.

    Raises:
        MaskError: the convention finds no mask (info without the key, a sub-env without it).
    """
    if source == "obs":
        return obs[MASK_KEY]
    if source == "method":
        return np.stack([np.asarray(m) for m in vector_env.call(METHOD)])
    if MASK_KEY not in info:
        raise MaskError(f"env.action_mask = 'info': the env's info has no {MASK_KEY!r} key "
                        f"(info keys: {sorted(k for k in info if not k.startswith('_'))})")
    present = info.get(f"_{MASK_KEY}")
    if present is not None and not np.all(present):
        missing = int(np.flatnonzero(~np.asarray(present, dtype=bool))[0])
        raise MaskError(f"env.action_mask = 'info': sub-env {missing} gave no info[{MASK_KEY!r}]")
    return info[MASK_KEY]


def check_mask(raw: Any, num_envs: int, size: int) -> np.ndarray:
    """A raw batched mask -> ``[N, A]`` bool, after checking its shape, dtype and values.

    Raises:
        MaskError: one line naming the shape or dtype found and the one expected.
    """
    try:
        mask = np.asarray(raw)
    except Exception:
        raise MaskError(f"an action mask must be an array of shape [{size}], got {type(raw).__name__}") from None
    if mask.dtype == object:  # gymnasium stacks info values it cannot stack as an object array
        try:
            mask = np.stack([np.asarray(m) for m in mask])
        except Exception:
            raise MaskError(f"the action masks of the sub-envs have different shapes; each must be [{size}]") from None
    if mask.shape != (num_envs, size):
        raise MaskError(f"an action mask has shape {list(mask.shape[1:])} (batched {list(mask.shape)}); this action "
                        f"space needs [{size}] per sub-env (MultiDiscrete: the component masks concatenated)")
    if mask.dtype == bool:
        return mask
    if mask.dtype.kind in "iu":
        if not np.all((mask == 0) | (mask == 1)):
            raise MaskError(f"an action mask of dtype {mask.dtype} holds values other than 0 and 1")
        return mask.astype(bool)
    raise MaskError(f"an action mask must be bool (or integer 0/1), got dtype {mask.dtype}")


def first_without_legal_action(mask: np.ndarray, sizes: list[int]) -> int | None:
    """The first sub-env whose mask leaves some component with no legal action (None: every one has one)."""
    if not sizes:
        return None
    start, bad = 0, np.zeros(len(mask), dtype=bool)
    for n in sizes:
        bad |= ~mask[:, start:start + n].any(axis=1)
        start += n
    rows = np.flatnonzero(bad)
    return int(rows[0]) if len(rows) else None
