"""bench/policy_space_average.py: each information state's own reach against a replay of its history, the
reach-weighted average's weighting, and a tiny Kuhn run whose last recorded table scores as the run's last policy."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from shell.games.exploitability import exact_exploitability, information_states
from shell.inference import load_policy

pyspiel = pytest.importorskip("pyspiel")

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench" / "policy_space_average.py"
SPEC = importlib.util.spec_from_file_location("policy_space_average", SCRIPT)
average_module = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(average_module)


def _kuhn():
    game = pyspiel.load_game("kuhn_poker")
    states = information_states(game)
    return game, states, average_module._keys(game, states)


def _random_tables(game, states, keys, count, seed):
    rng = np.random.default_rng(seed)
    tables = np.zeros((count, len(keys), game.num_distinct_actions()))
    for row, key in enumerate(keys):
        state = next(s for s in states.values() if s.information_state_string() == key)
        legal = state.legal_actions()
        tables[:, row, legal] = rng.dirichlet(np.ones(len(legal)), size=count)
    return tables


def test_own_reach_is_the_product_of_the_players_own_move_probabilities_on_the_way():
    game, states, keys = _kuhn()
    tables = _random_tables(game, states, keys, 3, seed=0)
    reach = average_module.own_reach(game, states, tables)
    lookup = {key: row for row, key in enumerate(keys)}
    for state in states.values():  # replayed from the root, one move at a time: not the module's recursion
        player = state.current_player()
        expected = np.ones(len(tables))
        replay = game.new_initial_state()
        for action in state.history():
            if not replay.is_chance_node() and replay.current_player() == player:
                expected *= tables[:, lookup[replay.information_state_string(player)], action]
            replay.apply_action(action)
        np.testing.assert_allclose(reach[:, lookup[state.information_state_string(player)]], expected)


def test_a_state_that_a_table_never_reaches_takes_its_average_from_the_tables_that_do():
    game, states, keys = _kuhn()
    tables = _random_tables(game, states, keys, 2, seed=1)
    lookup = {key: row for row, key in enumerate(keys)}
    first = lookup["0"]  # player 0 holding the jack, first to move: pass (0) or bet (1)
    tables[1, first] = [0.0, 1.0]  # the second table always bets: "0pb" (pass, bet, to player 0) is never reached
    reach = average_module.own_reach(game, states, tables)
    later = lookup["0pb"]
    assert reach[1, later] == 0.0 and reach[0, later] > 0.0
    weights = reach[:, later, None]
    mean = (weights * tables[:, later]).sum(0) / weights.sum()
    np.testing.assert_allclose(mean, tables[0, later])


def test_a_tiny_kuhn_run_records_the_policy_it_trains(tmp_path):
    run = tmp_path / "run"
    done = subprocess.run([sys.executable, str(SCRIPT), "--config", "kuhn", "--seed", "0", "--every", "1",
                           "--set", "run.total_timesteps=8192", "--set", "run.eval_every=0", "--set", "run.loggers=[]",
                           "--run-dir", str(run)], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    saved = np.load(run / "tables.npz")
    assert list(saved["updates"]) == [1, 2, 3, 4] and saved["tables"].shape == (4, 12, 2)
    np.testing.assert_allclose(saved["tables"].sum(-1), 1.0, rtol=1e-6)
    last = float(re.search(r"last table \(update 4\): ([0-9.]+)", done.stdout).group(1))
    expected = exact_exploitability(load_policy(run, average=False), "kuhn_poker").exploitability
    assert last == pytest.approx(expected, abs=1e-4)
    assert "reach-weighted" in done.stdout and "ema 0.998" in done.stdout
