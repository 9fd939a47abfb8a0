"""Several policies in one run: one :class:`ActorCritic` per group of agents (a multi-agent env whose agents
differ in spaces or roles, shell/envs/pettingzoo.py; BenchMARL's groups)."""

from __future__ import annotations

from gymnasium import spaces
from torch import nn

from shell.policies.actor_critic import ActorCritic


class AgentGroups(nn.ModuleDict):
    """``{group: ActorCritic}``, in the env's group order; each group's policy acts on that group's rows.

    Its spaces are Dicts keyed by group (what checkpoints store), and :attr:`action_mask_source` maps
    each group to where its masks came from (None when no group has masks).
    """

    def __init__(self, agents: dict[str, ActorCritic]):
        super().__init__(agents)

    @property
    def observation_space(self) -> spaces.Dict:
        return spaces.Dict({g: agent.observation_space for g, agent in self.items()})

    @property
    def action_space(self) -> spaces.Dict:
        return spaces.Dict({g: agent.action_space for g, agent in self.items()})

    @property
    def recurrent(self) -> bool:
        return any(agent.recurrent for agent in self.values())

    @property
    def action_mask_source(self) -> dict[str, str | None] | None:
        sources = {g: agent.action_mask_source for g, agent in self.items()}
        return sources if any(v is not None for v in sources.values()) else None

    @action_mask_source.setter
    def action_mask_source(self, sources: dict[str, str | None] | None) -> None:
        for g, agent in self.items():
            agent.action_mask_source = (sources or {}).get(g)
