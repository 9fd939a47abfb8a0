"""What an average of a Leduc (or Kuhn) run's policies in probability space would score, against the run's own
average of weights (``ppo.average_decay``): trains a config while recording the policy's probabilities at every
information state every K updates, then scores averages of those tables by OpenSpiel's exact exploitability.

    python bench/policy_space_average.py --config leduc --seed 0 [--every 2] [--set KEY=VALUE ...] --run-dir DIR

Averages scored (each over the tables after ``--from`` of the updates, exploitability = NashConv / 2):

- ``uniform``: the mean of the tables;
- ``reach-weighted``: each information state's mean weighted by its player's own reach probability in each table,
  the average strategy of fictitious play and CFR (Heinrich et al. 2015, eq. 2; Zinkevich et al. 2007);
- ``ema D``: exponential weights ``D`` per update (as ``ppo.average_decay``), plain and reach-weighted.

The tables are saved in ``DIR/tables.npz`` (``updates [K]``, ``tables [K, S, A]`` float64, rows in the order of
``shell.games.exploitability.information_states``); ``--tables DIR`` scores a saved one again without training.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import torch

import shell
from shell import lanes as lanes_module
from shell.config import load_config
from shell.envs.openspiel import run_game
from shell.games.exploitability import information_states, to_openspiel_policy


def record(config: str, seed: int, every: int, overrides: list[str], run_dir: Path) -> None:
    """Train ``config`` and save its policy's table every ``every`` updates in ``run_dir/tables.npz``."""
    resolved = load_config(config, overrides)
    game = run_game(resolved.env)  # the run's own game, its env.kwargs included
    tables: list[tuple[int, np.ndarray]] = []
    original = lanes_module.Lanes.after_update

    def after_update(self, update, magnet_every, average_from=0):  # the run's own step, then a table
        original(self, update, magnet_every, average_from)
        if update % every == 0:
            lane = next(iter(self.lanes.values()))
            tables.append((update, to_openspiel_policy(lane.agent, game).action_probability_array.copy()))

    lanes_module.Lanes.after_update = after_update  # a bench's hook: the library has no per-update callback
    try:
        shell.train(resolved, seed=seed, run_dir=run_dir, progress=False)
    finally:
        lanes_module.Lanes.after_update = original
    np.savez(run_dir / "tables.npz", updates=np.array([u for u, _ in tables]),
             tables=np.stack([t for _, t in tables]), game=np.array(str(game)))


def own_reach(game, states: dict, tables: np.ndarray) -> np.ndarray:
    """``[K, S]``: each information state's player's own reach probability (the product of that player's own move
    probabilities on the way to it; one value per state under perfect recall) in each of the ``K`` tables."""
    lookup = {key: i for i, key in enumerate(_keys(game, states))}
    reach = np.zeros(tables.shape[:2])

    def walk(state, r):
        if state.is_terminal():
            return
        if state.is_chance_node():
            for action, _ in state.chance_outcomes():
                walk(state.child(action), r)
            return
        player = state.current_player()
        row = lookup[state.information_state_string(player)]
        reach[:, row] = r[player]
        for action in state.legal_actions():
            after = r.copy()
            after[player] = r[player] * tables[:, row, action]
            walk(state.child(action), after)

    walk(game.new_initial_state(), np.ones((2, len(tables))))
    return reach


def _keys(game, states: dict) -> list[str]:
    from open_spiel.python.policy import TabularPolicy

    table = TabularPolicy(game, states=states)
    return sorted(table.state_lookup, key=table.state_lookup.get)


def score(run_dir: Path, start: float) -> None:
    """Print the exploitability of each average of ``run_dir/tables.npz``."""
    import pyspiel
    from open_spiel.python.algorithms import exploitability
    from open_spiel.python.policy import TabularPolicy

    saved = np.load(run_dir / "tables.npz")
    updates, tables = saved["updates"], saved["tables"]
    game = pyspiel.load_game(str(saved["game"]))
    states = information_states(game)
    reach = own_reach(game, states, tables)

    def exploit(table: np.ndarray) -> float:
        policy = TabularPolicy(game, states=states)
        policy.action_probability_array[:] = table
        return float(exploitability.exploitability(game, policy))

    def weighted(weights: np.ndarray, chosen: np.ndarray) -> tuple[float, float]:
        w = weights[:, None, None]
        plain = (w * tables[chosen]).sum(0) / w.sum()
        by_reach = w * reach[chosen][:, :, None]
        total = by_reach.sum(0)
        mean = np.where(total > 0, (by_reach * tables[chosen]).sum(0) / np.maximum(total, 1e-300), plain)
        return exploit(plain), exploit(mean)

    print(f"last table (update {updates[-1]}): {exploit(tables[-1]):.4f}")
    chosen = updates > start * updates[-1]
    plain, by_reach = weighted(np.ones(chosen.sum()), chosen)
    print(f"uniform {plain:.4f}, reach-weighted {by_reach:.4f} (from {start:.0%} of the updates)")
    step = int(updates[1] - updates[0]) if len(updates) > 1 else 1
    for decay in (0.995, 0.996, 0.998, 0.999):
        age = chosen.sum() - 1 - np.arange(chosen.sum())
        plain, by_reach = weighted((decay ** step) ** age, chosen)
        print(f"ema {decay:.3f}: {plain:.4f}, reach-weighted {by_reach:.4f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="leduc")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--every", type=int, default=2, help="record a table every this many updates")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a config override")
    parser.add_argument("--from", dest="start", type=float, default=0.3, help="average after this fraction")
    parser.add_argument("--run-dir", type=Path)
    parser.add_argument("--tables", type=Path, help="score the tables.npz of this dir again, without training")
    args = parser.parse_args(argv)
    if args.tables is None:
        if args.run_dir is None:
            parser.error("--run-dir is required to train (or --tables DIR to score saved tables)")
        torch.set_num_threads(1)
        record(args.config, args.seed, args.every, args.set, args.run_dir)
    score(args.tables or args.run_dir, args.start)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
