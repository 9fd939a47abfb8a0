"""Invalid-action masks at the env boundary: where an env puts them, and their checks, written once for every
backend (gymnasium and the backends built on it, pettingzoo), inference and export.

Three conventions are in use, chosen by ``env.action_mask`` (default ``"auto"``):

- ``"info"``: ``info["action_mask"]`` on reset and on every step (gymnasium's Taxi; with PettingZoo,
  ``info[agent]["action_mask"]``);
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
A near miss that "auto" would otherwise pass over in silence (``info["action_masks"]``, an observation key
``"legal_actions"`` of the mask's size, a method ``action_mask()``: :func:`near_miss`) is refused with a
did-you-mean, and :func:`announce` is the start-up line saying what was found.

Layout of one sub-env's mask (True = legal):

- Discrete(n): ``[n]``;
- MultiDiscrete(nvec): the K component masks concatenated, ``[sum(nvec)]`` (sb3-contrib's layout);
- MultiBinary(n): ``[n]``, True where the bit may be set (a forbidden bit is always 0).

Its dtype is bool, or an integer dtype holding only 0 and 1 (Taxi's int8). The vector env hands the
trainer ``[N, A]`` bool tensors on the device.

The functions every caller goes through:

- :func:`resolve_source` (at construction) and :func:`settle_source` (at the first reset): the one
  resolver of the convention, refusing near misses (:func:`near_miss`). What a backend does not offer is data
  it passes (``refused``; no ``vector_env``: no ``"method"``), not a resolver of its own;
- :func:`read_mask`: the raw mask of one reset or step, by the convention;
- :func:`check_mask`: the one checker (shape, dtype and values -> ``[N, A]`` bool; a row with no legal
  action is a :class:`NoLegalAction` naming the row and, with :func:`moment`, when), with
  :func:`env_error` turning an env's mask errors into a run's ConfigError or TrainingError;
- :func:`require_mask`: a policy trained with masks is given none.

The masked maths itself (logits, log-probabilities, entropies) is pure and lives in ``core.masks``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
from gymnasium import spaces

from shell.actions import COMPOSITES, action_parts
from shell.errors import ConfigError, TrainingError, space_text

MASK_KEY = "action_mask"
METHOD = "action_masks"
SOURCES = ("auto", "none", "info", "obs", "method")
PENDING_INFO = "auto-info"  # "auto" that found neither key nor method: decided by the first reset's info
#: how each convention names the mask, in messages
WHERE = {"info": f"info[{MASK_KEY!r}]", "obs": f"obs[{MASK_KEY!r}]", "method": f"{METHOD}()"}
# Near misses (:func:`near_miss`), compared in lower case with letters only. A name one edit from the expected
# one is a near miss whatever it holds; one of these others (other libraries' names) only where its size fits.
_OTHER_KEYS = frozenset({"mask", "masks", "actionsmasks", "legalactions", "legalactionmask", "legalactionsmask",
                         "legalmoves", "legalmask", "validactions", "validactionmask", "validactionsmask",
                         "validmask", "availableactions", "availableactionsmask", "availactions",
                         "availactionsmask"})
#: near misses of ``action_masks()`` asked of the sub-envs, in order
_NEAR_METHODS = ("action_mask", "actions_mask", "actionMasks", "actionMask", "get_action_mask", "get_action_masks",
                 "valid_action_mask", "legal_action_mask", "get_avail_actions", "get_legal_actions", "legal_actions",
                 "valid_actions")


class MaskError(ValueError):
    """A mask of the wrong shape, dtype or values, or a convention that finds no mask (one line)."""


class NoLegalAction(MaskError):
    """A mask that leaves some component of a row with no legal action (one line naming the row)."""


def mask_size(space: spaces.Space) -> int | None:
    """The size ``A`` of one sub-env's mask for an action space; None for a space that takes no mask."""
    if isinstance(space, spaces.Discrete):
        return int(space.n)
    if isinstance(space, spaces.MultiDiscrete):
        return int(np.sum(space.nvec))
    if isinstance(space, spaces.MultiBinary):
        return int(np.prod(space.shape, dtype=np.int64))
    if isinstance(space, COMPOSITES):  # its Discrete and MultiDiscrete parts' masks, concatenated in order
        sizes = component_sizes(space)
        return sum(sizes) if sizes else None
    return None


