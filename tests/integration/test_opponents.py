"""Evaluation opponents of turn-based games (``run.eval_opponents``: "random" and bots "module:function") and
``ppo-core play`` (a game against the trained agent, moves on stdin); issue 36."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from shell.api import evaluate, train
from shell.config import load_config
from shell.errors import ConfigError
from shell.games import MatchTable
from shell.games.play import board_text

from .conftest import ROOT
from .test_turns import config

BOTS = "tests.integration.game_bots"
TICTACTOE = {"env.num_envs": 8, "ppo.num_steps": 16, "ppo.num_minibatches": 2, "ppo.update_epochs": 1,
             "run.total_timesteps": 128, "run.loggers": []}


def cli(*args: str, stdin: str = "", timeout: float = 300) -> subprocess.CompletedProcess:
    """``python main.py ARGS`` with ``stdin`` as its input."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, str(ROOT / "main.py"), *args], input=stdin, capture_output=True,
                          text=True, cwd=ROOT, env=env, timeout=timeout)


def test_every_opponent_is_played_seat_by_seat_and_the_mean_is_against_the_first(tmp_path):
    """Duel's last mover (seat_0) wins whatever is played: against "random" and a uniform bot alike."""
    cfg = config(**{"run.eval_episodes": 4, "run.eval_opponents": ["random", f"{BOTS}:uniform"]})
    summary = train(config=cfg, run_dir=tmp_path / "run", progress=False).summary
    expected = {"seat_0": {"win": 1.0, "draw": 0.0, "loss": 0.0, "games": 2},
                "seat_1": {"win": 0.0, "draw": 0.0, "loss": 1.0, "games": 2}}
    counts = {"win", "draw", "loss", "games"}
    assert {name: {seat: {k: v for k, v in rates.items() if k in counts} for seat, rates in seats.items()}
            for name, seats in summary["eval_vs"].items()} == {"random": expected, f"{BOTS}:uniform": expected}
    assert all(1 <= rates["distinct"] <= rates["games"] for seats in summary["eval_vs"].values()
               for rates in seats.values())
    assert summary["eval_episodes"] == 4  # the first opponent's games: eval_return_mean is over them


def test_a_perfect_player_is_never_beaten_by_an_untrained_policy(tmp_path):
    cfg = load_config("tictactoe", {**TICTACTOE, "run.eval_episodes": 20,
                                    "run.eval_opponents": [f"{BOTS}:tictactoe_minimax", "random"]})
    summary = train(config=cfg, run_dir=tmp_path / "run", progress=False).summary
    perfect = summary["eval_vs"][f"{BOTS}:tictactoe_minimax"]
    assert set(perfect) == {"player_1", "player_2"}
    assert all(perfect[seat]["win"] == 0.0 and perfect[seat]["games"] == 10 for seat in perfect)
    assert summary["eval_return_mean"] < 0  # against the first opponent: the perfect player
    assert set(summary["eval_vs"]) == {f"{BOTS}:tictactoe_minimax", "random"}


def test_games_against_a_deterministic_bot_are_counted_once_as_distinct_and_openings_make_them_differ(tmp_path,
                                                                                                       capfd):
    """A deterministic policy against a deterministic bot plays one game per seat however many it counts: eval_vs
    says so (distinct 1) and a warning line does; run.eval_opening_moves makes them differ, with the same openings
    in every evaluation (the same results from the same checkpoint)."""
    opponents = {"run.eval_episodes": 20, "run.eval_opponents": [f"{BOTS}:first_legal", "random"]}
    cfg = load_config("tictactoe", {**TICTACTOE, **opponents})
    summary = train(config=cfg, run_dir=tmp_path / "same", progress=False).summary
    fixed = summary["eval_vs"][f"{BOTS}:first_legal"]
    assert all(fixed[seat]["games"] == 10 and fixed[seat]["distinct"] == 1 for seat in fixed), fixed
    assert all(summary["eval_vs"]["random"][seat]["distinct"] > 1 for seat in fixed)
    warned = [line for line in capfd.readouterr().err.splitlines() if line.startswith("warning: evaluation:")]
    assert warned and all("were one game" in line and "run.eval_opening_moves" in line for line in warned), warned
    assert len(warned) == len(set(warned))  # once per seat and opponent

    cfg = load_config("tictactoe", {**TICTACTOE, **opponents, "run.eval_opening_moves": 2})
    result = train(config=cfg, run_dir=tmp_path / "open", progress=False)
    varied = result.summary["eval_vs"][f"{BOTS}:first_legal"]
    assert all(varied[seat]["distinct"] > 1 for seat in varied), varied
    again = evaluate(tmp_path / "open", episodes=20)
    assert again["eval_vs"] == result.summary["eval_vs"]


