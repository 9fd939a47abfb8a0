"""A generic PettingZoo Parallel env for the fuzzer, built from a JSON spec (``env.backend = "pettingzoo"``,
``env.id = "tests.fuzz.fuzz_agents"``, ``env.kwargs = { spec = "<JSON>" }``).

The spec (drawn by ``tests/fuzz/strategies.py``):

- ``agents``: a list of ``{"name", "obs", "act", "joins", "lifetime", "end"}``: the agent's spaces (space specs
  of tests/fuzz/fuzz_envs.py), the step at which it joins (0: at reset), how many steps it then lives, and
  whether it then leaves ``"terminated"`` or ``"truncated"``; the episode ends when no agent is left and none
  is still to join;
- ``mask``: None, ``"info"`` (``info[agent]["action_mask"]``) or ``"obs"`` (a Dict observation of
  ``"observation"`` and ``"action_mask"``), for the agents with a Discrete or MultiDiscrete action space;
- ``fault``: None or ``{"kind": "raise" | "nan_reward" | "nan_obs" | "wrong_agent", "at"}`` at the env's
  ``at``-th step over its life (``"nan_obs"``: NaN in every agent's float Box parts; ``"wrong_agent"``: an
  observation of an agent that is not in ``agents``);
- ``seed``.

The env refuses an action for an agent that is not acting, one outside its space, or one against its mask
(:class:`tests.fuzz.fuzz_envs.FuzzIllegalAction`).
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

import numpy as np
from gymnasium import spaces
from pettingzoo import ParallelEnv

from tests.fuzz.fuzz_envs import (
    MASK_KEY,
    FuzzEnvFault,
    FuzzIllegalAction,
    components,
    draw,
    mask_size,
    space_from_spec,
    with_nan,
)


class FuzzAgents(ParallelEnv):
    """The Parallel env a spec describes (module docstring)."""

    metadata: ClassVar[dict] = {"name": "fuzz_agents_v0", "render_modes": ["rgb_array"], "is_parallelizable": True}

    def __init__(self, spec: str | dict, render_mode: str | None = None):
        data = json.loads(spec) if isinstance(spec, str) else spec
        self.data = data
        self.specs = {a["name"]: a for a in data["agents"]}
        self.possible_agents = [a["name"] for a in data["agents"]]
        self.own_spaces = {name: space_from_spec(a["obs"]) for name, a in self.specs.items()}
        self.action_spaces_ = {name: space_from_spec(a["act"]) for name, a in self.specs.items()}
        self.mask_mode = data.get("mask")
        self.fault = data.get("fault")
        self.render_mode = render_mode
        self.rng = np.random.default_rng(data.get("seed", 0))
        self.agents: list[str] = []
        self.t = 0
        self.total = 0
        self.masks: dict[str, np.ndarray] = {}
        self.born: dict[str, int] = {}

    def _masked(self, agent: str) -> bool:
        return self.mask_mode is not None and bool(components(self.action_spaces_[agent]))

    def observation_space(self, agent: str) -> spaces.Space:
        own = self.own_spaces[agent]
        if self.mask_mode == "obs" and self._masked(agent):
            size = mask_size(self.action_spaces_[agent])
            return spaces.Dict({"observation": own, MASK_KEY: spaces.MultiBinary(size)})
        return own

    def action_space(self, agent: str) -> spaces.Space:
        return self.action_spaces_[agent]

    @property
    def state_space(self) -> spaces.Box:
        return spaces.Box(-1.0, 1.0, (len(self.possible_agents) + 1,), np.float32)

    def state(self) -> np.ndarray:
        alive = [float(a in self.agents) for a in self.possible_agents]
        return np.array([*alive, min(self.t / 100, 1.0)], np.float32)

    def _draw_mask(self, agent: str) -> None:
        if not self._masked(agent):
            return
        mask = np.zeros(mask_size(self.action_spaces_[agent]), bool)
        start = 0
        for n in components(self.action_spaces_[agent]):
            mask[start:start + n] = self.rng.random(n) < 0.5
            mask[start + self.rng.integers(n)] = True
            start += n
        self.masks[agent] = mask

    def _obs(self, agent: str) -> Any:
        value = draw(self.own_spaces[agent], self.rng, 1.0)
        if self._fault_now("nan_obs"):
            value = with_nan(self.own_spaces[agent], value)
        if self.mask_mode == "obs" and self._masked(agent):
            return {"observation": value, MASK_KEY: self.masks[agent].astype(np.int8)}
        return value

    def _info(self, agent: str) -> dict:
        return {MASK_KEY: self.masks[agent].copy()} if self.mask_mode == "info" and self._masked(agent) else {}

    def _fault_now(self, kind: str) -> bool:
        return self.fault is not None and self.fault["kind"] == kind and self.total == self.fault["at"]

    def _to_join(self) -> list[str]:
        return [a for a in self.possible_agents if a not in self.born and self.specs[a]["joins"] <= self.t]

    def reset(self, seed: int | None = None, options: dict | None = None):
        if seed is not None:
            self.rng = np.random.default_rng([seed, self.data.get("seed", 0)])
        self.t = 0
        self.born = {}
        self.agents = []
        for agent in self._to_join():
            self.born[agent] = 0
            self.agents.append(agent)
        if not self.agents:  # someone must act at reset
            first = self.possible_agents[0]
            self.born[first] = 0
            self.agents.append(first)
        for agent in self.agents:
            self._draw_mask(agent)
        return {a: self._obs(a) for a in self.agents}, {a: self._info(a) for a in self.agents}

    def _check(self, agent: str, action: Any) -> None:
        if agent not in self.agents:
            raise FuzzIllegalAction(f"an action for {agent!r}, which is not acting (agents: {self.agents})")
        space = self.action_spaces_[agent]
        if not space.contains(np.asarray(action, dtype=space.dtype) if np.ndim(action) else action):
            raise FuzzIllegalAction(f"action {action!r} of {agent!r} outside {space}")
        if agent in self.masks and self._masked(agent):
            flat = np.asarray(action).ravel().astype(np.int64) - np.asarray(space.start).ravel().astype(np.int64)
            offsets = np.concatenate([[0], np.cumsum(components(space))[:-1]]).astype(np.int64)
            if not np.all(self.masks[agent][flat + offsets]):
                raise FuzzIllegalAction(f"action {action!r} of {agent!r} against its mask {self.masks[agent]}")

    def step(self, actions: dict):
        for agent, action in actions.items():
            self._check(agent, action)
        self.t += 1
        self.total += 1
        if self._fault_now("raise"):
            raise FuzzEnvFault(f"planned fault at step {self.total}")
        rewards, terms, truncs = {}, {}, {}
        for agent in self.agents:
            a = self.specs[agent]
            rewards[agent] = float(self.rng.uniform(-1, 1))
            done = self.t - self.born[agent] >= a["lifetime"]
            terms[agent] = done and a["end"] == "terminated"
            truncs[agent] = done and a["end"] == "truncated"
        if self._fault_now("nan_reward") and rewards:
            rewards[next(iter(rewards))] = float("nan")
        leaving = [a for a in self.agents if terms[a] or truncs[a]]
        for agent in self.agents:
            self._draw_mask(agent)
        obs = {a: self._obs(a) for a in self.agents}
        infos = {a: self._info(a) for a in self.agents}
        self.agents = [a for a in self.agents if a not in leaving]
        for agent in self._to_join():  # joins: first seen in this step's dicts, with no reward yet
            self.born[agent] = self.t
            self.agents.append(agent)
            self._draw_mask(agent)
            obs[agent], infos[agent] = self._obs(agent), self._info(agent)
            rewards[agent], terms[agent], truncs[agent] = 0.0, False, False
        if self._fault_now("wrong_agent"):
            obs["stranger"] = np.zeros(1, np.float32)
        return obs, rewards, terms, truncs, infos

    def render(self):
        return np.zeros((16, 16, 3), np.uint8)


def parallel_env(spec: str | dict, **kwargs: Any) -> FuzzAgents:
    return FuzzAgents(spec, **kwargs)
