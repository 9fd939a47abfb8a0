"""bench/connect_four_grade.py (issue 63): the solver's verdicts on positions of known value, the column order that
bitbully and PettingZoo share, and a tiny run graded end to end through the command line."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("bitbully")
pytest.importorskip("pettingzoo.classic")

from bitbully import BitBully, Board

from shell.api import train

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench" / "connect_four_grade.py"
SPEC = importlib.util.spec_from_file_location("connect_four_grade", SCRIPT)
grade_module = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(grade_module)

TINY = {"env.num_envs": 4, "ppo.num_steps": 16, "ppo.num_minibatches": 2, "ppo.update_epochs": 1,
        "run.eval_episodes": 0, "run.loggers": [], "selfplay.opening_moves": 0, "selfplay.vary_openings": False,
        "selfplay.bots": [], "selfplay.bot_prob": 0.0}


@pytest.fixture(scope="module")
def solver():
    return BitBully()


# Each position by its columns from the empty board (bitbully's own scores, for the mover, checked below).
CASES = [
    # X (to move) has three in column 0 and O three in column 1: 0 wins at once; blocking at 1 loses (-3), as does
    # anything else (O wins next)
    ("010101", {0: 18, 1: -3, 2: -18, 3: -18, 4: -18, 5: -18, 6: -18}, "won", {0: True, 1: False, 3: False}),
    # a won position where every other column wins more slowly (still right) but column 0 only draws (wrong)
    ("45525100645214", {5: 14, 2: 2, 4: 2, 1: 1, 3: 1, 6: 1, 0: 0}, "won", {5: True, 2: True, 6: True, 0: False}),
    # a drawn position: column 2 keeps the draw, every other column loses
    ("2000540", {2: 0, 5: -2, 1: -3, 3: -3, 4: -3, 0: -4, 6: -4}, "drawn", {2: True, 5: False, 0: False}),
]


@pytest.mark.parametrize(("moves", "scores", "kind", "verdicts"), CASES)
def test_a_move_is_right_when_it_keeps_the_positions_value(solver, moves, scores, kind, verdicts):
    board = Board(moves)
    assert solver.score_all_moves(board) == scores
    for column, right in verdicts.items():
        assert grade_module.grade(solver, board, column) == (kind, right), column


def test_a_lost_position_is_not_graded_and_an_illegal_column_raises(solver):
    lost = Board("3536103063346")
    assert max(solver.score_all_moves(lost).values()) < 0
    assert all(grade_module.grade(solver, lost, c) is None for c in range(7))
    with pytest.raises(ValueError, match="column 3 is not legal"):
        grade_module.grade(solver, Board("333333"), 3)


def test_the_solver_takes_a_win_and_bitbully_columns_are_pettingzoos():
    rng = np.random.default_rng(0)
    assert all(grade_module.solver_move(BitBully(), Board("010101"), rng) == 0 for _ in range(3))
    from pettingzoo.classic import connect_four_v3

    moves = [0, 0, 1, 6, 5, 5, 5, 2]  # not symmetric: a mirrored column order would differ
    env = connect_four_v3.env()
    env.reset(seed=0)
    for m in moves:
        env.step(m)
    obs = env.observe("player_0")["observation"]
    grade_module.check_agrees(Board(moves), obs, "player_0")
    with pytest.raises(RuntimeError, match="differ"):
        grade_module.check_agrees(Board([6 - m for m in moves]), obs, "player_0")
    with pytest.raises(RuntimeError, match="differ"):  # the seats swapped
        grade_module.check_agrees(Board(moves), obs, "player_1")


def test_a_tiny_run_is_graded_with_counts_that_add_up(tmp_path):
    train("connect-four", run_dir=tmp_path / "run", total_timesteps=128, overrides=TINY, progress=False)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path / "run"), "--games", "2", "--solver-games", "2"],
                          capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["run_dir"] == str(tmp_path / "run")
    right, counts, graded = out["right_move_fraction"], out["moves_graded"], out["right_moves"]
    assert set(right) == set(counts) == set(graded) == {"overall", "won", "drawn", *grade_module.PHASES}
    for key, fraction in right.items():
        assert 0 <= graded[key] <= counts[key]
        assert fraction == (round(graded[key] / counts[key], 4) if counts[key] else None)
    assert counts["won"] + counts["drawn"] == counts["overall"] == sum(counts[p] for p in grade_module.PHASES)
    assert graded["won"] + graded["drawn"] == graded["overall"] == sum(graded[p] for p in grade_module.PHASES)
    moves = out["policy_moves"]
    assert moves["graded"] == counts["overall"] and moves["graded"] + moves["in_lost_positions"] == moves["total"]
    assert moves["total"] >= 2 * 4 + 2 * 3  # a game lasts 7 plies at least: 4 of the first seat's, 3 of the second's
    assert counts["moves_1_10"] >= 1  # the first mover's first move is always graded: the empty board is won
    assert all(sum(seat.values()) == 2 for seat in out["vs_mixed_opponent"].values())
    assert set(out["vs_solver"]) == {"policy_first", "policy_second"}
    assert all(sum(r.values()) == 2 for r in out["vs_solver"].values())
    assert out["vs_solver"]["policy_second"]["loss"] == 2  # the first mover wins with perfect play: the solver does
    assert out["seconds"] > 0