def component_sizes(space: spaces.Space) -> list[int]:
    """The mask's components: ``[n]``, ``nvec``, or ``[]`` for MultiBinary (every mask is legal there)."""
    if isinstance(space, spaces.Discrete):
        return [int(space.n)]
    if isinstance(space, spaces.MultiDiscrete):
        return [int(n) for n in space.nvec]
    if isinstance(space, COMPOSITES):
        return [n for part in action_parts(space) for n in component_sizes(part.space)]
    return []


def has_mask_key(space: spaces.Space) -> bool:
    return isinstance(space, spaces.Dict) and MASK_KEY in space.spaces


def without_mask_key(space: spaces.Space) -> spaces.Space:
    """A Dict observation space without its ``"action_mask"`` key (the space the policy sees)."""
    if not has_mask_key(space):
        return space
    kept = {k: v for k, v in space.spaces.items() if k != MASK_KEY}
    if not kept:
        raise MaskError(f"the observation space {space_text(space)} holds only {MASK_KEY!r}: there is nothing to "
                        "observe")
    return spaces.Dict(kept)


def has_method(vector_env: Any) -> bool:
    """Whether the sub-envs have ``action_masks`` (asked through ``call("has_wrapper_attr", ...)``)."""
    try:
        return bool(vector_env.call("has_wrapper_attr", METHOD)[0])
    except Exception:  # a vector env without call (a C++ pool) or a sub-env that cannot say
        return False


def resolve_source(setting: str, action_space: spaces.Space, observation_space: spaces.Space, *,
                   vector_env: Any = None, refused: Mapping[str, str] | None = None,
                   observation: str = "the env's observation space") -> str | None:
    """The convention to read masks with: ``"info"``, ``"obs"``, ``"method"``, :data:`PENDING_INFO`, or None.

    :data:`PENDING_INFO` ("auto" that found neither the key nor the method) is decided by the first
    reset's info, :func:`settle_source`.

    Args:
        setting: ``env.action_mask`` (one of :data:`SOURCES`).
        action_space: one sub-env's (one agent's) action space.
        observation_space: one sub-env's (one agent's) observation space, before the mask key is removed.
        vector_env: the vector env asked (lazily) for an ``action_masks()`` method; None: the backend
            has no such method, and "auto" never takes ``"method"``.
        refused: the conventions this backend does not offer, each with the rest of its one-line
            refusal (``{"method": "is for gymnasium envs; ..."}``).
        observation: what the observation space is called in a message.

    Raises:
        MaskError: an explicit convention that finds no mask (no Dict key, no method) or that the backend
            refuses, or masks asked for an action space that takes none (Box).
    """
    if setting == "none":
        return None
    if mask_size(action_space) is None:
        if setting == "auto":
            return None
        raise MaskError(f"env.action_mask = {setting!r}: action masks need a Discrete, MultiDiscrete or MultiBinary "
                        f"action space, not {space_text(action_space)}")
    refused = refused or {}
    if setting in refused:
        raise MaskError(f"env.action_mask = {setting!r} {refused[setting]}")
    if setting == "auto":
        if has_mask_key(observation_space):
            return "obs"
        if "method" not in refused and vector_env is not None and has_method(vector_env):
            return "method"
        return PENDING_INFO
    if setting == "obs" and not has_mask_key(observation_space):
        near = _near_key(_subspaces(observation_space), action_space)
        raise MaskError(f"env.action_mask = 'obs' needs a Dict observation with key {MASK_KEY!r}; {observation} "
                        f"is {space_text(observation_space, 40)}{_did_you_mean(near)}")
    if setting == "method" and not (vector_env is not None and has_method(vector_env)):
        near = _near_method(vector_env)
        raise MaskError(f"env.action_mask = 'method' needs an {METHOD}() method on the env; it has none"
                        f"{_did_you_mean(near and near + '()', METHOD + '()')}")
    return setting


