"""Why a connect-four run loses: its tactical errors, on random positions and in games against the one-ply player.

    python bench/connect_four_errors.py RUN_DIR [--positions 3000] [--games 100]

- **Positions**: boards of 4-29 uniform-random plies (no game over, seeded); on those where the mover can complete
  four, how often the run's deterministic policy does ("take win"); on those where it cannot and the other seat
  threatens exactly one column, how often it blocks it ("block").
- **Games**: ``--games`` games per seat against ``tests/integration/game_bots.py:connect_four_one_ply`` (plain
  PettingZoo, game g seeded g); for each lost game, the policy's first tactical error: a win of its own left
  untaken ("missed win"), a single threat not blocked ("no block"), two threats at once ("double threat faced"),
  a move under a cell where the other seat then wins ("gave a win"), or none of these.

Prints one JSON object.
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from shell.envs.pettingzoo.bots import connect_four_wins  # noqa: E402


def wins(board: np.ndarray, plane: int, column: int) -> bool:
    """Whether the seat of ``plane`` completes four by dropping into ``column`` of the ``[6, 7, 2]`` board."""
    return connect_four_wins(board[:, :, plane].astype(bool), board.any(axis=2), column)


def drop(board: np.ndarray, column: int, plane: int) -> np.ndarray:
    out = board.copy()
    out[int(np.flatnonzero(~out[:, column].any(axis=1)).max()), column, plane] = 1
    return out


def positions(policy, count: int, rng: np.random.Generator) -> dict:
    took = could = blocked = threatened = 0
    while could + threatened < count:
        board = np.zeros((6, 7, 2), np.int8)  # plane 0: the mover's pieces
        for _ in range(int(rng.integers(4, 30))):
            legal = [c for c in range(7) if not board[0, c].any()]
            column = int(rng.choice(legal))
            if wins(board, 0, column):
                break
            board = drop(board, column, 0)[:, :, ::-1].copy()  # the other seat moves next
        mask = np.array([not board[0, c].any() for c in range(7)])
        own = [c for c in range(7) if mask[c] and wins(board, 0, c)]
        theirs = [c for c in range(7) if mask[c] and wins(board, 1, c)]
        if not own and len(theirs) != 1:
            continue
        move = int(policy({"player_0": {"observation": board, "action_mask": mask.astype(np.int8)}})["player_0"])
        if own:
            could, took = could + 1, took + (move in own)
        else:
            threatened, blocked = threatened + 1, blocked + (move in theirs)
    return {"take_win": round(took / could, 3), "win_positions": could, "block": round(blocked / threatened, 3),
            "threat_positions": threatened}


def games(policy, count: int) -> dict:
    from pettingzoo.classic import connect_four_v3

    from tests.integration.game_bots import connect_four_one_ply

    out = {}
    for seat in ("player_0", "player_1"):
        results, errors = collections.Counter(), collections.Counter()
        for g in range(count):
            env = connect_four_v3.env()
            env.reset(seed=g)
            first = None
            for agent in env.agent_iter():
                obs, reward, term, trunc, _ = env.last()
                if term or trunc:
                    if agent == seat:
                        results[{1: "win", 0: "draw", -1: "loss"}[int(reward)]] += 1
                        if reward < 0:
                            errors[first or "none of these"] += 1
                    env.step(None)
                    continue
                board, mask = obs["observation"], obs["action_mask"].astype(bool)
                if agent != seat:
                    env.step(connect_four_one_ply(obs, mask))
                    continue
                move = int(policy({agent: obs})[agent])
                if first is None:
                    own = [c for c in range(7) if mask[c] and wins(board, 0, c)]
                    theirs = [c for c in range(7) if mask[c] and wins(board, 1, c)]
                    if own and move not in own:
                        first = "missed win"
                    elif not own and theirs and move not in theirs:
                        first = "no block" if len(theirs) == 1 else "double threat faced"
                    elif not theirs:
                        after = drop(board, move, 0)
                        if any(not after[0, c].any() and wins(after, 1, c) for c in range(7)):
                            first = "gave a win"
                env.step(move)
        out[seat] = {"results": dict(results), "first_error_of_each_loss": dict(errors)}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--positions", type=int, default=3000)
    parser.add_argument("--games", type=int, default=100)
    args = parser.parse_args()
    from shell.inference import load_policy

    policy = load_policy(args.run_dir)
    print(json.dumps({"run_dir": str(args.run_dir), **positions(policy, args.positions, np.random.default_rng(0)),
                      "vs_one_ply": games(policy, args.games)}))


if __name__ == "__main__":
    main()
