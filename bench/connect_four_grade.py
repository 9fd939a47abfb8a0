"""A connect-four run's moves graded by an exact solver (bitbully): does each keep a won game won, a drawn one drawn?

    python bench/connect_four_grade.py RUN_DIR [--games 100] [--solver-games 50] [--seed 0]

- **Graded games**: the run's deterministic policy plays ``--games`` games in each seat (plain PettingZoo
  ``connect_four_v3``) against a mixed opponent: at each of its moves, with probability 1/2 a uniform-random legal
  column, else the one-ply player's move (``tests/integration/game_bots.py:connect_four_one_ply``: wins if it can,
  blocks if it must, else random). At each of the policy's moves in a position that is not already lost (some move
  scores >= 0), bitbully scores every legal column exactly; the move is right when its score has the sign of the
  best move's (a won position stays won, a drawn one drawn). Reported: the fraction of right moves overall, on won
  and on drawn positions, and by the game's move number (plies of both seats counted from 1: 1-10, 11-20, 21+).
- **Against the solver**: ``--solver-games`` games with the policy as first mover and as many as second mover
  against the solver itself (the best-scoring move, ties broken at random): wins, draws and losses.

Every random draw (the mixed opponent's, the one-ply player's, the solver's tie-breaks) comes from one numpy
generator seeded ``--seed``. bitbully (``pip install bitbully==0.0.79``, the bench extra) solves from its bundled
12-ply opening book: nothing is downloaded. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bitbully import BitBully, Board  # noqa: E402

PHASES = ("moves_1_10", "moves_11_20", "moves_21_plus")
SEATS = ("player_0", "player_1")  # player_0 moves first


def phase(ply: int) -> str:
    """The phase of the game's move number ``ply`` (both seats' plies, from 1)."""
    return PHASES[0] if ply <= 10 else PHASES[1] if ply <= 20 else PHASES[2]


def grade(solver: BitBully, board: Board, column: int) -> tuple[str, bool] | None:
    """Whether the mover's ``column`` on ``board`` is right: ``("won" | "drawn", right)``; None where the position
    is already lost (every legal column scores < 0), which is not graded.

    bitbully's score is from the mover's side: > 0 a win, 0 a draw, < 0 a loss under perfect play (its magnitude
    counts how soon); the move is right when its score has the sign of the best column's.

    Raises:
        ValueError: ``column`` is not a legal column of ``board``.
    """
    scores = solver.score_all_moves(board)
    if column not in scores:
        raise ValueError(f"column {column} is not legal on the board (legal: {sorted(scores)}):\n{board}")
    best = max(scores.values())
    if best < 0:
        return None
    return ("won" if best > 0 else "drawn"), bool(np.sign(scores[column]) == np.sign(best))


def solver_move(solver: BitBully, board: Board, rng: np.random.Generator) -> int:
    """The solver's move: a best-scoring column, ties broken at random from ``rng``."""
    scores = solver.score_all_moves(board)
    best = max(scores.values())
    return int(rng.choice(sorted(c for c, v in scores.items() if v == best)))


def check_agrees(board: Board, observation: np.ndarray, agent: str) -> None:
    """Raise where bitbully's board differs from PettingZoo's observation of ``agent`` (the seat to move).

    PettingZoo: ``[6, 7, 2]``, row 0 the top, plane 0 the mover's pieces. bitbully's ``to_array()``: ``[7][6]``,
    ``[column][row]`` with row 0 the bottom, 1 the first mover's pieces (player_0), 2 the second's. Column c is the
    same column in both (0 the leftmost): checked by dropping into columns 0 0 1 6 5 5 5 2 in both and comparing.
    """
    cells = np.asarray(board.to_array(), np.int8).T[::-1]  # -> [6, 7], row 0 the top
    mine, theirs = (1, 2) if agent == SEATS[0] else (2, 1)
    planes = np.asarray(observation).reshape(6, 7, 2)
    if not ((planes[:, :, 0] == 1) == (cells == mine)).all() or not ((planes[:, :, 1] == 1) == (cells == theirs)).all():
        raise RuntimeError(f"bitbully's board and PettingZoo's differ before {agent}'s move:\n{board}\n{planes}")