def settle_source(source: str | None, first_info: Mapping[str, Any] | None, action_space: spaces.Space | None = None,
                  observation_space: spaces.Space | None = None, vector_env: Any = None) -> str | None:
    """The convention once the first reset's info is known: :data:`PENDING_INFO` becomes ``"info"`` when
    ``first_info`` (the vector env's info; PettingZoo: the first agent's) holds :data:`MASK_KEY`, else None;
    any other source is returned as it is.

    Args:
        source: what :func:`resolve_source` returned.
        first_info: the first reset's info.
        action_space, observation_space, vector_env: as :func:`resolve_source` had them; given (the action
            space at least), a None is first checked for near misses (:func:`near_miss`).

    Raises:
        MaskError: "auto" found no mask but a near miss (one line with a did-you-mean).
    """
    if source != PENDING_INFO:
        return source
    if first_info and MASK_KEY in first_info:
        return "info"
    if action_space is not None:
        miss = near_miss(action_space, first_info, observation_space, vector_env)
        if miss is not None:
            raise MaskError(miss)
    return None


def near_miss(action_space: spaces.Space, info: Mapping[str, Any] | None, observation_space: spaces.Space | None,
              vector_env: Any = None) -> str | None:
    """What "auto" would pass over in silence, as a one-line refusal with a did-you-mean; None: nothing.

    A near miss is an info key or a Dict observation key one edit from ``"action_mask"`` (``"action_masks"``,
    ``"actionMask"``), or another library's name for a mask (``"legal_actions"``, ``"valid_action_mask"``,
    ``"avail_actions"``, ``"mask"``) whose size is the mask's; or a method one edit from ``action_masks``
    (``action_mask()``) or another library's (``valid_action_mask()``, ``get_avail_actions()``).

    Args:
        action_space: one sub-env's (agent's) action space (the mask's size ``A``).
        info: the first reset's info (batched values: ``[N, A]``), or None.
        observation_space: one sub-env's (agent's) observation space, or None.
        vector_env: the vector env asked for the methods (``call("has_wrapper_attr", name)``), or None.
    """
    if mask_size(action_space) is None:
        return None
    unmasked = "env.action_mask = 'none' trains unmasked"
    key = _near_key({k: v for k, v in (info or {}).items() if isinstance(k, str) and not k.startswith("_")},
                    action_space)
    if key is not None:
        return (f"info has {key!r}, not {MASK_KEY!r}: did you mean {WHERE['info']} (env.action_mask = 'info')? "
                f"{unmasked}")
    key = _near_key(_subspaces(observation_space), action_space)
    if key is not None:
        return (f"the observation has key {key!r}, not {MASK_KEY!r}: did you mean {WHERE['obs']} "
                f"(env.action_mask = 'obs')? {unmasked}")
    method = _near_method(vector_env)
    if method is not None:
        return (f"the env has {method}(), not {METHOD}(): did you mean {WHERE['method']} (env.action_mask = "
                f"'method')? {unmasked}")
    return None


def announce(setting: str, sources: Mapping[Any, str | None], action_spaces: Mapping[Any, spaces.Space]) -> str | None:
    """The start-up line saying where a run's action masks come from, or that none were found: ``"action masks:
    info['action_mask'] (env.action_mask = 'auto')"``; per lane (group) where lanes differ. None where no
    lane's action space takes a mask, or for ``env.action_mask = "none"``.

    Args:
        setting: ``env.action_mask``.
        sources: each lane's settled source (``LaneEnv.mask_sources()``, after the first reset).
        action_spaces: each lane's action space, keyed as ``sources``.
    """
    lanes = [name for name in sources if mask_size(action_spaces[name]) is not None]
    if setting == "none" or not lanes:
        return None

    def said(source: str | None) -> str:
        return WHERE.get(source or "", f"none found (no {WHERE['obs']}, {WHERE['method']} or {WHERE['info']}), "
                                       "training unmasked")

    if len({sources[name] for name in lanes}) == 1:
        found = said(sources[lanes[0]])
    else:
        found = "; ".join(f"group {name!r}: {said(sources[name])}" for name in lanes)
    return f"action masks: {found} (env.action_mask = {setting!r})"


def _letters(name: str) -> str:
    return re.sub(r"[^a-z]", "", name.lower())


def _one_edit(a: str, b: str) -> bool:
    """Whether ``a`` and ``b`` differ by at most one insertion, deletion, substitution or swap of neighbours."""
    if a == b:
        return True
    if abs(len(a) - len(b)) > 1:
        return False
    if len(a) == len(b):
        diff = [i for i in range(len(a)) if a[i] != b[i]]
        return len(diff) == 1 or (len(diff) == 2 and diff[1] == diff[0] + 1 and a[diff[0]] == b[diff[1]]
                                  and a[diff[1]] == b[diff[0]])
    short, long = sorted((a, b), key=len)
    return any(long[:i] + long[i + 1:] == short for i in range(len(long)))


