"""Small envs for the tests, registered on import (usable as ``tests.integration.custom_envs:NAME``)."""

import os
from pathlib import Path

import gymnasium as gym
import numpy as np


class DictObsEnv(gym.Env):
    observation_space = gym.spaces.Dict({"a": gym.spaces.Box(-1, 1, (2,))})
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return self.observation_space.sample(), {}

    def step(self, action):
        return self.observation_space.sample(), 0.0, False, False, {}


class FaultyEnv(gym.Env):
    """Pendulum-like spaces; after ``fail_at`` steps it either raises or returns a NaN reward."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
    action_space = gym.spaces.Box(-2.0, 2.0, (1,), np.float32)

    def __init__(self, fail_at: int = 150, mode: str = "raise"):
        self.fail_at, self.mode, self.count = fail_at, mode, 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return self.np_random.uniform(-1, 1, 3).astype(np.float32), {}

    def step(self, action):
        self.count += 1
        if self.count >= self.fail_at:
            if self.mode == "raise":
                raise RuntimeError("simulated physics blow-up")
            return np.zeros(3, np.float32), float("nan"), False, False, {}
        return self.np_random.uniform(-1, 1, 3).astype(np.float32), -float(np.square(action).sum()), False, False, {}


class TextKeyEnv(DictObsEnv):
    observation_space = gym.spaces.Dict({"a": gym.spaces.Box(-1, 1, (2,)), "note": gym.spaces.Text(8)})


gym.register("DictObs-v0", entry_point=DictObsEnv, max_episode_steps=50)
gym.register("TextKeyObs-v0", entry_point=TextKeyEnv, max_episode_steps=50)
gym.register("Raising-v0", entry_point=FaultyEnv, kwargs={"mode": "raise"}, max_episode_steps=50)
gym.register("NaNReward-v0", entry_point=FaultyEnv, kwargs={"mode": "nan"}, max_episode_steps=50)


class NeverEndingEnv(gym.Env):
    """Episodes never end (no termination, no time limit registered); ``close`` may hang like a stuck simulator."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, close_seconds: float = 0.0, reset_marker: str | None = None):
        self.close_seconds = close_seconds
        self.reset_marker = reset_marker  # a file touched at every reset: a test's sign that the run is stepping

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        if self.reset_marker:
            Path(self.reset_marker).touch()
        return np.zeros(2, np.float32), {}

    def step(self, action):
        return self.np_random.uniform(-1, 1, 2).astype(np.float32), 1.0, False, False, {}

    def close(self):
        if self.close_seconds:
            import time

            time.sleep(self.close_seconds)


gym.register("NeverEnding-v0", entry_point=NeverEndingEnv)
gym.register("SlowClose-v0", entry_point=NeverEndingEnv, kwargs={"close_seconds": 60.0}, max_episode_steps=20)


class StrictActionEnv(gym.Env):
    """Refuses (raises) any action outside its action space or not in the space's dtype, as a strict user env does.

    ``space`` builds the action space from plain arguments: ``("box", low, high, shape, dtype)``,
    ``("discrete", n, start, dtype)`` or ``("multidiscrete", nvec, start, dtype)``. The reward
    pulls a Box action towards the middle of its bounds.
    """

    observation_space = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)

    def __init__(self, space: tuple):
        kind, *args = space
        if kind == "box":
            low, high, shape, dtype = args
            self.action_space = gym.spaces.Box(np.asarray(low, dtype) if shape is None else low,
                                               np.asarray(high, dtype) if shape is None else high, shape, dtype)
        elif kind == "discrete":
            n, start, dtype = args
            self.action_space = gym.spaces.Discrete(n, start=start, dtype=dtype)
        else:
            nvec, start, dtype = args
            self.action_space = gym.spaces.MultiDiscrete(nvec, dtype=dtype, start=start)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return self.np_random.uniform(-1, 1, 3).astype(np.float32), {}

    def step(self, action):
        space = self.action_space
        dtype = np.asarray(action).dtype
        if not (space.contains(action) and dtype == space.dtype):
            raise ValueError(f"action {action!r} of dtype {dtype} is not in {space}")
        reward = 0.0
        if isinstance(space, gym.spaces.Box):
            low, high = space.low.astype(np.float64), space.high.astype(np.float64)
            reward = -float(np.mean(np.square((action - (low + high) / 2) / (high - low + 1))))
        return self.np_random.uniform(-1, 1, 3).astype(np.float32), reward, False, False, {}


