"""Issue 36's bar for the turn-based game configs: train whole processes, then play many games per seat.

For each seed, ``python main.py --config CONFIG --set run.seed=N --run-dir RUNS/<name>_s<N>`` runs as a whole
process (its wall time is the bar's "whole process" time; its CPU time and the load average are recorded too, as
the machine is shared); then its final checkpoint plays ``--games`` games per seat against each opponent, through
the library's own evaluation (:func:`shell.evaluation.evaluate`: the deterministic policy, the run's evaluation
seeds, copy i in seat ``i % 2``). Prints one JSON object per seed and writes them all to ``OUT/<name>.json``.

    python bench/games_bar.py --config configs/tictactoe.toml --seeds 0 1 2 --out bench/results/games_20261202 \\
        --name tictactoe [--set ppo.ent_coef=0.02 ...]   # runs in runs/games_bar/<name>_s<N>
    python bench/games_bar.py --runs RUN_DIR [RUN_DIR ...]      # evaluate runs already trained

The opponents default to the game's: tic-tac-toe ``random`` and the minimax player of
tests/integration/game_bots.py (perfect, random tie-breaks); connect four ``random`` and its one-ply player.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

BOTS = {"tictactoe": ["random", "tests.integration.game_bots:tictactoe_minimax"],
        "connect_four": ["random", "tests.integration.game_bots:connect_four_one_ply"]}


def train(config: str, seed: int, run_dir: Path, sets: list[str]) -> dict:
    """One whole training process; its summary and wall time."""
    command = [sys.executable, str(ROOT / "main.py"), "--config", config, "--set", f"run.seed={seed}",
               "--run-dir", str(run_dir), *[a for s in sets for a in ("--set", s)]]
    started, cpu = time.perf_counter(), _children_cpu()
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
    wall, cpu = time.perf_counter() - started, _children_cpu() - cpu
    if done.returncode != 0:
        raise SystemExit(f"training failed ({done.returncode}): {done.stderr.strip().splitlines()[-1:]}")
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    return {"command": " ".join(command[1:]), "wall_seconds": round(wall, 1), "cpu_seconds": round(cpu, 1),
            "load_average": os.getloadavg(), "summary": summary}


def _children_cpu() -> float:
    """User plus system CPU seconds of the finished child processes (on a shared machine, the wall time depends
    on the other jobs; the CPU time much less)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def play(run_dir: Path, games: int, opponents: list[str] | None) -> dict:
    """``games`` games per seat of the run's final policy against each opponent: win/draw/loss per seat."""
    from shell.evaluation import EvalSpec, eval_fields, evaluate
    from shell.inference import load_agent

    agent, config, state = load_agent(run_dir, "cpu")
    if opponents is None:
        opponents = next((bots for game, bots in BOTS.items() if game in config.env.id), ["random"])
    started = time.perf_counter()
    spec = EvalSpec(config.env, 2 * games, config.run.seed, config.run.seed_scheme, config.policy,
                    opponents=opponents)
    outcome = evaluate(agent, spec, next(agent.parameters()).device)
    fields = eval_fields(outcome)
    return {"run_dir": str(run_dir), "env_steps": state["env_steps"], "games_per_seat": games,
            "eval_seconds": round(time.perf_counter() - started, 1), "vs": fields["eval_vs"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", help="config to train (with --seeds)")
    parser.add_argument("--seeds", type=int, nargs="*", default=[0, 1, 2])
    parser.add_argument("--set", action="append", default=[], help="override passed to main.py (repeatable)")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "games_20261202")
    parser.add_argument("--name", help="name of the result file and run dirs (default: the config's stem)")
    parser.add_argument("--run-root", type=Path, default=Path("runs/games_bar"), help="where the runs go")
    parser.add_argument("--runs", type=Path, nargs="*", help="evaluate these run dirs instead of training")
    parser.add_argument("--games", type=int, default=1000, help="games per seat against each opponent")
    parser.add_argument("--opponents", nargs="*", help="default: random and the game's reference bot")
    args = parser.parse_args()
    results = []
    if args.runs:
        for run_dir in args.runs:
            results.append(play(run_dir, args.games, args.opponents))
            print(json.dumps(results[-1]), flush=True)
        return
    name = args.name or Path(args.config).stem
    runs = args.run_root
    for seed in args.seeds:
        run_dir = runs / f"{name}_s{seed}"
        trained = train(args.config, seed, run_dir, args.set)
        result = {"seed": seed, "sets": args.set, **trained, **play(run_dir, args.games, args.opponents)}
        results.append(result)
        print(json.dumps(result), flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{name}.json").write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