@pytest.mark.parametrize(("key", "value"), [("run.eval_opponents", [f"{BOTS}:uniform", "random"]),
                                            ("run.eval_opening_moves", 2)])
def test_opponents_and_openings_of_an_env_that_is_not_a_game_are_refused_in_one_line(tmp_path, key, value):
    """An env whose evaluation plays no opponent would ignore them: refused before training, naming the key."""
    cfg = load_config("cartpole", {key: value, "run.total_timesteps": 64, "env.num_envs": 2, "run.loggers": []})
    with pytest.raises(ConfigError, match=f"^{key} = ") as info:
        train(config=cfg, run_dir=tmp_path / "run", progress=False)
    assert "\n" not in str(info.value) and len(str(info.value)) <= 200 and "CartPole-v1" in str(info.value)
    assert not (tmp_path / "run").exists()


def test_an_elo_rating_that_rounds_to_zero_is_not_negative_zero(monkeypatch):
    """A fit a hair below 0 (the solver's rounding, e.g. -3e-9 for a player level with the anchor) is 0.0."""
    import torch

    from shell.games import ratings

    monkeypatch.setattr(ratings.core, "elo_ratings", lambda *a: torch.tensor([0.0, -3e-9, -0.04], dtype=torch.float64))
    table = MatchTable()
    table.record("random", "policy", [1.0, -1.0])
    table.record("random", "bot", [0.0])
    elo = table.elo()
    assert [str(v) for v in elo.values()] == ["0.0", "0.0", "0.0"], elo


def test_openings_that_cover_whole_games_are_said_to_leave_the_learner_no_move(tmp_path, capfd):
    """selfplay.opening_moves of at least a game's length: every move is random and the learner learns nothing;
    one warning line says so (once), where a shorter opening leaves it moves and says nothing."""
    cfg = load_config("tictactoe", {**TICTACTOE, "run.eval_episodes": 0, "selfplay.opening_moves": 9,
                                    "selfplay.vary_openings": False, "selfplay.random_prob": 0.0,
                                    "selfplay.bot_prob": 0.0, "selfplay.bots": []})
    train(config=cfg, run_dir=tmp_path / "all", progress=False)
    warned = [line for line in capfd.readouterr().err.splitlines() if "the learner made no move" in line]
    assert len(warned) == 1 and "selfplay.opening_moves = 9" in warned[0], warned
    cfg = load_config("tictactoe", {**TICTACTOE, "run.eval_episodes": 0, "selfplay.opening_moves": 2,
                                    "selfplay.vary_openings": False})
    train(config=cfg, run_dir=tmp_path / "some", progress=False)
    assert "the learner made no move" not in capfd.readouterr().err


@pytest.mark.parametrize(("entry", "message"), [
    ("no_such_module_xyz:bot", "cannot import 'no_such_module_xyz'"),
    (f"{BOTS}:missing", "has no 'missing'"),
    (f"{BOTS}:not_a_function", "not a function"),
    ("not a name", "neither \"random\" nor a bot"),
])
def test_an_opponent_that_cannot_be_imported_is_one_line_and_exit_2(tmp_path, entry, message):
    with pytest.raises(ConfigError, match=message) as info:
        train(config=config(**{"run.eval_opponents": [entry]}), run_dir=tmp_path / "run", progress=False)
    assert "\n" not in str(info.value)
    if entry.startswith("no_such"):  # and from the command line: exit 2, before training
        out = cli("--config", "tictactoe", "--run-dir", str(tmp_path / "cli"), "--set",
                  f'run.eval_opponents=["{entry}"]', "--set", "run.loggers=[]")
        assert out.returncode == 2, out.stderr
        assert out.stderr.strip().splitlines()[-1].startswith("error: run.eval_opponents entry")
        assert not (tmp_path / "cli" / "checkpoints").exists()


