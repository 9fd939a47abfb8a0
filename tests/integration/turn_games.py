"""A small PettingZoo AEC (turn-based) game with known rewards, for the turn tests (env.backend = "pettingzoo").

``env.id = "tests.integration.turn_games"`` names this module: it has ``env(**kwargs)`` and no
``parallel_env``, so the backend plays it turn by turn.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np
from gymnasium import spaces
from pettingzoo import AECEnv
from pettingzoo.utils import AgentSelector

WIN = 100.0


class Duel(AECEnv):
    """Two seats, ``seat_0`` and ``seat_1``, move in turn (``seat_0`` first); the game ends after ``length`` moves.

    Move k (k = 1, 2, ...) pays the mover 0.5 and the other seat k. The last move wins: the mover gets
    :data:`WIN` more and the other seat loses :data:`WIN`. Rewards follow PettingZoo's AEC convention: a seat's
    ``_cumulative_rewards`` is zeroed when it moves, and ``last()`` gives what it collected since.

    So with ``length = 5`` (``seat_0`` moves at k = 1, 3, 5 and ``seat_1`` at k = 2, 4), a seat's move earns:
    ``seat_0``: 0.5 + 2, 0.5 + 4, 0.5 + 100 (done); ``seat_1``: 0.5 + 3, 0.5 + 5 - 100 (done: the loser's last
    move); the 1 that ``seat_1`` receives before its first move belongs to no move of it.

    The observation is ``{"observation": [k / 10, seat, 1], "action_mask": [3] int8}``; the mover's mask forbids
    action 0 at odd k, and every other seat's mask is all zeros (as the classic games have it). An illegal
    action raises ValueError, and so does an action for a seat whose turn it is not (PettingZoo envs must not
    be sent one).
    """

    metadata: ClassVar[dict] = {"name": "duel_v0", "render_modes": [], "is_parallelizable": False}

    def __init__(self, length: int = 5, render_mode: str | None = None):
        super().__init__()
        self.length = length
        self.possible_agents = ["seat_0", "seat_1"]
        self.render_mode = render_mode
        self.k = 0

    def observation_space(self, agent: str) -> spaces.Space:
        return spaces.Dict({"observation": spaces.Box(-1.0, 10.0, (3,), np.float32),
                            "action_mask": spaces.Box(0, 1, (3,), np.int8)})

    def action_space(self, agent: str) -> spaces.Discrete:
        return spaces.Discrete(3)

    def legal(self, agent: str) -> np.ndarray:
        if agent != self.agent_selection or self.terminations[agent]:
            return np.zeros(3, dtype=np.int8)
        return np.array([(self.k + 1) % 2 == 0, True, True], dtype=np.int8)

    def observe(self, agent: str) -> dict:
        own = np.array([self.k / 10, self.possible_agents.index(agent), 1.0], dtype=np.float32)
        return {"observation": own, "action_mask": self.legal(agent)}

    def reset(self, seed: int | None = None, options: dict | None = None) -> None:
        self.agents = list(self.possible_agents)
        self.k = 0
        self.rewards = dict.fromkeys(self.agents, 0.0)
        self._cumulative_rewards = dict.fromkeys(self.agents, 0.0)
        self.terminations = dict.fromkeys(self.agents, False)
        self.truncations = dict.fromkeys(self.agents, False)
        self.infos = {a: {} for a in self.agents}
        self._selector = AgentSelector(self.agents)
        self.agent_selection = self._selector.reset()

    def step(self, action) -> None:
        agent = self.agent_selection
        if self.terminations[agent] or self.truncations[agent]:
            self._was_dead_step(action)
            return
        if action is None or not self.legal(agent)[int(action)]:
            raise ValueError(f"illegal move {action!r} by {agent} at move {self.k + 1}")
        self._cumulative_rewards[agent] = 0.0
        self.k += 1
        other = self.possible_agents[1 - self.possible_agents.index(agent)]
        self.rewards = {agent: 0.5, other: float(self.k)}
        if self.k >= self.length:
            self.rewards[agent] += WIN
            self.rewards[other] -= WIN
            self.terminations = dict.fromkeys(self.agents, True)
        self._accumulate_rewards()
        self.agent_selection = self._selector.next()

    def close(self) -> None:
        pass


def env(**kwargs) -> Duel:
    return Duel(**kwargs)


class LopsidedDuel(Duel):
    """:class:`Duel` whose ``seat_1`` observes one number more: its seats differ in spaces (two groups)."""

    def observation_space(self, agent: str) -> spaces.Space:
        size = 4 if agent == "seat_1" else 3
        return spaces.Dict({"observation": spaces.Box(-1.0, 10.0, (size,), np.float32),
                            "action_mask": spaces.Box(0, 1, (3,), np.int8)})

    def observe(self, agent: str) -> dict:
        obs = super().observe(agent)
        if agent == "seat_1":
            obs["observation"] = np.append(obs["observation"], np.float32(0.0))
        return obs


def lopsided(**kwargs) -> LopsidedDuel:
    return LopsidedDuel(**kwargs)


class PairedDuel(Duel):
    """:class:`Duel` whose move is two choices at once (``MultiDiscrete([3, 2])``; the first is the move, the
    second ignored) and whose observation carries no mask: not one Discrete choice."""

    def observation_space(self, agent: str) -> spaces.Space:
        return spaces.Box(-1.0, 10.0, (3,), np.float32)

    def action_space(self, agent: str) -> spaces.MultiDiscrete:
        return spaces.MultiDiscrete([3, 2])

    def observe(self, agent: str) -> np.ndarray:
        return super().observe(agent)["observation"]

    def step(self, action) -> None:
        super().step(None if action is None else 1 + int(np.asarray(action)[1]))


def paired(**kwargs) -> PairedDuel:
    return PairedDuel(**kwargs)


class PlayableDuel(Duel):
    """:class:`Duel` whose seats can still be observed after the game (``ppo-core play`` shows the final board): a
    seat that left the game has no legal move."""

    def legal(self, agent: str) -> np.ndarray:
        return super().legal(agent) if agent in self.terminations else np.zeros(3, dtype=np.int8)
