"""Who plays which seat in a turn-based game's evaluation: the evaluated policy one seat of each copy, an
opponent (:class:`shell.games.opponents.Opponent`) every other seat."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from shell.envs.base import LaneSpec, Rows
from shell.games.opponents import Opponent, play_rows

__all__ = ["Seating"]


class Seating:
    """Copy i's policy plays seat ``i % S`` (the S seats in lane order, so the copies cover the seats in turn), and
    the opponent every other seat.

    Args:
        specs: the env's lanes (each :class:`shell.envs.base.LaneSpec` with its ``agents``).
        copies: the env's copies E.
        device: where the rows are.

    Attributes:
        seats: every seat of a copy, lane by lane.
        policy_seat: the seat the policy plays in each copy.
        policy_rows: per lane, ``[N]`` bool: the rows the policy plays (copy-major rows, a seat per row).
    """

    def __init__(self, specs: dict[Any, LaneSpec], copies: int, device: torch.device):
        self.seats = [agent for spec in specs.values() for agent in spec.agents]
        self.policy_seat = [self.seats[i % len(self.seats)] for i in range(copies)]
        self.policy_rows = {g: torch.tensor([agent == self.policy_seat[i] for i in range(copies)
                                             for agent in spec.agents], device=device) for g, spec in specs.items()}
        self._moves_of = {g: (int(spec.action_space.n), int(spec.action_space.start)) for g, spec in specs.items()}
        self._rows_per_copy = {g: spec.rows_per_copy for g, spec in specs.items()}
        self._copies = copies

    def actions(self, lane: Any, policy_actions: torch.Tensor, rows: Rows, opponent: Opponent) -> torch.Tensor:
        """``[N]`` the policy's actions in its rows of ``lane``, the opponent's moves elsewhere."""
        return play_rows(policy_actions, opponent, rows, ~self.policy_rows[lane], *self._moves_of[lane])

    def opening(self, lane: Any, actions: torch.Tensor, rows: Rows, opponent: Opponent,
                copies: np.ndarray) -> torch.Tensor:
        """``[N]`` ``actions`` with ``opponent``'s moves in every row of the copies ``copies [E]`` bool (whoever
        is to move there: those games are in their random opening)."""
        mine = torch.as_tensor(np.repeat(copies, self._rows_per_copy[lane]), device=actions.device)
        return play_rows(actions, opponent, rows, mine, *self._moves_of[lane])

    def score(self, lane: Any, reward: torch.Tensor) -> np.ndarray:
        """``[E]`` the reward of the policy's seat in each copy (0 where the lane holds another seat)."""
        mine = torch.where(self.policy_rows[lane], reward, 0.0)
        return mine.cpu().numpy().reshape(self._copies, -1).sum(axis=1)

    def by_seat(self, scores: list[float]) -> dict[str, list[float]]:
        """Each copy's score (in copy order) grouped by the seat the policy played."""
        return {seat: [s for s, played in zip(scores, self.policy_seat, strict=True) if played == seat]
                for seat in self.seats}
