"""One generic env for the fuzzer, built from a JSON spec, so that any generated env is importable by id.

``env.id = "tests.fuzz.fuzz_envs:Fuzz-v0"`` with ``env.kwargs = { spec = "<JSON>" }`` (registered on import;
a subprocess, ``eval`` and ``load_policy`` rebuild the same env from the saved config). The spec (see
``tests/fuzz/strategies.py``, which draws it):

- ``obs``, ``act``: spaces as nested JSON (:func:`space_from_spec`): ``{"type": "box", "shape", "dtype", "low",
  "high"}``, ``{"type": "discrete", "n", "start"}``, ``{"type": "multidiscrete", "nvec", "start"}``,
  ``{"type": "multibinary", "n"}``, ``{"type": "dict", "spaces": {...}}``, ``{"type": "tuple", "spaces": [...]}``;
- ``episodes``: a cycle of ``[length, end]`` with end ``"terminated"``, ``"truncated"`` or ``"both"``;
- ``reward_scale``: rewards are drawn from ``[-reward_scale, reward_scale]``; ``obs_scale``: how far an
  observation strays from the centre of an unbounded or huge Box;
- ``mask``: None, ``"info"``, ``"obs"`` (the observation becomes a Dict of ``"obs"`` and ``"action_mask"``) or
  ``"method"``; ``one_legal``: the chance that a mask row leaves a single legal action per component;
- ``fault``: None or ``{"kind", "at"}``: at the env's ``at``-th step (over its life) it ``"raise"``s, returns a
  ``"nan_reward"``, a ``"nan_obs"``, an ``"outside_obs"`` (of the right shape and dtype, outside the space) or a
  ``"wrong_shape_obs"``, or (with a mask) a mask ``"no_legal"`` action;
- ``enforce_mask``: false for a run told to ignore the mask (``env.action_mask = "none"``);
- ``seed``: the env's own draws (the library seeds its reset too).

Every action is checked: one outside the action space or illegal under the mask raises :class:`FuzzIllegalAction`,
which the fuzzer's checks treat as a bug of the library, never as an env's own fault.
"""

from __future__ import annotations

import json
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

MASK_KEY = "action_mask"


class FuzzIllegalAction(RuntimeError):
    """The library sent an action outside the space or against the mask."""


class FuzzEnvFault(RuntimeError):
    """The env's own planned fault (``fault.kind = "raise"``)."""


def space_from_spec(spec: dict[str, Any]) -> spaces.Space:
    """A gymnasium space from its JSON spec (see the module docstring)."""
    kind = spec["type"]
    if kind == "box":
        dtype = np.dtype(spec["dtype"])
        shape = tuple(spec["shape"])
        if dtype == np.bool_:
            return spaces.Box(0, 1, shape, np.bool_)
        low = np.broadcast_to(np.asarray(spec["low"], np.float64), shape)
        high = np.broadcast_to(np.asarray(spec["high"], np.float64), shape)
        if dtype.kind in "iu":
            info = np.iinfo(dtype)
            low = np.clip(low, info.min, info.max).astype(dtype)
            high = np.clip(high, info.min, info.max).astype(dtype)
        else:
            low, high = low.astype(dtype), high.astype(dtype)
        return spaces.Box(low, np.maximum(low, high), shape, dtype)  # rounding to the dtype keeps low <= high
    if kind == "discrete":
        return spaces.Discrete(spec["n"], start=spec.get("start", 0))
    if kind == "multidiscrete":
        return spaces.MultiDiscrete(spec["nvec"], start=spec.get("start"))
    if kind == "multibinary":
        return spaces.MultiBinary(spec["n"])
    if kind == "dict":
        return spaces.Dict({key: space_from_spec(sub) for key, sub in spec["spaces"].items()})
    if kind == "tuple":
        return spaces.Tuple([space_from_spec(sub) for sub in spec["spaces"]])
    raise ValueError(f"unknown space spec {spec!r}")


def mask_size(space: spaces.Space) -> int | None:
    if isinstance(space, spaces.Discrete):
        return int(space.n)
    if isinstance(space, spaces.MultiDiscrete):
        return int(np.sum(space.nvec))
    if isinstance(space, spaces.MultiBinary):
        return int(np.prod(space.shape))
    if isinstance(space, spaces.Dict | spaces.Tuple):
        return sum(components(space)) or None
    return None


def components(space: spaces.Space) -> list[int]:
    if isinstance(space, spaces.Discrete):
        return [int(space.n)]
    if isinstance(space, spaces.MultiDiscrete):
        return [int(n) for n in np.asarray(space.nvec).ravel()]
    if isinstance(space, spaces.Dict | spaces.Tuple):  # the Discrete and MultiDiscrete parts' masks, in order
        return [n for _, part in leaves(space) for n in components(part)]
    return []


def leaves(space: spaces.Space, path: tuple = ()) -> list[tuple[tuple, spaces.Space]]:
    """A composite action space's parts with their paths, depth first in the space's order."""
    if isinstance(space, spaces.Dict):
        return [leaf for key, sub in space.spaces.items() for leaf in leaves(sub, (*path, key))]
    if isinstance(space, spaces.Tuple):
        return [leaf for i, sub in enumerate(space.spaces) for leaf in leaves(sub, (*path, i))]
    return [(path, space)]


