"""A tuned config against a baseline on seeds the search never saw: both trained on each seed, side by side.

    python bench/tune_check.py runs/tune_acrobot/best.toml acrobot --seeds 100-104 --total-timesteps 200000 \
        [--set run.eval_episodes=20] --out bench/results/acrobot_tune_check.json

For each seed, the two configs train at the same time (two processes, so machine load hits both
alike) with ``main.py --config CONFIG --seed S --set run.total_timesteps=T``. Prints one JSON line per seed
(both deterministic eval returns and their difference) and a summary line: the mean of each, the
mean gain, the seeds the tuned config wins, and whether it clears the bar (``--min-gain``, default 3,
and ``--min-wins``, default 3). ``--set`` applies to both configs. ``--out FILE`` also writes the
summary with the per-seed rows.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from sweep import run_seed, seed_range  # bench/ is on sys.path when this script runs


def train(config: str, seed: int, total: int, tmp: Path, overrides: list[str]) -> dict:
    """One run of ``config`` on ``seed`` for ``total`` steps (``sweep.run_seed``); exits if it fails."""
    row = run_seed(config, seed, [f"run.total_timesteps={total}", *overrides], str(tmp))
    if "error" in row:
        raise SystemExit(f"{config} on seed {seed} failed: {row['error']}")
    return {k: row[k] for k in ("eval", "train_s", "wall_s", "env_steps")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tuned", help="the tuned config (e.g. a study's best.toml)")
    parser.add_argument("baseline", help="the config it must beat (e.g. acrobot)")
    parser.add_argument("--seeds", type=seed_range, default=seed_range("100-104"))
    parser.add_argument("--total-timesteps", type=int, default=200_000)
    parser.add_argument("--min-gain", type=float, default=3.0)
    parser.add_argument("--min-wins", type=int, default=3)
    parser.add_argument("--set", dest="overrides", action="append", default=[],
                        help="section.key=value for both configs (e.g. run.eval_episodes=20)")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    tuned = str(Path(args.tuned).resolve()) if Path(args.tuned).exists() else args.tuned
    rows = []
    with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(2) as pool:
        for seed in args.seeds:
            runs = {name: pool.submit(train, config, seed, args.total_timesteps, Path(tmp) / name, args.overrides)
                    for name, config in (("baseline", args.baseline), ("tuned", tuned))}
            row = {"seed": seed, **{f"{name}_{k}": v for name, run in runs.items() for k, v in run.result().items()}}
            row["gain"] = round(row["tuned_eval"] - row["baseline_eval"], 3)
            rows.append(row)
            print(json.dumps(row), flush=True)
    baseline = statistics.mean(r["baseline_eval"] for r in rows)
    tuned_mean = statistics.mean(r["tuned_eval"] for r in rows)
    wins = sum(r["gain"] > 0 for r in rows)
    summary = {"tuned": args.tuned, "baseline": args.baseline, "seeds": args.seeds,
               "total_timesteps": args.total_timesteps, "overrides": args.overrides,
               "baseline_mean": round(baseline, 3),
               "tuned_mean": round(tuned_mean, 3), "mean_gain": round(tuned_mean - baseline, 3), "wins": wins,
               "passes": tuned_mean - baseline >= args.min_gain and wins >= args.min_wins}
    print(json.dumps(summary), flush=True)
    if args.out:
        args.out.write_text(json.dumps({**summary, "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
