"""A tic-tac-toe policy's exact chance to lose to the perfect player, per seat: no sampling noise.

The perfect player (``tests/integration/game_bots.py:tictactoe_minimax``) breaks ties uniformly at random and the
policy plays deterministically (its argmax under the mask), so the games form a finite tree: this walks every
branch and weighs each by the product of the tie-break chances. ``bench/games_bar.py``'s 1,000 games per seat
estimate the same number (a policy that loses 0.3% of its games shows no loss in 1,000 about 5% of the time).

    python bench/tictactoe_exact.py RUN_DIR_OR_CHECKPOINT [...]

Prints one JSON object per run: the loss chance in % as first and as second mover, and, as second mover, the
loss chance after each of the perfect player's nine openings (square index = action).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from shell.inference import load_policy  # noqa: E402
from tests.integration.game_bots import _play, _value, _winner  # noqa: E402

EMPTY = (0,) * 9


def observation(board: tuple[int, ...]) -> dict[str, np.ndarray]:
    """PettingZoo's tic-tac-toe observation of ``board`` (1 the mover's squares, -1 the other seat's)."""
    planes = np.zeros((3, 3, 2), np.float32)
    for a, v in enumerate(board):
        if v:
            planes[a // 3, a % 3, 0 if v == 1 else 1] = 1.0
    return {"observation": planes, "action_mask": np.array([v == 0 for v in board], np.int8)}


def exact(target: str) -> dict:
    policy = load_policy(target)
    seat = "player_1"  # one policy plays both seats; the observation is the mover's
    moves: dict[tuple[int, ...], int] = {}

    def mine(board: tuple[int, ...]) -> int:
        if board not in moves:
            moves[board] = int(np.asarray(policy({seat: observation(board)})[seat]))
        return moves[board]

    def loss(board: tuple[int, ...], policy_to_move: bool) -> float:
        """The chance that the policy loses from ``board`` (seen by the seat to move)."""
        if _winner(board):  # the previous mover completed a line
            return 1.0 if policy_to_move else 0.0
        free = [a for a in range(9) if board[a] == 0]
        if not free:
            return 0.0
        if policy_to_move:
            return loss(_play(board, mine(board)), False)
        best = max(-_value(_play(board, a)) for a in free)
        ties = [a for a in free if -_value(_play(board, a)) == best]
        return sum(loss(_play(board, a), True) for a in ties) / len(ties)

    return {"run": str(target), "loss_first_pct": round(100 * loss(EMPTY, True), 2),
            "loss_second_pct": round(100 * loss(EMPTY, False), 2),
            "loss_second_by_opening_pct": {a: round(100 * loss(_play(EMPTY, a), True), 2) for a in range(9)}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", help="run dirs or checkpoints of tic-tac-toe runs")
    for target in parser.parse_args().runs:
        print(json.dumps(exact(target)), flush=True)


if __name__ == "__main__":
    main()