def test_a_bot_that_plays_an_illegal_move_is_a_training_error_naming_it(tmp_path):
    out = cli("--config", "tictactoe", "--run-dir", str(tmp_path / "run"), "--total-timesteps", "128",
              *[f"--set={k}={json.dumps(v)}" for k, v in TICTACTOE.items() if k != "run.total_timesteps"],
              "--set", f'run.eval_opponents=["{BOTS}:illegal"]', "--set", "run.eval_episodes=2")
    assert out.returncode == 1, out.stderr
    last = out.stderr.strip().splitlines()[-1]
    assert f"'{BOTS}:illegal' played the illegal move" in last and "legal moves were" in last


def test_the_board_is_drawn_from_the_observation_planes():
    import numpy as np

    planes = np.zeros((3, 3, 2), dtype=np.int8)
    planes[1, 1, 0] = 1  # yours: the centre (move 4)
    planes[0, 2, 1] = 1  # the agent's: move 2
    mask = [1, 1, 0, 1, 0, 1, 1, 1, 1]
    assert board_text({"observation": planes}, mask).splitlines() == [" 0  1  O", " 3  X  5", " 6  7  8"]
    four = np.zeros((6, 7, 2), dtype=np.int8)
    four[5, 3, 1] = 1
    lines = board_text(four, [1] * 7).splitlines()
    assert lines[5] == " .  .  .  O  .  .  ." and lines[6] == " 0  1  2  3  4  5  6"


@pytest.mark.parametrize("name", ["connect_four_greedy", "connect_four_blocker", "connect_four_careful"])
def test_the_connect_four_bots_take_every_win_the_blocker_blocks_and_otherwise_they_play_every_legal_column(name):
    """On boards of random play (checked against the tests' own reference, game_bots._c4_wins): where the mover
    can complete four, the bot plays a column that does; the blocker and the careful bot, where only the other seat
    can, play a column that stops it; elsewhere they play legal columns, all of them over the boards, whichever
    shape the planes come in, and the careful bot never one that lets the other seat win on top of it while
    another column does not."""
    import numpy as np

    from shell.envs.pettingzoo import bots

    from .game_bots import _c4_wins

    bot = getattr(bots, name)
    rng = np.random.default_rng(7)
    wins = blocks = others = avoided = 0
    played: set[int] = set()
    for _ in range(2000 if name == "connect_four_careful" else 400):  # a give-away to avoid is rarer
        board = np.zeros((6, 7, 2), dtype=np.int8)  # plane 0: the mover's
        for _ in range(int(rng.integers(0, 30))):
            legal = [c for c in range(7) if not board[0, c].any()]
            column = int(rng.choice(legal))
            if _c4_wins(board, 0, column):
                break
            board[int(np.flatnonzero(~board[:, column].any(axis=1)).max()), column, 0] = 1
            board = board[:, :, ::-1].copy()  # the other seat moves next
        mask = np.array([not board[0, c].any() for c in range(7)])
        winning = [c for c in range(7) if mask[c] and _c4_wins(board, 0, c)]
        threats = [c for c in range(7) if mask[c] and _c4_wins(board, 1, c)]
        observation = {"observation": board} if rng.random() < 0.5 else board.reshape(-1)
        move = bot(observation, mask.copy())
        assert mask[move]
        if winning:
            wins += 1
            assert move in winning, (board, move, winning)
        elif threats and name != "connect_four_greedy":
            blocks += 1
            assert move in threats, (board, move, threats)
        else:
            others += 1
            played.add(move)
            if name == "connect_four_careful":
                gives = [c for c in range(7) if mask[c] and _gives_a_win(board, c)]
                if gives and len(gives) < mask.sum():
                    avoided += 1
                    assert move not in gives, (board, move, gives)
    assert wins > 20 and others > 20 and played == set(range(7))
    assert name == "connect_four_greedy" or blocks > 20
    assert name != "connect_four_careful" or avoided > 20


