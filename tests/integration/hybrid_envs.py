"""Envs of composite (Dict and Tuple) actions for the tests, registered on import.

- ``HybridTarget-v0``: a parameterised action. Each step shows a target kind (one-hot, 3 kinds) and a target
  parameter in [-1, 1]; the action is a Dict of ``kind`` (Discrete(3)) and one Box(-1, 1, (1,)) parameter per kind
  (``p0``, ``p1``, ``p2``). The reward is ``1 - |p_kind - target| / 2`` when the kind is the target, else 0: only
  the chosen kind's parameter matters. Episodes last 8 steps.
- ``HybridTargetMasked-v0``: the same, with ``info["action_mask"]`` forbidding one kind that is not the target
  each step; an illegal kind raises.
- ``NestedComposite-v0``: a Tuple of a Discrete(3, start=-1) int32, a Dict of a MultiDiscrete([2, 3]) and a
  float64 Box(-1, 0.2, (2, 2)), and a MultiBinary(3): every kind of part, nested, in dtypes of their own.

- ``parallel_env()`` (``env.backend = "pettingzoo"`` with ``env.id = "tests.integration.hybrid_envs"``): two
  agents, each playing HybridTarget-v0 for 8 steps with its own masks in its info.

Every env raises on an action outside its space or of another structure or dtype, as a strict user env does.
"""

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from pettingzoo import ParallelEnv

KINDS = 3


def check_action(space: spaces.Space, action) -> None:
    """Raise ValueError unless ``action`` has the space's structure, is inside it and holds its dtypes."""
    if isinstance(space, spaces.Dict):
        if not isinstance(action, dict) or list(action) != list(space.spaces):
            raise ValueError(f"action {action!r} is not a dict of keys {list(space.spaces)}")
        for key, sub in space.spaces.items():
            check_action(sub, action[key])
    elif isinstance(space, spaces.Tuple):
        if not isinstance(action, tuple) or len(action) != len(space.spaces):
            raise ValueError(f"action {action!r} is not a tuple of {len(space.spaces)}")
        for sub, part in zip(space.spaces, action, strict=True):
            check_action(sub, part)
    elif not (space.contains(action) and np.asarray(action).dtype == space.dtype):
        raise ValueError(f"action {action!r} of dtype {np.asarray(action).dtype} is not in {space}")


class HybridTargetEnv(gym.Env):
    observation_space = spaces.Box(-1.0, 1.0, (KINDS + 1,), np.float32)
    action_space = spaces.Dict({"kind": spaces.Discrete(KINDS),
                                **{f"p{k}": spaces.Box(-1.0, 1.0, (1,), np.float32) for k in range(KINDS)}})

    def __init__(self, masked: bool = False):
        self.masked = masked

    def _observe(self):
        self.kind = int(self.np_random.integers(KINDS))
        self.target = float(self.np_random.uniform(-1.0, 1.0))
        self.mask = np.ones(KINDS, dtype=bool)
        if self.masked:  # forbid one kind that is not the target
            self.mask[(self.kind + 1 + int(self.np_random.integers(KINDS - 1))) % KINDS] = False
        obs = np.zeros(KINDS + 1, dtype=np.float32)
        obs[self.kind], obs[-1] = 1.0, self.target
        return obs, ({"action_mask": self.mask.copy()} if self.masked else {})

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return self._observe()

    def step(self, action):
        check_action(self.action_space, action)
        kind = int(action["kind"])
        if not self.mask[kind]:
            raise ValueError(f"kind {kind} is masked: {self.mask.tolist()}")
        reward = 1.0 - abs(float(action[f"p{kind}"][0]) - self.target) / 2 if kind == self.kind else 0.0
        obs, info = self._observe()
        return obs, reward, False, False, info


class NestedCompositeEnv(gym.Env):
    observation_space = spaces.Box(-1.0, 1.0, (3,), np.float32)
    action_space = spaces.Tuple((
        spaces.Discrete(3, start=-1, dtype=np.int32),
        spaces.Dict({"md": spaces.MultiDiscrete([2, 3]), "box": spaces.Box(-1.0, 0.2, (2, 2), np.float64)}),
        spaces.MultiBinary(3),
    ))

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return self.np_random.uniform(-1, 1, 3).astype(np.float32), {}

    def step(self, action):
        check_action(self.action_space, action)
        reward = float(action[0] == 1) - float(np.abs(action[1]["box"] - 0.1).mean())
        return self.np_random.uniform(-1, 1, 3).astype(np.float32), reward, False, False, {}


gym.register("HybridTarget-v0", entry_point=HybridTargetEnv, max_episode_steps=8)
gym.register("HybridTargetMasked-v0", entry_point=HybridTargetEnv, kwargs={"masked": True}, max_episode_steps=8)
gym.register("NestedComposite-v0", entry_point=NestedCompositeEnv, max_episode_steps=8)


class HybridPair(ParallelEnv):
    metadata = {"name": "hybrid_pair_v0"}  # noqa: RUF012

    def __init__(self):
        self.possible_agents = ["a", "b"]
        self.games = {agent: HybridTargetEnv(masked=True) for agent in self.possible_agents}

    def observation_space(self, agent):
        return HybridTargetEnv.observation_space

    def action_space(self, agent):
        return HybridTargetEnv.action_space

    def reset(self, seed=None, options=None):
        self.agents, self.t = list(self.possible_agents), 0
        out = {agent: game.reset(seed=None if seed is None else seed + i)
               for i, (agent, game) in enumerate(self.games.items())}
        return {a: o for a, (o, _) in out.items()}, {a: info for a, (_, info) in out.items()}

    def step(self, actions):
        if set(actions) != set(self.agents):
            raise ValueError(f"actions of {sorted(actions)}, agents {self.agents}")
        self.t += 1
        out = {agent: self.games[agent].step(action) for agent, action in actions.items()}
        done = self.t >= 8
        obs = {a: o[0] for a, o in out.items()}
        rewards = {a: o[1] for a, o in out.items()}
        infos = {a: o[4] for a, o in out.items()}
        if done:
            self.agents = []
        return obs, rewards, dict.fromkeys(out, False), dict.fromkeys(out, done), infos


def parallel_env(**kwargs):
    return HybridPair(**kwargs)