def at(action: Any, path: tuple) -> Any:
    for key in path:
        action = action[key]
    return action


def draw(space: spaces.Space, rng: np.random.Generator, scale: float) -> Any:
    """An observation inside ``space``: Box values within ``scale`` of the bounds' centre (all of a bounded,
    small Box)."""
    if isinstance(space, spaces.Box):
        if space.dtype == np.bool_:
            return rng.random(space.shape) < 0.5
        low, high = space.low.astype(np.float64), space.high.astype(np.float64)
        centre = np.clip(0.0, low, high)
        lo, hi = np.maximum(low, centre - scale), np.minimum(high, centre + scale)
        u = rng.random(np.shape(lo))
        value = np.asarray(lo * (1.0 - u) + hi * u)  # not rng.uniform(lo, hi): hi - lo may pass float64's range
        if space.dtype.kind in "iu":
            value = np.clip(np.rint(value), low, high)
        value = value.astype(space.dtype)
        return np.clip(value, space.low, space.high).astype(space.dtype)  # float rounding at a bound
    if isinstance(space, spaces.Discrete):
        return np.int64(space.start + rng.integers(space.n))
    if isinstance(space, spaces.MultiDiscrete):
        return (space.start + rng.integers(0, space.nvec)).astype(space.dtype)
    if isinstance(space, spaces.MultiBinary):
        return rng.integers(0, 2, space.shape).astype(np.int8)
    if isinstance(space, spaces.Dict):
        return {key: draw(sub, rng, scale) for key, sub in space.spaces.items()}
    if isinstance(space, spaces.Tuple):
        return tuple(draw(sub, rng, scale) for sub in space.spaces)
    raise TypeError(space)


def outside(space: spaces.Space, value: Any) -> Any:
    """``value`` moved outside ``space`` where the dtype allows (same shape and dtype)."""
    if isinstance(space, spaces.Box):
        if space.dtype.kind == "f":
            high = space.high.astype(np.float64)
            return np.where(np.isfinite(high), high * 2 + 1, np.nan).astype(space.dtype)
        if space.dtype.kind in "iu":
            info = np.iinfo(space.dtype)
            return np.where(space.high < info.max, space.high.astype(np.int64) + 1, info.min).astype(space.dtype)
        return value
    if isinstance(space, spaces.Discrete):
        return np.int64(space.start + space.n)
    if isinstance(space, spaces.MultiDiscrete):
        return (space.start + space.nvec).astype(space.dtype)
    if isinstance(space, spaces.MultiBinary):
        return np.full(space.shape, 2, np.int8)
    if isinstance(space, spaces.Dict):
        return {key: outside(sub, value[key]) for key, sub in space.spaces.items()}
    if isinstance(space, spaces.Tuple):
        return tuple(outside(sub, v) for sub, v in zip(space.spaces, value, strict=True))
    return value


def with_nan(space: spaces.Space, value: Any) -> Any:
    """``value`` with NaN in its float Box parts (unchanged where no part is a float Box)."""
    if isinstance(space, spaces.Box) and space.dtype.kind == "f":
        return np.full(space.shape, np.nan, space.dtype)
    if isinstance(space, spaces.Dict):
        return {key: with_nan(sub, value[key]) for key, sub in space.spaces.items()}
    if isinstance(space, spaces.Tuple):
        return tuple(with_nan(sub, v) for sub, v in zip(space.spaces, value, strict=True))
    return value


def wrong_shape(space: spaces.Space, value: Any) -> Any:
    if isinstance(space, spaces.Dict):
        key = next(iter(space.spaces))
        return {**value, key: wrong_shape(space.spaces[key], value[key])}
    if isinstance(space, spaces.Tuple):
        return (wrong_shape(space.spaces[0], value[0]), *value[1:])
    return np.zeros((*np.shape(value), 2), np.asarray(value).dtype)