def test_the_tictactoe_blocker_takes_every_win_blocks_every_threat_and_otherwise_plays_every_empty_square():
    """On boards of random play (checked against the tests' own rules, game_bots._winner and _play): where the mover
    can complete three, the bot plays a square that does; where only the other seat can, one that stops it;
    elsewhere empty squares, all of them over the boards, whichever shape the planes come in."""
    import numpy as np

    from shell.envs.pettingzoo.bots import tictactoe_blocker

    from .game_bots import _play, _winner

    rng = np.random.default_rng(5)
    wins = blocks = others = 0
    played: set[int] = set()
    for _ in range(600):
        board = (0,) * 9  # 1: the mover's squares
        for _ in range(int(rng.integers(0, 8))):
            after = _play(board, int(rng.choice([a for a in range(9) if board[a] == 0])))
            if _winner(after):
                break
            board = after
        empty = [a for a in range(9) if board[a] == 0]
        winning = [a for a in empty if _winner(tuple(1 if i == a else v for i, v in enumerate(board)))]
        threats = [a for a in empty if _winner(tuple(-1 if i == a else v for i, v in enumerate(board)))]
        planes = np.array([[v == 1, v == -1] for v in board], dtype=np.int8).reshape(3, 3, 2)
        observation = {"observation": planes} if rng.random() < 0.5 else planes.reshape(-1)
        mask = np.array([v == 0 for v in board])
        move = tictactoe_blocker(observation, mask.copy())
        assert mask[move]
        if winning:
            wins += 1
            assert move in winning, (board, move)
        elif threats:
            blocks += 1
            assert move in threats, (board, move)
        else:
            others += 1
            played.add(move)
    assert wins > 20 and blocks > 20 and others > 20 and played == set(range(9))


def _gives_a_win(board, column):
    """Whether the mover's piece in ``column`` lets the other seat complete four with its piece on top of it."""
    import numpy as np

    from .game_bots import _c4_wins

    after = board.copy()
    rows = np.flatnonzero(~after[:, column].any(axis=1))
    after[int(rows.max()), column, 0] = 1
    return _c4_wins(after, 1, column)  # False when the column is now full


@pytest.fixture(scope="module")
def tictactoe_run(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("play") / "run"
    train(config=load_config("tictactoe", {**TICTACTOE, "run.eval_episodes": 0}), run_dir=run_dir, progress=False)
    return run_dir


def test_play_through_stdin_refuses_an_illegal_move_and_finishes_the_game(tictactoe_run):
    """The human tries 9 (off the board) and "x", then the lowest free squares in turn: the game ends, and the
    last line is the result."""
    moves = "9\nx\n" + "\n".join(str(i) for i in range(9)) * 2 + "\n"
    out = cli("play", str(tictactoe_run), "--seat", "player_2", stdin=moves)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    assert "illegal move '9'; legal moves: [" in out.stdout and "illegal move 'x'" in out.stdout
    assert lines[0].startswith("player_1 (agent) plays ")  # the agent moves first: you are the second seat
    result = json.loads(lines[-1])
    assert result["seat"] == "player_2" and result["result"] in {"win", "draw", "loss"}
    assert result["score"] == {"win": 1.0, "draw": 0.0, "loss": -1.0}[result["result"]]
    assert 5 <= result["moves"] <= 9


def test_play_ends_cleanly_at_the_end_of_the_input(tictactoe_run):
    out = cli("play", str(tictactoe_run), stdin="4\n")
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result == {"seat": "player_1", "score": 0.0, "result": "unfinished", "moves": 2}
    bad = cli("play", str(tictactoe_run), "--seat", "player_9")
    assert bad.returncode == 2 and "pick one of ['player_1', 'player_2']" in bad.stderr.strip().splitlines()[-1]