def _size_fits(value: Any, size: int) -> bool:
    """Whether ``value`` (a space or a value) could hold masks of ``size`` (rows of it)."""
    shape = getattr(value, "shape", None)
    if shape is None:
        try:
            shape = np.shape(value)
        except Exception:
            return False
    count = int(np.prod(shape, dtype=np.int64)) if shape else 0
    return count > 0 and count % size == 0


def _near_key(keys: Mapping[str, Any], action_space: spaces.Space) -> str | None:
    """The first of ``keys`` (name -> value or space) that is a near miss of :data:`MASK_KEY` (:func:`near_miss`)."""
    size = mask_size(action_space)
    for key, value in keys.items():
        name = _letters(key)
        if key != MASK_KEY and (_one_edit(name, _letters(MASK_KEY))
                                or (name in _OTHER_KEYS and size is not None and _size_fits(value, size))):
            return key
    return None


def _subspaces(space: spaces.Space | None) -> dict[str, spaces.Space]:
    return {k: v for k, v in space.spaces.items() if isinstance(k, str)} if isinstance(space, spaces.Dict) else {}


def _near_method(vector_env: Any) -> str | None:
    """The first near miss of :data:`METHOD` that the sub-envs have (:func:`near_miss`); None without a vector env."""
    if vector_env is None:
        return None
    for name in _NEAR_METHODS:
        try:
            if vector_env.call("has_wrapper_attr", name)[0]:
                return name
        except Exception:  # as in has_method: a vector env that cannot say
            return None
    return None


def _did_you_mean(found: str | None, expected: str = repr(MASK_KEY)) -> str:
    """`` (it has 'action_masks': did you mean 'action_mask'?)`` for a key (a method: ``found`` and ``expected``
    written as they are), or nothing where ``found`` is None."""
    if found is None:
        return ""
    return f" (it has {found if found.endswith('()') else repr(found)}: did you mean {expected}?)"


def read_mask(source: str, obs: Any, info: Mapping[str, Any], vector_env: Any = None, *,
              whose_info: str = "the env's info", action_space: spaces.Space | None = None) -> Any:
    """The raw batched mask of one reset or step (PettingZoo: of one agent), as the convention gives it.

    Args:
        source: ``"obs"`` (``obs[MASK_KEY]``), ``"info"`` (``info[MASK_KEY]``) or ``"method"`` (``action_masks()``
            of every sub-env of ``vector_env``, stacked).
        whose_info: what ``info`` is called in a message.
        action_space: one row's action space: an info without the key is searched for a near miss (the message
            then has a did-you-mean).

    Raises:
        MaskError: the convention finds no mask (info without the key, a sub-env without it).
        Exception: whatever the env's ``action_masks()`` raised.
    """
    if source == "obs":
        return obs[MASK_KEY]
    if source == "method":
        return np.stack([np.asarray(m) for m in vector_env.call(METHOD)])
    if info.get(MASK_KEY) is None:
        keys = [str(k) for k in info if not str(k).startswith("_")]
        near = _near_key({k: info[k] for k in keys if k in info}, action_space) if action_space is not None else None
        raise MaskError(f"env.action_mask = 'info': {whose_info} has no {MASK_KEY!r} key "
                        f"(info keys: {sorted(keys)}){_did_you_mean(near)}")
    present = info.get(f"_{MASK_KEY}")
    if present is not None and not np.all(present):
        missing = int(np.flatnonzero(~np.asarray(present, dtype=bool))[0])
        raise MaskError(f"env.action_mask = 'info': sub-env {missing} gave no info[{MASK_KEY!r}]")
    return info[MASK_KEY]


def _row(i: int) -> str:
    return f"row {i}"


