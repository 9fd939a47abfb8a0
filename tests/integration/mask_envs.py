"""Envs with invalid actions for the mask tests; each raises on an illegal action.

Usable as ``tests.integration.mask_envs:NAME`` (registered on import), with ``env.kwargs``:

- ``convention``: ``"info"`` (info["action_mask"]), ``"obs"`` (a Dict key "action_mask") or ``"method"``
  (``action_masks()``);
- ``space``: ``"discrete"`` (Discrete(6)), ``"multidiscrete"`` (MultiDiscrete([3, 4])) or ``"multibinary"``
  (MultiBinary(4));
- ``no_legal_at``: the step (counted over the env's life, across episodes) whose mask has no legal
  action (an env bug);
- ``bad_mask``: ``"shape"`` or ``"dtype"``: masks of the wrong shape or dtype from the start;
- ``drop_mask_at``: the step (counted over the env's life) from which info holds no mask (``"info"`` only);
- ``mask_name``: the info or observation key the mask is given under (a near miss: ``"action_masks"``); with
  ``convention = "method"``, the method's name (``"action_mask"``; default: the key ``"action_mask"``, the method
  ``action_masks``).
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
from gymnasium import spaces


class IllegalAction(RuntimeError):
    pass


class MaskedPickEnv(gym.Env):
    """Each step shows a target action (always legal) among random legal ones; reward 1 for picking it.

    Discrete(6): 3 legal actions per step. MultiDiscrete([3, 4]): per component, the target and one more
    legal (reward: the fraction of components right). MultiBinary(4): half the bits may be set; the target
    sets some of those (reward: the fraction of bits right). Episodes last 16 steps (truncated).
    """

    def __init__(self, convention: str = "info", space: str = "discrete", no_legal_at: int | None = None,
                 bad_mask: str | None = None, length: int = 16, mask_name: str = "action_mask",
                 drop_mask_at: int | None = None):
        self.convention, self.kind, self.no_legal_at, self.bad_mask, self.length = (
            convention, space, no_legal_at, bad_mask, length)
        self.mask_name, self.drop_mask_at = mask_name, drop_mask_at
        if space == "discrete":
            self.action_space = spaces.Discrete(6)
            self.sizes, self.mask_len = [6], 6
        elif space == "multidiscrete":
            self.action_space = spaces.MultiDiscrete([3, 4])
            self.sizes, self.mask_len = [3, 4], 7
        else:
            self.action_space = spaces.MultiBinary(4)
            self.sizes, self.mask_len = [], 4
        vector = spaces.Box(0.0, 1.0, (self.mask_len,), np.float32)
        if convention == "obs":
            self.observation_space = spaces.Dict({"target": vector, mask_name: spaces.MultiBinary(self.mask_len)})
        else:
            self.observation_space = vector
        self.t = 0
        self.total = 0  # steps over the env's life

    def _draw(self) -> None:
        rng = self.np_random
        mask = np.zeros(self.mask_len, dtype=bool)
        target = np.zeros(self.mask_len, dtype=np.float32)
        if self.kind == "multibinary":
            mask[rng.permutation(4)[:2]] = True
            self.target_bits = mask & (rng.random(4) < 0.5)
            target[:] = self.target_bits
        else:
            start = 0
            self.target = []
            for n in self.sizes:
                legal = rng.permutation(n)[: 3 if self.kind == "discrete" else 2]
                mask[start + legal] = True
                self.target.append(int(legal[0]))
                target[start + legal[0]] = 1.0
                start += n
        if self.no_legal_at is not None and self.total == self.no_legal_at:
            mask[:] = False
        self.mask, self.vector = mask, target

    def _mask_out(self):
        if self.bad_mask == "shape":
            return np.ones(self.mask_len + 1, dtype=bool)
        if self.bad_mask == "dtype":
            return self.mask.astype(np.float32)
        return self.mask.copy()

    def _obs(self):
        if self.convention == "obs":
            return {"target": self.vector.copy(), self.mask_name: self._mask_out().astype(np.int8)
                    if self.bad_mask != "dtype" else self._mask_out()}
        return self.vector.copy()

    def _info(self) -> dict:
        dropped = self.drop_mask_at is not None and self.total >= self.drop_mask_at
        return {self.mask_name: self._mask_out()} if self.convention == "info" and not dropped else {}

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        self._draw()
        return self._obs(), self._info()

    def step(self, action):
        action = np.asarray(action)
        if self.kind == "multibinary":
            if np.any(action.astype(bool) & ~self.mask):
                raise IllegalAction(f"bit set against the mask: action {action.tolist()}, mask {self.mask.tolist()}")
            reward = float(np.mean(action.astype(bool) == self.target_bits))
        else:
            flat = np.atleast_1d(action)
            offsets = np.concatenate([[0], np.cumsum(self.sizes)[:-1]])
            if not np.all(self.mask[offsets + flat]):
                raise IllegalAction(f"illegal action {flat.tolist()} under mask {self.mask.astype(int).tolist()}")
            reward = float(np.mean(flat == np.asarray(self.target)))
        self.t += 1
        self.total += 1
        self._draw()
        return self._obs(), reward, False, self.t >= self.length, self._info()


class AllTrueMask(gym.Wrapper):
    """Adds an all-true ``info["action_mask"]`` to a Discrete env (the bit-identity test's wrapper)."""

    def _mask(self, info: dict) -> dict:
        return {**info, "action_mask": np.ones(self.action_space.n, dtype=bool)}

    def reset(self, **kwargs):
        obs, info = self.env.reset(**kwargs)
        return obs, self._mask(info)

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        return obs, reward, terminated, truncated, self._mask(info)


class MaskedPickMethodEnv(MaskedPickEnv):
    """:class:`MaskedPickEnv` with its masks from ``action_masks()`` (sb3-contrib's convention)."""

    def action_masks(self):
        return self._mask_out()


class MaskedPickNamedMethodEnv(MaskedPickEnv):
    """:class:`MaskedPickEnv` with its masks from a method of another name (``mask_name``: a near miss)."""

    def __init__(self, mask_name: str, **kwargs):
        super().__init__(convention="method", mask_name=mask_name, **kwargs)
        setattr(self, mask_name, self._mask_out)


def make_masked_pick(convention: str = "info", mask_name: str | None = None, **kwargs) -> MaskedPickEnv:
    if convention == "method":
        if mask_name not in (None, "action_masks"):
            return MaskedPickNamedMethodEnv(mask_name, **kwargs)
        return MaskedPickMethodEnv(convention="method", **kwargs)
    return MaskedPickEnv(convention=convention, mask_name=mask_name or "action_mask", **kwargs)


class CueChoiceEnv(gym.Env):
    """A masked task that needs memory: a cue shown once, a masked choice made later.

    Discrete(5) actions: 0 is "wait", 1-4 are choices. Step 0 shows the cue c in 0..3 (one-hot, and a
    "cue" flag); the next ``delay`` steps show nothing and only "wait" is legal; the last step shows a
    "choose" flag, "wait" is illegal and exactly two choices are legal: c + 1 and a random decoy. Reward 1
    for c + 1, else 0; the episode then terminates. The mask alone does not say which of the two is
    right, and the cue is gone by then: a feed-forward policy scores about 0.5, one with memory 1.0.
    Masks come from info["action_mask"]. Raises on an illegal action.
    """

    observation_space = spaces.Box(0.0, 1.0, (6,), np.float32)
    action_space = spaces.Discrete(5)

    def __init__(self, delay: int = 3):
        self.delay = delay

    def _obs_mask(self):
        obs = np.zeros(6, np.float32)
        mask = np.zeros(5, dtype=bool)
        if self.t == 0:
            obs[self.cue] = 1.0
            obs[4] = 1.0
        if self.t < self.delay + 1:
            mask[0] = True
        else:
            obs[5] = 1.0
            mask[self.cue + 1] = True
            mask[self.decoy + 1] = True
        return obs, {"action_mask": mask}

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        self.cue = int(self.np_random.integers(4))
        self.decoy = int((self.cue + 1 + self.np_random.integers(3)) % 4)
        return self._obs_mask()

    def step(self, action):
        action = int(action)
        _, info = self._obs_mask()
        if not info["action_mask"][action]:
            raise IllegalAction(f"illegal action {action} at step {self.t}")
        self.t += 1
        if self.t <= self.delay + 1:
            obs, info = self._obs_mask()
            return obs, 0.0, False, False, info
        obs, info = self._obs_mask()
        return obs, float(action == self.cue + 1), True, False, {"action_mask": np.ones(5, bool)}


for _name, _cls in (("MaskedPick-v0", make_masked_pick), ("CueChoice-v0", CueChoiceEnv)):
    if _name not in gym.registry:
        gym.register(_name, entry_point=_cls, disable_env_checker=True)
