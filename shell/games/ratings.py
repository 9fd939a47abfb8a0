"""Elo ratings of a turn-based game's players from their evaluation games (:func:`core.elo_ratings`), in one object.

:class:`Ratings` is what a run holds: which players an evaluation rates (the policy against each evaluation opponent,
and the self-play pool's snapshots against the named opponents and each other), the games between snapshots (played
once per run, with seeds of their own, and kept), the Elo fit and the fields it writes (metrics.csv's ``elo`` column,
the summary's ``elo``). A :class:`MatchTable` counts, for each pair of named players, the games each won and the
games drawn; its :meth:`MatchTable.elo` is the Bradley-Terry (Elo) fit of all of them at once, anchored at
``"random"`` (the uniform-random player) = 0, or at the first player when no random player took part. The fit depends
on the counts only, not on the order of the games, and adds one virtual draw to every pair that met, so a player who
never lost still has a finite rating."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import gymnasium as gym
import torch

import core
from shell.envs.base import LaneSpec
from shell.games.opponents import Bot, Opponent, SnapshotOpponent, named_opponent, snapshot_name
from shell.logs import GAME_FIELDS
from shell.seeding import rating_seed

__all__ = ["ANCHOR", "POLICY", "VIRTUAL_DRAWS", "MatchTable", "Ratings"]

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
        # + 0.0: a rating that rounds to zero from below is 0.0, not -0.0
        return {self.players[i]: None if ratings[i] != ratings[i] else round(ratings[i], 1) + 0.0 for i in order}


Play = Callable[[torch.nn.Module, Opponent, torch.Generator], list[float]]
"""``play(player, opponent, sampling) -> scores``: the rating games of ``player`` (sampling its moves from
``sampling``) against ``opponent``, one score per game by ``player``'s side (the evaluation's episode loop)."""


class Ratings:
    """The Elo ratings of a run's game (see the module doc); for an env that is not a turn-based game of Discrete
    moves it rates nothing and writes no field.

    Args:
        specs: the env's lanes.
        seed: the run's seed (``run.seed``).
        seed_scheme: the run's ``run.seed_scheme``.

    Attributes:
        rated: the env is a game whose players are rated.
        fields: the metrics.csv columns it adds after :data:`shell.logs.CSV_FIELDS` (:data:`shell.logs.GAME_FIELDS`
            for a rated game, none otherwise).
    """

    def __init__(self, specs: dict[Any, LaneSpec], seed: int, seed_scheme: str):
        self.rated = self.serves(specs)
        self.fields: tuple[str, ...] = GAME_FIELDS if self.rated else ()
        self.seed, self.seed_scheme = seed, seed_scheme
        self._pool_games: dict[tuple[str, str], list[float]] = {}  # the snapshots' games by pair of names, once

    @staticmethod
    def serves(specs: dict[Any, LaneSpec]) -> bool:
        """A turn-based game whose seats all take Discrete actions (a uniform legal move is defined)."""
        return all(spec.turns and isinstance(spec.action_space, gym.spaces.Discrete) for spec in specs.values())

    def snapshot_opponent(self, update: int, player: torch.nn.Module, device: torch.device) -> SnapshotOpponent:
        """The evaluated policy's opponent of a pool's snapshot: its sampled moves from a stream of its own
        (:func:`shell.seeding.rating_seed`), the same in every evaluation."""
        generator = torch.Generator(device).manual_seed(rating_seed(self.seed, self.seed_scheme, 0, update))
        return SnapshotOpponent(snapshot_name(update), player, generator)

    def rate(self, policy_games: dict[str, list[float]], named: dict[str, Bot | None],
             snapshots: dict[int, torch.nn.Module], device: torch.device, play: Play) -> dict[str, float | None]:
        """Every player's Elo rating after an evaluation (:meth:`MatchTable.elo`, ``"random"`` = 0).

        The table holds the policy's games (``policy_games``: its scores against each opponent, by name) and the
        games of each snapshot (``snapshots``, by the update after which it was taken), sampling its moves, against
        each named opponent (``named``: ``run.eval_opponents`` with their bots) and each later snapshot: those are
        played through ``play`` once per pair in the run, with seeds of their own, and kept; a pair whose snapshot
        left the pool is forgotten.

        Raises:
            TrainingError: a bot returned an illegal move.
        """
        table = MatchTable()
        for name, scores in policy_games.items():
            table.record(POLICY, name, scores)
        if not snapshots:
            return table.elo()
        order = sorted(snapshots)
        names = {snapshot_name(u) for u in order}
        for gone in [pair for pair in self._pool_games
                     if not names.issuperset(p for p in pair if p.startswith("snapshot@"))]:
            del self._pool_games[gone]
        seed, scheme = self.seed, self.seed_scheme
        for a, u in enumerate(order):
            rivals: list[tuple[tuple[int, ...], Opponent]] = [
                ((1, u, k), named_opponent(name, bot, torch.Generator(device).manual_seed(
                    rating_seed(seed, scheme, 2, u, k)), "evaluation opponent"))
                for k, (name, bot) in enumerate(named.items())]
            rivals += [((3, u, v), SnapshotOpponent(snapshot_name(v), snapshots[v], torch.Generator(device).manual_seed(
                rating_seed(seed, scheme, 4, u, v)))) for v in order[a + 1:]]
            for key, opponent in rivals:
                pair = (snapshot_name(u), opponent.name)
                if pair not in self._pool_games:
                    sampling = torch.Generator(device).manual_seed(rating_seed(seed, scheme, *key))
                    self._pool_games[pair] = play(snapshots[u], opponent, sampling)
                table.record(*pair, self._pool_games[pair])
        return table.elo()

    def columns(self, ratings: dict[str, float | None] | None) -> dict[str, Any]:
        """The row's :attr:`fields` after an evaluation that gave ``ratings`` (``""`` where it rated nothing, and
        for an update without an evaluation: ``ratings`` None)."""
        if not self.rated:
            return {}
        elo = None if ratings is None else ratings.get(POLICY)
        return {"elo": "" if elo is None else elo}
