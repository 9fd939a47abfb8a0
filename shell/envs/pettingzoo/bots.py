"""Scripted players for PettingZoo's classic games, to train against (``selfplay.bots``) or to evaluate against
(``run.eval_opponents``): functions of ``(observation, action_mask)`` that return a move (:data:`shell.games.Bot`).

- :func:`connect_four_greedy`: connect four's column that completes four for the mover, if there is one; else a
  uniform-random legal column. It never blocks, so it is weaker than a player that also blocks, but it takes every
  win it is left: a learner that plays it learns to block (``configs/connect-four.toml`` trains against it in some
  of its games).
- :func:`connect_four_blocker`: the greedy bot that also blocks: a winning column if there is one, else a column
  where the other seat would win next (so a single threat never wins against it), else a uniform-random legal
  column. A learner that plays it has to make two threats at once to win.
- :func:`connect_four_careful`: the blocker that also looks one move further: of the columns left after it finds no
  win and no block, it plays one that does not let the other seat win on top of its own piece, when there is one. A
  learner that plays it can no longer wait for a random move to open a win: it has to build threats it can keep.
- :func:`tictactoe_blocker`: tic-tac-toe's one-ply player: a square that completes three for the mover, else one
  that the other seat would complete next, else a uniform-random empty square. It punishes every move that leaves
  a fork to it (it blocks, and its block may make the fork), which random moves seldom do (``configs/tictactoe.toml``
  trains against it in some of its games).

The observation is the seat's as the policy sees it: tic-tac-toe's ``[3, 3, 2]`` planes (or ``[18]``; square
``3 i + j`` at ``[i, j]``, plane 0 the mover's), connect four's ``[6, 7, 2]`` planes (or the same flattened,
``[84]``; plane 0 the mover's pieces, plane 1 the other seat's; row 0 the top), in a dict under ``"observation"`` or
bare. A bot draws its random moves from its own generator, seeded once per process: a run repeats its games.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["connect_four_blocker", "connect_four_careful", "connect_four_greedy", "connect_four_wins",
           "tictactoe_blocker"]

ROWS, COLUMNS = 6, 7
_RNG = np.random.default_rng(0)


def _planes(observation: Any) -> np.ndarray:
    obs = observation["observation"] if isinstance(observation, dict) else observation
    return np.asarray(obs).reshape(ROWS, COLUMNS, 2)


def connect_four_wins(pieces: np.ndarray, filled: np.ndarray, column: int) -> bool:
    """Whether a piece dropped into ``column`` completes four in a row for ``pieces``.

    Args:
        pieces: ``[6, 7]`` bool, the mover's pieces (row 0 the top).
        filled: ``[6, 7]`` bool, every piece on the board.
        column: the column, ``0..6``, with room left.
    """
    empty = np.flatnonzero(~filled[:, column])
    if len(empty) == 0:
        return False
    row = int(empty.max())  # the piece falls to the lowest empty row
    for dr, dc in ((0, 1), (1, 0), (1, 1), (1, -1)):
        count = 1
        for sign in (1, -1):
            r, c = row + sign * dr, column + sign * dc
            while 0 <= r < ROWS and 0 <= c < COLUMNS and pieces[r, c]:
                count += 1
                r, c = r + sign * dr, c + sign * dc
        if count >= 4:
            return True
    return False


def _board(observation: Any, action_mask: np.ndarray) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """The planes ``[6, 7, 2]`` bool, every piece ``[6, 7]`` bool and the legal columns."""
    planes = _planes(observation).astype(bool)
    return planes, planes.any(axis=2), np.flatnonzero(action_mask).tolist()


def _winning(planes: np.ndarray, filled: np.ndarray, legal: list[int], planes_to_check: tuple[int, ...]) -> int | None:
    """A legal column that completes four for the first of ``planes_to_check`` (0: the mover's pieces, 1: the other
    seat's) that has one, drawn uniformly among them; None when none has."""
    for plane in planes_to_check:
        hits = [c for c in legal if connect_four_wins(planes[:, :, plane], filled, c)]
        if hits:
            return int(_RNG.choice(hits))
    return None


def _first_wins(observation: Any, action_mask: np.ndarray, planes_to_check: tuple[int, ...]) -> int:
    """:func:`_winning`, else a uniform-random legal column."""
    planes, filled, legal = _board(observation, action_mask)
    column = _winning(planes, filled, legal, planes_to_check)
    return int(_RNG.choice(legal)) if column is None else column


def connect_four_greedy(observation: Any, action_mask: np.ndarray) -> int:
    """A column that wins at once for the mover if there is one, else a uniform-random legal column.

    Args:
        observation: the mover's planes (see the module doc).
        action_mask: ``[7]`` bool, the columns with room left.
    """
    return _first_wins(observation, action_mask, (0,))


def connect_four_blocker(observation: Any, action_mask: np.ndarray) -> int:
    """A column that wins at once for the mover, else one that the other seat would win with next (a random one of
    several), else a uniform-random legal column.

    Args:
        observation: the mover's planes (see the module doc).
        action_mask: ``[7]`` bool, the columns with room left.
    """
    return _first_wins(observation, action_mask, (0, 1))


def connect_four_careful(observation: Any, action_mask: np.ndarray) -> int:
    """A column that wins at once for the mover, else one that the other seat would win with next, else a
    uniform-random legal column after which the other seat cannot win at once on top of it (any legal column when
    every one gives that win away).

    Args:
        observation: the mover's planes (see the module doc).
        action_mask: ``[7]`` bool, the columns with room left.
    """
    planes, filled, legal = _board(observation, action_mask)
    column = _winning(planes, filled, legal, (0, 1))
    if column is not None:
        return column
    safe = []
    for column in legal:
        row = int(np.flatnonzero(~filled[:, column]).max())
        after = filled.copy()
        after[row, column] = True  # the mover's piece; the other seat's next piece in this column lands above it
        if not connect_four_wins(planes[:, :, 1], after, column):
            safe.append(column)
    return int(_RNG.choice(safe or legal))


#: tic-tac-toe's eight lines of three squares (square ``3 i + j``)
TICTACTOE_LINES = ((0, 1, 2), (3, 4, 5), (6, 7, 8), (0, 3, 6), (1, 4, 7), (2, 5, 8), (0, 4, 8), (2, 4, 6))


def tictactoe_blocker(observation: Any, action_mask: np.ndarray) -> int:
    """An empty square that completes a line of three for the mover, else one that the other seat would complete
    next (a random one of several), else a uniform-random empty square.

    Args:
        observation: the mover's planes ``[3, 3, 2]`` or ``[18]`` (see the module doc).
        action_mask: ``[9]`` bool, the empty squares.
    """
    obs = observation["observation"] if isinstance(observation, dict) else observation
    planes = np.asarray(obs).reshape(9, 2).astype(bool)
    legal = np.flatnonzero(action_mask).tolist()
    for plane in (0, 1):  # the mover's win first, then the other seat's
        hits = [a for a in legal if any(a in line and sum(planes[b, plane] for b in line if b != a) == 2
                                        for line in TICTACTOE_LINES)]
        if hits:
            return int(_RNG.choice(hits))
    return int(_RNG.choice(legal))