STRICT_SPACES = {
    # float32 rounding of tanh(u) * scale + bias: 0.20000002 > 0.2
    "TightBox-v0": ("box", -1.0, 0.2, (2,), np.float32),
    # lopsided bounds: (-1000, 0.2) gives 0.2000122, (-10, 0.001) 0.0010004, (-0.1, 1) -0.10000002
    "LopsidedBox-v0": ("box", [-1000.0, -10.0, -0.1], [0.2, 0.001, 1.0], None, np.float32),
    # float64 bounds: float32(0.2) is above float64 0.2; float32 actions are the wrong dtype
    "Float64Box-v0": ("box", [-1.0, 0.0, -0.3], [0.2, 1.0, 0.2], None, np.float64),
    "IntBox-v0": ("box", 0, 10, (2,), np.int64),
    # a locked joint whose value float32 cannot hold
    "LockedJointBox-v0": ("box", [-1.0, 0.2, -2.0], [1.0, 0.2, 2.0], None, np.float64),
    "AllLockedBox-v0": ("box", 0.5, 0.5, (2,), np.float32),
    "MatrixBox-v0": ("box", -1.0, 0.2, (2, 3), np.float32),
    "BoolBox-v0": ("box", 0, 1, (2,), np.bool_),
    "Discrete32-v0": ("discrete", 3, -1, np.int32),
    "MultiDiscrete32-v0": ("multidiscrete", [3, 4], [-1, 2], np.int32),
}
for _name, _space in STRICT_SPACES.items():
    gym.register(_name, entry_point=StrictActionEnv, kwargs={"space": _space}, max_episode_steps=50)


class CountingEnv(gym.Env):
    """Deterministic episodes for exact episode statistics; actions are ignored.

    The k-th step of an episode pays reward k. Episode lengths cycle with the reset count: phase 0
    terminates after 3 steps, phase 1 after 5, phase 2 never (the registered time limit of 7 cuts
    it). ``reset(seed=s)`` starts at phase ``s % 3``; every later reset (the autoreset) moves to the
    next phase. So an episode of phase p has length ``COUNTING_LENGTHS[p]`` and return ``L (L + 1) / 2``.
    """

    TERMINATE_AT = (3, 5, None)
    observation_space = gym.spaces.Box(0.0, 10.0, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self):
        self.phase, self.t = 2, 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.phase = seed % 3 if seed is not None else (self.phase + 1) % 3
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        self.t += 1
        end = self.TERMINATE_AT[self.phase]
        return self._obs(), float(self.t), end is not None and self.t >= end, False, {}

    def _obs(self):
        return np.array([self.phase, self.t], np.float32)


COUNTING_LIMIT = 7
COUNTING_LENGTHS = (3, 5, COUNTING_LIMIT)
gym.register("Counting-v0", entry_point=CountingEnv, max_episode_steps=COUNTING_LIMIT)
gym.register("MultiDiscrete324-v0", entry_point=StrictActionEnv,
             kwargs={"space": ("multidiscrete", [3, 2, 4], [-1, 5, 10], np.int64)}, max_episode_steps=50)


