"""A generic VMAS scenario for the fuzzer, built from a JSON spec and given as a factory (``env.backend = "vmas"``,
``shell.train(config, env=lambda: FuzzScenario(spec))``, as docs/guides/vmas.md gives a scenario of your own).

The spec (drawn by ``tests/fuzz/strategies.py``, :func:`tests.fuzz.strategies.scenario_spec`):

- ``kinds``: a list of ``{"name", "count", "obs_size", "action_size", "nvec", "u_range", "silent"}``: ``count``
  agents ``<name>_<i>``, each observing ``obs_size`` numbers (its position, velocity, the step count, its index,
  then noise), acting with ``action_size`` forces (at least the 2 its holonomic dynamics use) bounded by
  ``u_range`` (a number, or one per force), or with discrete choices ``nvec`` per force (``env.kwargs``
  ``continuous_actions = false``); ``silent = false`` adds VMAS's communication actions (``dim_c``);
- ``dim_c``: the size of the communication channel (0: none);
- ``observation``: ``"flat"`` (a 1-D vector, what the backend serves), ``"matrix"`` (``[2, obs_size]``) or
  ``"dict"`` (a Dict of two vectors): the latter two are documented refusals;
- ``lengths``: world i is done after ``lengths[i % len(lengths)]`` steps (0: never; then only
  ``env.max_episode_steps`` ends an episode);
- ``reward_scale``: rewards are drawn from ``[-reward_scale, reward_scale]``, per agent and world;
- ``fault``: None or ``{"kind", "at"}``: at the scenario's ``at``-th step over its life it ``"raise"``s, pays a
  ``"nan_reward"`` or shows a ``"nan_obs"`` (or an ``"inf_obs"``).

Its random draws (positions, noise, rewards) come from VMAS's streams, which the backend seeds from the run.
"""

from __future__ import annotations

import json
from typing import Any

import torch
from vmas.simulator.core import Agent, World
from vmas.simulator.scenario import BaseScenario
from vmas.simulator.utils import ScenarioUtils

from tests.fuzz.fuzz_envs import FuzzEnvFault


class FuzzScenario(BaseScenario):
    """The scenario a spec describes (module docstring)."""

    def __init__(self, spec: str | dict):
        super().__init__()
        self.data = json.loads(spec) if isinstance(spec, str) else spec
        self.total = 0  # steps over the scenario's life

    def make_world(self, batch_dim: int, device: torch.device, **kwargs: Any) -> World:
        ScenarioUtils.check_kwargs_consumed(kwargs)  # as VMAS's own scenarios: it takes no argument
        data = self.data
        world = World(batch_dim, device, dim_c=int(data.get("dim_c", 0)))
        for kind in data["kinds"]:
            for i in range(kind["count"]):
                u_range = kind.get("u_range", 1.0)
                world.add_agent(Agent(name=f"{kind['name']}_{i}", collide=False, silent=kind.get("silent", True),
                                      action_size=kind.get("action_size"), discrete_action_nvec=kind.get("nvec"),
                                      u_range=u_range))
        self.sizes = [kind["obs_size"] for kind in data["kinds"] for _ in range(kind["count"])]
        self.t = torch.zeros(batch_dim, device=device)
        lengths = data.get("lengths") or [0]
        self.limit = torch.tensor(lengths, device=device, dtype=torch.float32).repeat(
            batch_dim // len(lengths) + 1)[:batch_dim]
        return world

    def reset_world_at(self, env_index: int | None = None) -> None:
        for agent in self.world.agents:
            pos = torch.rand(self.world.batch_dim, 2, device=self.world.device) - 0.5
            agent.set_pos(pos if env_index is None else pos[env_index], batch_index=env_index)
        if env_index is None:
            self.t.zero_()
        else:
            self.t[env_index] = 0

    def _fault_now(self, kind: str) -> bool:
        fault = self.data.get("fault")
        return fault is not None and fault["kind"] == kind and self.total == fault["at"]

    def process_action(self, agent: Agent) -> None:
        if agent is self.world.agents[0]:
            self.t += 1
            self.total += 1
            if self._fault_now("raise"):
                raise FuzzEnvFault(f"planned fault at step {self.total}")

    def observation(self, agent: Agent) -> Any:
        index = self.world.agents.index(agent)
        size = self.sizes[index]
        parts = [agent.state.pos, agent.state.vel, self.t[:, None], torch.full_like(self.t[:, None], float(index))]
        base = torch.cat(parts, dim=-1)
        if base.shape[-1] < size:
            extra = torch.rand(self.world.batch_dim, size - base.shape[-1], device=base.device)
            base = torch.cat((base, extra), dim=-1)
        obs = base[:, :size].clone()
        if self._fault_now("nan_obs"):
            obs[:, 0] = float("nan")
        if self._fault_now("inf_obs"):
            obs[:, 0] = float("inf")
        kind = self.data.get("observation", "flat")
        if kind == "matrix":
            return torch.stack((obs, -obs), dim=1)
        if kind == "dict":
            return {"own": obs, "other": -obs}
        return obs

    def reward(self, agent: Agent) -> torch.Tensor:
        scale = float(self.data.get("reward_scale", 1.0))
        reward = (torch.rand(self.world.batch_dim, device=self.world.device) * 2 - 1) * scale
        if self._fault_now("nan_reward") and agent is self.world.agents[0]:
            reward[0] = float("nan")
        return reward

    def done(self) -> torch.Tensor:
        return (self.limit > 0) & (self.t >= self.limit)


def make(spec: str | dict) -> FuzzScenario:
    return FuzzScenario(spec)
