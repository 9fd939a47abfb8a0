"""Elo ratings of a turn-based game's players from their evaluation games (:func:`core.elo_ratings`).

A :class:`MatchTable` counts, for each pair of named players, the games each won and the games drawn; its
:meth:`MatchTable.elo` is the Bradley-Terry (Elo) fit of all of them at once, anchored at ``"random"`` (the
uniform-random player) = 0, or at the first player when no random player took part. The fit depends on the counts
only, not on the order of the games, and adds one virtual draw to every pair that met, so a player who never lost
still has a finite rating.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch

import core

__all__ = ["ANCHOR", "POLICY", "VIRTUAL_DRAWS", "MatchTable"]

ANCHOR = "random"
"""The player rated 0 when it took part."""

POLICY = "policy"
"""The name of the evaluated policy (the learner, playing its deterministic moves) in a table."""

VIRTUAL_DRAWS = 1.0
"""Drawn games added to every pair of players that met (:func:`core.elo_ratings`)."""


class MatchTable:
    """Win, draw and loss counts between named players."""

    def __init__(self) -> None:
        self.players: list[str] = []
        self._results: dict[tuple[str, str], list[int]] = {}  # (a, b) -> [a's wins, draws, b's wins]

    def _add_player(self, name: str) -> None:
        if name not in self.players:
            self.players.append(name)

    def record(self, a: str, b: str, scores: Iterable[float]) -> None:
        """Games of ``a`` against ``b``, each by ``a``'s score: > 0 a win, 0 a draw, < 0 a loss."""
        self._add_player(a)
        self._add_player(b)
        counts = self._results.setdefault((a, b), [0, 0, 0])
        for score in scores:
            counts[0 if score > 0 else 1 if score == 0 else 2] += 1

    def elo(self) -> dict[str, float | None]:
        """Every player's Elo rating (one decimal), anchored at :data:`ANCHOR` (else the first player) = 0, the
        anchor first, then the players in the order they first played; None for a player who met nobody of the
        anchor's group."""
        if not self.players:
            return {}
        index = {name: i for i, name in enumerate(self.players)}
        P = len(self.players)
        wins = torch.zeros(P, P, dtype=torch.float64)
        draws = torch.zeros(P, P, dtype=torch.float64)
        for (a, b), (won, drawn, lost) in self._results.items():
            i, j = index[a], index[b]
            wins[i, j] += won
            wins[j, i] += lost
            draws[i, j] += drawn
        anchor = index.get(ANCHOR, 0)
        ratings = core.elo_ratings(wins, draws, anchor, VIRTUAL_DRAWS).tolist()
        order = [anchor] + [i for i in range(P) if i != anchor]  # the anchor first
        return {self.players[i]: None if ratings[i] != ratings[i] else round(ratings[i], 1) for i in order}