class _StubALE:
    """The part of ale_py's ALEInterface that gymnasium's AtariPreprocessing reads."""

    def __init__(self, game: "StubAtariEnv"):
        self.game = game

    def lives(self) -> int:
        return self.game.lives

    def getScreenGrayscale(self, out: np.ndarray) -> None:
        out[...] = (self.game.frame * 7) % 256

    def getScreenRGB(self, out: np.ndarray) -> None:
        out[...] = (self.game.frame * 7) % 256


class StubAtariEnv(gym.Env):
    """An ALE-like game with known rewards, for the Atari wrapper chain.

    A game lasts ``GAME_FRAMES`` frames and ends by termination. Frame k (1-based) pays
    ``stub_atari_reward(k)``: +5 every 7th frame and -3 every 11th from frame 40 on, so the
    30 no-op starts (whose rewards the chain drops) never see a reward. Three lives are lost at
    frames 100, 200 and 300 without ending the game.
    """

    observation_space = gym.spaces.Box(0, 255, (210, 160, 3), np.uint8)
    action_space = gym.spaces.Discrete(4)
    GAME_FRAMES = 400

    def __init__(self, frameskip: int = 1, repeat_action_probability: float = 0.0):
        self._frameskip = frameskip
        self.ale = _StubALE(self)
        self.frame, self.lives = 0, 4

    def get_action_meanings(self) -> list[str]:
        return ["NOOP", "FIRE", "UP", "DOWN"]

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.frame, self.lives = 0, 4
        return np.zeros(self.observation_space.shape, np.uint8), {"lives": self.lives}

    def step(self, action):
        self.frame += 1
        if self.frame in (100, 200, 300):
            self.lives -= 1
        obs = np.full(self.observation_space.shape, (self.frame * 7) % 256, np.uint8)
        return obs, stub_atari_reward(self.frame), self.frame >= self.GAME_FRAMES, False, {"lives": self.lives}


def stub_atari_reward(frame: int) -> float:
    if frame < 40:
        return 0.0
    return 5.0 * (frame % 7 == 0) - 3.0 * (frame % 11 == 0)


STUB_ATARI_SCORE = sum(stub_atari_reward(k) for k in range(1, StubAtariEnv.GAME_FRAMES + 1))


class MixedDictEnv(gym.Env):
    """A Dict of an RGB image (channels last), a vector and a Discrete; reward for matching the Discrete."""

    observation_space = gym.spaces.Dict({
        "pixels": gym.spaces.Box(0, 255, (12, 12, 3), np.uint8),
        "vector": gym.spaces.Box(-1.0, 1.0, (3,), np.float32),
        "mode": gym.spaces.Discrete(3),
    })
    action_space = gym.spaces.Discrete(3)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return self._obs(), {}

    def _obs(self):
        self.mode = int(self.np_random.integers(3))
        return {"pixels": self.np_random.integers(0, 256, (12, 12, 3), dtype=np.uint8),
                "vector": self.np_random.uniform(-1, 1, 3).astype(np.float32), "mode": self.mode}

    def step(self, action):
        reward = float(int(action) == self.mode)
        return self._obs(), reward, False, False, {}


class _CustomSpace(gym.Space):
    def __init__(self):
        super().__init__((), None)

    def sample(self, mask=None, probability=None):
        return "go"

    def contains(self, x):
        return isinstance(x, str)


class CustomKeyEnv(DictObsEnv):
    observation_space = gym.spaces.Dict({"a": gym.spaces.Box(-1, 1, (2,)), "mission": _CustomSpace()})

    def reset(self, *, seed=None, options=None):
        super(DictObsEnv, self).reset(seed=seed)
        return {"a": np.zeros(2, np.float32), "mission": "go"}, {}

    def step(self, action):
        return {"a": np.zeros(2, np.float32), "mission": "go"}, 0.0, False, False, {}


gym.register("StubAtari-v0", entry_point=StubAtariEnv)
gym.register("MixedDict-v0", entry_point=MixedDictEnv, max_episode_steps=20)
gym.register("CustomKeyObs-v0", entry_point=CustomKeyEnv, max_episode_steps=20)


