"""A small VMAS scenario whose episodes end at known steps, for tests of the vmas backend: ``Countdown``, where
world i of a batch terminates after ``lengths[i % len(lengths)]`` steps, so worlds end at different steps (the
backend's reset of some worlds only). Two agents of each of two kinds ("runner" and "scout", which observe
different sizes); every agent is rewarded 1 per step, plus its own index, and observes its position, the step
count, its index and (scouts) one more number."""

from __future__ import annotations

import torch
from vmas.simulator.core import Agent, World
from vmas.simulator.scenario import BaseScenario


class Countdown(BaseScenario):
    def __init__(self, lengths: tuple[int, ...] = (2, 3), scouts: int = 0):
        super().__init__()
        self.lengths, self.scouts = lengths, scouts

    def make_world(self, batch_dim: int, device: torch.device, **kwargs) -> World:
        world = World(batch_dim, device)
        for i in range(2):
            world.add_agent(Agent(name=f"runner_{i}", collide=False))
        for i in range(self.scouts):
            world.add_agent(Agent(name=f"scout_{i}", collide=False))
        self.t = torch.zeros(batch_dim, device=device)
        self.limit = torch.tensor(self.lengths, device=device).repeat(batch_dim // len(self.lengths) + 1)[:batch_dim]
        return world

    def reset_world_at(self, env_index: int | None = None) -> None:
        for agent in self.world.agents:
            pos = torch.rand(self.world.batch_dim, 2, device=self.world.device) - 0.5
            agent.set_pos(pos if env_index is None else pos[env_index], batch_index=env_index)
        if env_index is None:
            self.t.zero_()
        else:
            self.t[env_index] = 0

    def process_action(self, agent: Agent) -> None:
        if agent is self.world.agents[0]:
            self.t += 1

    def observation(self, agent: Agent) -> torch.Tensor:
        index = self.world.agents.index(agent)
        parts = [agent.state.pos, self.t[:, None], torch.full_like(self.t[:, None], float(index))]
        if agent.name.startswith("scout"):
            parts.append(-self.t[:, None])
        return torch.cat(parts, dim=-1)

    def reward(self, agent: Agent) -> torch.Tensor:
        return torch.ones_like(self.t) + self.world.agents.index(agent)

    def done(self) -> torch.Tensor:
        return self.t >= self.limit
