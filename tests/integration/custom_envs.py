"""Small envs for the tests, registered on import (usable as ``tests.integration.custom_envs:NAME``)."""

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


gym.register("DictObs-v0", entry_point=DictObsEnv, max_episode_steps=50)
gym.register("Raising-v0", entry_point=FaultyEnv, kwargs={"mode": "raise"}, max_episode_steps=50)
gym.register("NaNReward-v0", entry_point=FaultyEnv, kwargs={"mode": "nan"}, max_episode_steps=50)


class NeverEndingEnv(gym.Env):
    """Episodes never end (no termination, no time limit registered); ``close`` may hang like a stuck simulator."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, close_seconds: float = 0.0):
        self.close_seconds = close_seconds

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(2, np.float32), {}

    def step(self, action):
        return self.np_random.uniform(-1, 1, 2).astype(np.float32), 1.0, False, False, {}

    def close(self):
        if self.close_seconds:
            import time

            time.sleep(self.close_seconds)


gym.register("NeverEnding-v0", entry_point=NeverEndingEnv)
gym.register("SlowClose-v0", entry_point=NeverEndingEnv, kwargs={"close_seconds": 60.0}, max_episode_steps=20)