class SwitchableEnv(gym.Env):
    """Discrete(3) actions, or Box(-1, 1, (2,)) with ``continuous=True`` (as LunarLander's kwarg)."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)

    def __init__(self, continuous: bool = False):
        self.action_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32) if continuous else gym.spaces.Discrete(3)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(3, np.float32), {}

    def step(self, action):
        assert self.action_space.contains(action)
        return self.np_random.uniform(-1, 1, 3).astype(np.float32), 0.0, False, False, {}


gym.register("Switchable-v0", entry_point=SwitchableEnv, max_episode_steps=10)


class CueEnv(gym.Env):
    """A memory task: a cue of +1 or -1 is shown at step 0 only; the action at step ``length - 1`` must name it.

    Observation ``[cue if t == 0 else 0, t / (length - 1)]``; action Discrete(2), ignored until the
    last step, where it pays +1 if it matches the cue (0 for -1, 1 for +1) and -1 otherwise. The
    episode then terminates. A feed-forward policy sees nothing of the cue at the last step, so its
    deterministic return over many episodes is about 0; a recurrent one can reach 1.
    """

    observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, length: int = 4):
        self.length, self.t, self.cue = length, 0, 1.0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t, self.cue = 0, float(self.np_random.choice([-1.0, 1.0]))
        return self._obs(), {}

    def step(self, action):
        last = self.t == self.length - 1
        self.t += 1
        if not last:
            return self._obs(), 0.0, False, False, {}
        reward = 1.0 if (int(action) == 1) == (self.cue > 0) else -1.0
        return self._obs(), reward, True, False, {}

    def _obs(self):
        t = min(self.t, self.length - 1)
        return np.array([self.cue if t == 0 else 0.0, t / (self.length - 1)], np.float32)


gym.register("Cue-v0", entry_point=CueEnv)


class ScaleReward(gym.RewardWrapper):
    """A user's own wrapper with kwargs: multiplies the reward by ``factor`` and adds ``offset``."""

    def __init__(self, env: gym.Env, factor: float, offset: float = 0.0):
        super().__init__(env)
        self.factor, self.offset = factor, offset

    def reward(self, reward):
        return self.factor * reward + self.offset


class RaiseAfter(gym.Wrapper):
    """Raises on the ``steps``-th step of a sub-env (a wrapper that fails during training)."""

    def __init__(self, env: gym.Env, steps: int):
        super().__init__(env)
        self.steps, self.count = steps, 0

    def step(self, action):
        self.count += 1
        if self.count >= self.steps:
            raise RuntimeError("wrapper blew up")
        return self.env.step(action)


def not_an_env(env: gym.Env):
    """A "wrapper" factory that returns something that is not an env."""
    return 42


class DataFileEnv(SwitchableEnv):
    """Needs an existing file, as MuJoCo envs need their ``xml_file``; ``label`` is any other string."""

    def __init__(self, data_file: str, label: str = "plain"):
        super().__init__()
        if not os.path.isfile(data_file):
            raise FileNotFoundError(f"no data file {data_file!r}")
        self.data_file, self.label = data_file, label


class RenderModesEnv(SwitchableEnv):
    """Renders as text (``"ansi"``) or as 64x64 RGB frames (``"rgb_array"``)."""

    metadata = {"render_modes": ("ansi", "rgb_array"), "render_fps": 30}  # noqa: RUF012 - gymnasium's own layout

    def __init__(self, render_mode: str | None = None):
        super().__init__()
        self.render_mode = render_mode

    def render(self):
        if self.render_mode == "ansi":
            return "frame\n"
        return np.zeros((64, 64, 3), np.uint8)


gym.register("DataFile-v0", entry_point=DataFileEnv, max_episode_steps=10)
gym.register("RenderModes-v0", entry_point=RenderModesEnv, max_episode_steps=10)