def check_mask(raw: Any, num_rows: int, action_space: spaces.Space, *, ignored: np.ndarray | None = None,
               row: Callable[[int], str] = _row, where: str = "") -> np.ndarray:
    """A raw batched mask -> ``[N, A]`` bool, after checking its shape, dtype and values, and that every row
    leaves each component a legal action.

    Args:
        raw: the mask of ``num_rows`` rows (an array-like ``[N, A]``, or an object array of N rows).
        num_rows: ``N``.
        action_space: one row's action space (its mask size and components).
        ignored: ``[N]`` bool, rows whose action is ignored (a dummy step's): their mask becomes all true
            (on a copy) before the legal-action check, so that a stale mask does not matter.
        row: names row i in a message (``"sub-env 3"``, ``"agent 'a' of copy 2"``).
        where: when the mask was read, for a message (``"on reset"``, ``"at vector step 7"``).

    Raises:
        MaskError: one line naming the shape or dtype found and the one expected, or an action space that
            takes no mask.
        NoLegalAction: a row that leaves a component with no legal action (one line naming the row and ``where``).
    """
    size = mask_size(action_space)
    if size is None:
        raise MaskError(f"the action space {space_text(action_space)} takes no action mask")
    try:
        mask = np.asarray(raw)
    except Exception:
        raise MaskError(f"an action mask must be an array of shape [{size}], got {type(raw).__name__}") from None
    if mask.dtype == object:  # gymnasium stacks info values it cannot stack as an object array
        try:
            mask = np.stack([np.asarray(m) for m in mask])
        except Exception:
            raise MaskError(f"the action masks of the sub-envs have different shapes; each must be [{size}]") from None
    if mask.shape != (num_rows, size):
        raise MaskError(f"an action mask has shape {list(mask.shape[1:])} (batched {list(mask.shape)}); this action "
                        f"space needs [{size}] per sub-env (MultiDiscrete: the component masks concatenated)")
    if mask.dtype.kind in "iu":
        if not np.all((mask == 0) | (mask == 1)):
            raise MaskError(f"an action mask of dtype {mask.dtype} holds values other than 0 and 1")
        mask = mask.astype(bool)
    elif mask.dtype != bool:
        raise MaskError(f"an action mask must be bool (or integer 0/1), got dtype {mask.dtype}")
    if ignored is not None and ignored.any():
        mask = mask.copy()
        mask[ignored] = True
    bad = _first_without_legal_action(mask, component_sizes(action_space))
    if bad is not None:
        raise NoLegalAction(f"{row(bad)} has no legal action{' ' + where if where else ''} (its action mask leaves "
                            "a component all false); every state needs a legal action")
    return mask


def _first_without_legal_action(mask: np.ndarray, sizes: list[int]) -> int | None:
    """The first row whose mask leaves some component with no legal action (None: every one has one)."""
    if not sizes:
        return None
    start, bad = 0, np.zeros(len(mask), dtype=bool)
    for n in sizes:
        bad |= ~mask[:, start:start + n].any(axis=1)
        start += n
    rows = np.flatnonzero(bad)
    return int(rows[0]) if len(rows) else None


def moment(at_reset: bool, step: int) -> str:
    """When an env's mask was read, for :func:`check_mask`'s ``where``: ``"on reset"`` or ``"at vector step 7"``."""
    return "on reset" if at_reset else f"at vector step {step}"


def env_error(exc: MaskError, env: str, at_reset: bool, step: int) -> ConfigError | TrainingError:
    """An env's mask error as the run reports it, one line naming the env: a bad or missing mask on a reset
    is a ConfigError (exit 2); the same at a step (vector step ``step``), and a state with no legal action
    anywhere, is a TrainingError (exit 1)."""
    if isinstance(exc, NoLegalAction):
        return TrainingError(f"env {env}: {exc}")
    if at_reset:
        return ConfigError(f"env {env}: {exc}")
    return TrainingError(f"env {env}: {exc} ({moment(False, step)})")


def require_mask(policy: Any, mask: Any, given_by: str, remedy: str = "",
                 error: type[Exception] = MaskError) -> None:
    """A policy trained with action masks (its ``action_mask_source`` is not None) acts only with one.

    Args:
        policy: the policy module; ``action_mask_source`` is the convention it was trained with (None: none).
        mask: the mask it is given (None: none).
        given_by: what gave none, for the message (``"the evaluation env 'Taxi-v3'"``, ``"this call"``).
        remedy: the rest of the message (``": pass action_mask=..."``).
        error: the exception raised (ConfigError where a run's config is at fault).

    Raises:
        error: ``mask`` is None for such a policy (one line).
    """
    source = policy.action_mask_source
    if mask is None and source is not None:
        raise error(f"the policy was trained with action masks (env.action_mask = {source!r}) but {given_by} "
                    f"gives none{remedy}")
