"""Reference opponents for the turn-based tests (issue 36): bots of ``run.eval_opponents``, each a function of
``(observation, action_mask)`` returning an action, as :class:`shell.games.BotOpponent` calls them.

- :func:`tictactoe_minimax`: a perfect tic-tac-toe player; among the moves of equal value it picks at random.
- :func:`connect_four_one_ply`: wins if it can, blocks if it must, else a random legal column.

The observation is the row's (PettingZoo's planes flattened: tic-tac-toe ``[18]`` from 3x3x2, connect four
``[84]`` from 6x7x2; plane 0 the mover's pieces, plane 1 the other seat's), in a dict under ``"observation"``.
Tic-tac-toe's square ``a`` (its action) is the plane cell ``[a // 3, a % 3]``; connect four's action is a column.
These are the tests' own opponents, not the bar's held-out ones.
"""

from __future__ import annotations

import functools

import numpy as np

RNG = np.random.default_rng(12345)
LINES = [(0, 1, 2), (3, 4, 5), (6, 7, 8), (0, 3, 6), (1, 4, 7), (2, 5, 8), (0, 4, 8), (2, 4, 6)]


def _planes(observation, shape: tuple[int, ...]) -> np.ndarray:
    obs = observation["observation"] if isinstance(observation, dict) else observation
    return np.asarray(obs).reshape(shape)


def tictactoe_squares(observation) -> tuple[int, ...]:
    """The nine squares by action index: 1 the mover's, -1 the other seat's, 0 empty."""
    planes = _planes(observation, (3, 3, 2))
    return tuple(int(planes[a // 3, a % 3, 0]) - int(planes[a // 3, a % 3, 1]) for a in range(9))


def _winner(board: tuple[int, ...]) -> int:
    for a, b, c in LINES:
        if board[a] != 0 and board[a] == board[b] == board[c]:
            return board[a]
    return 0


@functools.cache
def _value(board: tuple[int, ...]) -> int:
    """The value of ``board`` for the player to move (1 the mover's pieces): +1 win, 0 draw, -1 loss."""
    if _winner(board):
        return -1  # the previous mover (now -1 after the flip) completed a line
    moves = [a for a in range(9) if board[a] == 0]
    if not moves:
        return 0
    return max(-_value(_play(board, a)) for a in moves)


def _play(board: tuple[int, ...], a: int) -> tuple[int, ...]:
    """The mover plays ``a``; the board seen by the next mover (signs flipped)."""
    return tuple(-(1 if i == a else v) for i, v in enumerate(board))


def tictactoe_minimax(observation, action_mask) -> int:
    """A perfect tic-tac-toe move, ties broken at random."""
    board = tictactoe_squares(observation)
    moves = [a for a in range(9) if action_mask[a]]
    values = {a: -_value(_play(board, a)) for a in moves}
    best = max(values.values())
    return int(RNG.choice([a for a in moves if values[a] == best]))


def _c4_wins(board: np.ndarray, player: int, column: int) -> bool:
    """Whether ``player`` (plane index) completes four by dropping into ``column`` of the ``[6, 7, 2]`` board."""
    filled = board[:, column].any(axis=1)
    empty = np.flatnonzero(~filled)
    if len(empty) == 0:
        return False
    row = int(empty.max())  # row 0 is the top
    mine = board[:, :, player].astype(bool).copy()
    mine[row, column] = True
    for dr, dc in ((0, 1), (1, 0), (1, 1), (1, -1)):
        count = 1
        for sign in (1, -1):
            r, c = row + sign * dr, column + sign * dc
            while 0 <= r < 6 and 0 <= c < 7 and mine[r, c]:
                count += 1
                r, c = r + sign * dr, c + sign * dc
        if count >= 4:
            return True
    return False


def connect_four_one_ply(observation, action_mask) -> int:
    """Win if it can, block if it must, else a random legal column."""
    board = _planes(observation, (6, 7, 2))
    legal = [c for c in range(7) if action_mask[c]]
    for player in (0, 1):  # 0: a winning drop of its own; 1: the other seat's, to block
        for c in legal:
            if _c4_wins(board, player, c):
                return c
    return int(RNG.choice(legal))


def uniform(observation, action_mask) -> int:
    """A uniform legal move (a bot that plays as "random" does)."""
    return int(RNG.choice(np.flatnonzero(action_mask)))


def illegal(observation, action_mask) -> int:
    """Always the first illegal move (every move when none is illegal: the action count)."""
    banned = np.flatnonzero(~np.asarray(action_mask, dtype=bool))
    return int(banned[0]) if len(banned) else len(action_mask)


not_a_function = 3


def raising(observation, action_mask) -> int:
    """A bot with a bug of its own: it raises."""
    raise ZeroDivisionError("division by zero in the bot")


def first_legal(observation, action_mask) -> int:
    """The first legal move: a bot without a random stream, so that two runs in one process play it alike."""
    return int(np.flatnonzero(action_mask)[0])
