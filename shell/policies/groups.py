"""Several policies in one run: one :class:`ActorCritic` per lane, a group of agents (a multi-agent env whose
agents differ in spaces or roles, shell/envs/pettingzoo/; BenchMARL's groups), and how a run's lanes are laid
out in its checkpoints: one lane is its :class:`ActorCritic` itself (the keys of a single-agent run), several are
an :class:`AgentGroups` keyed by group. Code above asks ``policy.lanes()`` and never which of the two it holds."""

from __future__ import annotations

from typing import Any

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

    def lanes(self) -> dict[str, ActorCritic]:
        """Each lane's policy, keyed by group, in order (:meth:`ActorCritic.lanes` for a run of one)."""
        return dict(self.items())

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


def lanes_policy(agents: dict[str | None, ActorCritic]) -> ActorCritic | AgentGroups:
    """The run's policy module as checkpoints store it: the one lane's :class:`ActorCritic` (its keys as a
    single-agent run's), or an :class:`AgentGroups` keyed by lane."""
    if len(agents) == 1:
        return next(iter(agents.values()))
    return AgentGroups(agents)


def lane_spaces(observation: spaces.Space, action: spaces.Space,
                agents: dict[str, Any] | None) -> dict[str | None, tuple[spaces.Space, spaces.Space]]:
    """Each lane's ``(observation_space, action_space)`` from the spaces a checkpoint stores (keyed by group
    where ``agents``, the run's groups, has several; else the one lane's, keyed None)."""
    if isinstance(agents, dict) and len(agents) > 1:
        return {g: (observation[g], action[g]) for g in agents}
    return {None: (observation, action)}
