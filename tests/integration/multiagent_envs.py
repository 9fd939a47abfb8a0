"""Small PettingZoo Parallel-API envs for the multi-agent tests (env.backend = "pettingzoo").

``env.id = "tests.integration.multiagent_envs"`` names this module; its ``parallel_env(**kwargs)`` makes
a :class:`Relay`.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np
from gymnasium import spaces
from pettingzoo import ParallelEnv


class Relay(ParallelEnv):
    """Agents that leave at known times, with returns known exactly.

    Agent ``runner_i`` (i = 0..M-1) lives ``lifetimes[i]`` steps and gets reward ``i + 1`` on each of
    them whatever it does, then terminates and leaves the dicts; the episode ends when the last one
    leaves. So agent i's return is ``(i + 1) * lifetimes[i]``, the team's the sum. A step given an
    action of an agent that has left raises (PettingZoo envs must not receive one), and so does an
    action outside the space. The observation is ``[t / 10, i / M, 1]``; ``state()`` is every agent's
    ``[alive, t / 10]``. With ``mask = True`` (or ``"info"``) each agent's info holds an action mask that
    forbids action 0 at odd steps, and an illegal action raises; with ``mask = "obs"`` the mask is the key
    ``"action_mask"`` of a Dict observation beside ``"observation"`` (PettingZoo's classic games).
    """

    metadata: ClassVar[dict] = {"name": "relay_v0", "render_modes": ["rgb_array"], "is_parallelizable": True}

    def __init__(self, num_agents: int = 3, lifetimes: tuple[int, ...] | None = None, mask: bool | str = False,
                 render_mode: str | None = None, discrete_obs: bool = False):
        self.discrete_obs = discrete_obs  # observe Discrete(10): the step count
        self.possible_agents = [f"runner_{i}" for i in range(num_agents)]
        self.lifetimes = list(lifetimes) if lifetimes is not None else [2 + 2 * i for i in range(num_agents)]
        self.mask = mask
        self.render_mode = render_mode
        self.agents: list[str] = []
        self.t = 0

    def observation_space(self, agent: str) -> spaces.Space:
        own = spaces.Discrete(10) if self.discrete_obs else spaces.Box(-1.0, 10.0, (3,), np.float32)
        if self.mask == "obs":
            return spaces.Dict({"observation": own, "action_mask": spaces.Box(0, 1, (3,), np.int8)})
        return own

    def action_space(self, agent: str) -> spaces.Discrete:
        return spaces.Discrete(3)

    @property
    def state_space(self) -> spaces.Box:
        return spaces.Box(-1.0, 10.0, (2 * len(self.possible_agents),), np.float32)

    def _obs(self, agent: str) -> np.ndarray | dict:
        if self.mask == "obs":
            return {"observation": self._own(agent), "action_mask": self._legal()}
        return self._own(agent)

    def _legal(self) -> np.ndarray:
        return np.array([self.t % 2 == 0, True, True], dtype=np.int8)

    def _own(self, agent: str) -> np.ndarray:
        if self.discrete_obs:
            return np.int64(min(self.t, 9))
        i = self.possible_agents.index(agent)
        return np.array([self.t / 10, i / len(self.possible_agents), 1.0], dtype=np.float32)

    def _info(self) -> dict:
        if self.mask not in (True, "info"):
            return {a: {} for a in self.agents}
        return {a: {"action_mask": self._legal()} for a in self.agents}

    def state(self) -> np.ndarray:
        return np.array([[a in self.agents, self.t / 10] for a in self.possible_agents], dtype=np.float32).ravel()

    def reset(self, seed: int | None = None, options: dict | None = None):
        self.agents = list(self.possible_agents)
        self.t = 0
        return {a: self._obs(a) for a in self.agents}, self._info()

    def step(self, actions: dict):
        extra = set(actions) - set(self.agents)
        if extra:
            raise RuntimeError(f"actions for agents that have left: {sorted(extra)}")
        for agent, action in actions.items():
            if np.ndim(action) != 0 or not 0 <= int(action) < 3:
                raise RuntimeError(f"action {action} outside the space")
            if self.mask and self.t % 2 == 1 and int(action) == 0:
                raise RuntimeError(f"illegal action 0 of {agent} at step {self.t}")
        self.t += 1
        rewards = {a: float(self.possible_agents.index(a) + 1) for a in self.agents}
        terms = {a: self.t >= self.lifetimes[self.possible_agents.index(a)] for a in self.agents}
        truncs = {a: False for a in self.agents}
        obs = {a: self._obs(a) for a in self.agents}
        self.agents = [a for a in self.agents if not terms[a]]
        infos = self._info()
        for agent in obs:
            infos.setdefault(agent, {})
        return obs, rewards, terms, truncs, infos

    def render(self):
        return np.zeros((16, 16, 3), dtype=np.uint8)


class Mixed(Relay):
    """A :class:`Relay` of two kinds of agents: runners as above (Box(3) observations, Discrete(3) actions), and
    ``scout_0`` with Box(5) observations and MultiDiscrete([2, 2]) actions, reward 10 a step, living
    ``scout_lifetime`` steps. Team return with the default lifetimes (2, 4, then the scout's 5): 2 + 8 + 50 = 60.
    """

    def __init__(self, scout_lifetime: int = 5, **kwargs):
        super().__init__(num_agents=2, **kwargs)
        self.possible_agents = [*self.possible_agents, "scout_0"]
        self.lifetimes = [*self.lifetimes, scout_lifetime]

    def observation_space(self, agent: str) -> spaces.Box:
        if agent.startswith("scout"):
            return spaces.Box(-1.0, 10.0, (5,), np.float32)
        return super().observation_space(agent)

    def action_space(self, agent: str):
        return spaces.MultiDiscrete([2, 2]) if agent.startswith("scout") else super().action_space(agent)

    def _obs(self, agent: str) -> np.ndarray:
        if agent.startswith("scout"):
            return np.array([self.t / 10, 1.0, 0.0, 0.5, -0.5], dtype=np.float32)
        return super()._obs(agent)

    def step(self, actions: dict):
        scout = actions.pop("scout_0", None)
        if scout is not None and (np.shape(scout) != (2,) or not all(0 <= int(x) < 2 for x in scout)):
            raise RuntimeError(f"scout action {scout} outside MultiDiscrete([2, 2])")
        if scout is not None:
            actions["scout_0"] = 1  # within the runners' check
        obs, rewards, terms, truncs, infos = super().step(actions)
        if "scout_0" in rewards:
            rewards["scout_0"] = 10.0
        return obs, rewards, terms, truncs, infos


def parallel_env(kind: str = "relay", **kwargs) -> Relay:
    return Mixed(**kwargs) if kind == "mixed" else Relay(**kwargs)