class FuzzEnv(gym.Env):
    """The env a spec describes (module docstring)."""

    metadata = {"render_modes": ["rgb_array"]}  # noqa: RUF012 - gymnasium's class attribute

    def __init__(self, spec: str | dict, render_mode: str | None = None):
        self.spec_data = json.loads(spec) if isinstance(spec, str) else spec
        data = self.spec_data
        self.inner_space = space_from_spec(data["obs"])
        self.action_space = space_from_spec(data["act"])
        self.mask_mode = data.get("mask")
        self.size = mask_size(self.action_space)
        if self.mask_mode == "obs":  # beside a Dict's own keys, or beside "obs"
            parts = dict(self.inner_space.spaces) if isinstance(self.inner_space, spaces.Dict) \
                else {"obs": self.inner_space}
            self.observation_space = spaces.Dict({**parts, MASK_KEY: spaces.MultiBinary(self.size)})
        else:
            self.observation_space = self.inner_space
        self.episodes = [tuple(e) for e in data.get("episodes", [[16, "truncated"]])]
        self.reward_scale = float(data.get("reward_scale", 1.0))
        self.obs_scale = float(data.get("obs_scale", 1.0))
        self.one_legal = float(data.get("one_legal", 0.0))
        self.fault = data.get("fault")
        self.enforce_mask = data.get("enforce_mask", True)
        self.render_mode = render_mode
        self.rng = np.random.default_rng(data.get("seed", 0))
        self.total = 0  # steps over the env's life
        self.episode = 0
        self.t = 0
        self.mask = None if self.size is None else np.ones(self.size, bool)

    # -- masks
    def _draw_mask(self) -> None:
        if self.mask_mode is None:
            return
        rng, mask = self.rng, np.zeros(self.size, bool)
        sizes = components(self.action_space)
        if not sizes:  # MultiBinary: any bits may be forbidden
            mask[:] = rng.random(self.size) < (0.0 if rng.random() < self.one_legal else 0.6)
        else:
            start = 0
            for n in sizes:
                if rng.random() < self.one_legal:
                    mask[start + rng.integers(n)] = True
                else:
                    mask[start:start + n] = rng.random(n) < 0.6
                    mask[start + rng.integers(n)] = True
                start += n
        if self._fault_now("no_legal"):
            mask[:] = False
        self.mask = mask

    # -- faults
    def _fault_now(self, kind: str) -> bool:
        return self.fault is not None and self.fault["kind"] == kind and self.total == self.fault["at"]

    def _obs(self) -> Any:
        value = draw(self.inner_space, self.rng, self.obs_scale)
        if self._fault_now("nan_obs"):
            value = with_nan(self.inner_space, value)
        if self._fault_now("outside_obs"):
            value = outside(self.inner_space, value)
        if self._fault_now("wrong_shape_obs"):
            value = wrong_shape(self.inner_space, value)
        if self.mask_mode == "obs":
            parts = dict(value) if isinstance(self.inner_space, spaces.Dict) else {"obs": value}
            return {**parts, MASK_KEY: self.mask.astype(np.int8)}
        return value

    def _info(self) -> dict:
        return {MASK_KEY: self.mask.copy()} if self.mask_mode == "info" else {}

    # -- the API
    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        if seed is not None:
            self.rng = np.random.default_rng([seed, self.spec_data.get("seed", 0)])
        self.t = 0
        self._draw_mask()
        return self._obs(), self._info()

    def _check_action(self, action: Any) -> None:
        space = self.action_space
        if not space.contains(action):
            raise FuzzIllegalAction(f"action {action!r} outside {space}")
        if self.mask_mode is None or not self.enforce_mask:
            return
        if isinstance(space, spaces.Dict | spaces.Tuple):  # the masked parts' values side by side
            parts = [(at(action, path), sub) for path, sub in leaves(space) if components(sub)]
            flat = np.concatenate([np.asarray(value).ravel() for value, _ in parts])
            start = np.concatenate([np.asarray(sub.start).ravel() for _, sub in parts])
        else:
            flat, start = np.asarray(action).ravel(), np.asarray(getattr(space, "start", 0)).ravel()
        if isinstance(space, spaces.MultiBinary):
            if np.any(flat.astype(bool) & ~self.mask):
                raise FuzzIllegalAction(f"bits {flat.tolist()} against the mask {self.mask.astype(int).tolist()}")
            return
        offsets = np.concatenate([[0], np.cumsum(components(space))[:-1]]).astype(np.int64)
        index = flat.astype(np.int64) - start.astype(np.int64) + offsets
        if not np.all(self.mask[index]):
            raise FuzzIllegalAction(f"action {flat.tolist()} against the mask {self.mask.astype(int).tolist()}")

    def step(self, action: Any):
        self._check_action(action)
        self.total += 1
        self.t += 1
        if self._fault_now("raise"):
            raise FuzzEnvFault(f"planned fault at step {self.total}")
        length, end = self.episodes[self.episode % len(self.episodes)]
        terminated = self.t >= length and end in ("terminated", "both")
        truncated = self.t >= length and end in ("truncated", "both")
        if terminated or truncated:
            self.episode += 1
        reward = float(self.rng.uniform(-1.0, 1.0) * self.reward_scale)
        if self._fault_now("nan_reward"):
            reward = float("nan")
        self._draw_mask()
        return self._obs(), reward, terminated, truncated, self._info()

    def render(self):
        return np.zeros((16, 16, 3), np.uint8)


class FuzzMethodMaskEnv(FuzzEnv):
    """A :class:`FuzzEnv` whose mask comes from ``action_masks()`` (``mask = "method"``); the others have no
    such method, as ``env.action_mask = "auto"`` must find none on them."""

    def action_masks(self) -> np.ndarray:
        return self.mask.copy()


def make(spec: str | dict, **kwargs: Any) -> FuzzEnv:
    """The env of ``spec``: a :class:`FuzzMethodMaskEnv` for the method convention, else a :class:`FuzzEnv`."""
    data = json.loads(spec) if isinstance(spec, str) else spec
    return (FuzzMethodMaskEnv if data.get("mask") == "method" else FuzzEnv)(data, **kwargs)


gym.register("Fuzz-v0", entry_point=make)