def play(policy, seat: str, opponent, solver: BitBully, rng: np.random.Generator, graded: list | None) -> int:
    """One game: the policy in ``seat``, ``opponent(obs, mask, board)`` in the other; each of the policy's graded
    moves appended to ``graded`` as ``(kind, phase, right)``, ``("lost", phase, None)`` for a move in a lost
    position (``graded`` None: grade none). The policy's result: 1, 0, -1.

    bitbully's Board replays the columns played in the PettingZoo game; it is checked against the observation at
    every move, and a column it calls illegal raises.
    """
    from pettingzoo.classic import connect_four_v3

    env = connect_four_v3.env()
    env.reset(seed=0)  # the game has no randomness of its own
    board, ply, result = Board(), 0, None
    for agent in env.agent_iter():
        obs, reward, term, trunc, _ = env.last()
        if term or trunc:
            if agent == seat:
                result = int(reward)
            env.step(None)
            continue
        check_agrees(board, obs["observation"], agent)
        mask = np.asarray(obs["action_mask"]).astype(bool)
        ply += 1
        if agent == seat:
            column = int(np.asarray(policy({agent: obs}, action_mask={agent: obs["action_mask"]})[agent]))
            if graded is not None:
                verdict = grade(solver, board, column)
                graded.append(("lost", phase(ply), None) if verdict is None else (verdict[0], phase(ply), verdict[1]))
        else:
            column = int(opponent(obs, mask, board))
        if not mask[column] or not board.play(column):
            raise RuntimeError(f"column {column} at ply {ply} is illegal in PettingZoo or bitbully:\n{board}")
        env.step(column)
    env.close()
    if result is None or (board.winner() is None) != (result == 0):
        raise RuntimeError(f"the game's result {result} disagrees with bitbully's final board:\n{board}")
    return result


def mixed_opponent(rng: np.random.Generator):
    """A uniform-random legal column with probability 1/2, else the one-ply player's move (its random fallback
    drawn from ``rng`` too: game_bots reads its module-level ``RNG`` at each call, lent ``rng`` for the call)."""
    from tests.integration import game_bots

    def move(obs, mask, board) -> int:
        if rng.random() < 0.5:
            return int(rng.choice(np.flatnonzero(mask)))
        saved, game_bots.RNG = game_bots.RNG, rng
        try:
            return game_bots.connect_four_one_ply(obs, mask)
        finally:
            game_bots.RNG = saved

    return move


def tally(graded: list[tuple[str, str, bool | None]]) -> dict:
    """The fraction of right moves (None where no move was graded), the count of right and of graded moves: each
    overall, on won and drawn positions, and by phase; and the counts of all the policy's moves: graded or in lost
    positions."""
    groups: dict[str, list[bool]] = {"overall": [], "won": [], "drawn": [], **{p: [] for p in PHASES}}
    lost = 0
    for kind, when, right in graded:
        if kind == "lost":
            lost += 1
            continue
        for key in ("overall", kind, when):
            groups[key].append(bool(right))
    return {"right_move_fraction": {k: round(sum(v) / len(v), 4) if v else None for k, v in groups.items()},
            "right_moves": {k: sum(v) for k, v in groups.items()},
            "moves_graded": {k: len(v) for k, v in groups.items()},
            "policy_moves": {"total": len(graded), "graded": len(graded) - lost, "in_lost_positions": lost}}


def evaluate(policy, games: int = 100, solver_games: int = 50, seed: int = 0) -> dict:
    """All the figures of the module docstring, as a dict."""
    start = time.perf_counter()
    rng = np.random.default_rng(seed)
    solver = BitBully()  # the default book: 12-ply with distances, bundled (bitbully_databases)
    opponent = mixed_opponent(rng)
    names = {1: "win", 0: "draw", -1: "loss"}
    graded: list[tuple[str, str, bool | None]] = []
    vs_mixed = {}
    for seat in SEATS:
        results = collections.Counter({"win": 0, "draw": 0, "loss": 0})
        for _ in range(games):
            results[names[play(policy, seat, opponent, solver, rng, graded)]] += 1
        vs_mixed[seat] = dict(results)

    def perfect(obs, mask, board) -> int:
        return solver_move(solver, board, rng)

    vs_solver = {}
    for seat, name in zip(SEATS, ("policy_first", "policy_second"), strict=True):
        results = collections.Counter({"win": 0, "draw": 0, "loss": 0})
        for _ in range(solver_games):
            results[names[play(policy, seat, perfect, solver, rng, None)]] += 1
        vs_solver[name] = dict(results)
    return {**tally(graded), "vs_mixed_opponent": vs_mixed,
            "vs_solver": vs_solver, "games_per_seat": games, "solver_games_per_seat": solver_games, "seed": seed,
            "seconds": round(time.perf_counter() - start, 1)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--games", type=int, default=100, help="graded games per seat against the mixed opponent")
    parser.add_argument("--solver-games", type=int, default=50, help="games per seat against the solver")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    from shell.inference import load_policy

    start = time.perf_counter()
    policy = load_policy(args.run_dir)
    out = evaluate(policy, args.games, args.solver_games, args.seed)
    print(json.dumps({"run_dir": str(args.run_dir), **out, "seconds": round(time.perf_counter() - start, 1)}))


if __name__ == "__main__":
    main()
