"""Robustness sweep: one config (plus ``--set`` overrides) over many seeds, two processes at a time.

    python bench/sweep.py cartpole --seeds 0-9 --set ppo.update_epochs=6 [--set ...] [--jobs 2]
    python bench/sweep.py doorkey --seeds 0-4 --jobs 1 --bar 0.9 --out bench/results/doorkey_sweep.jsonl

Prints one JSON line per seed (deterministic eval return, training seconds, whole-process wall
seconds, env steps) and a summary line: the seeds, how many reach ``--bar`` (``solved``; default
475) and how many the maximum of 500 (``at_500``, meaningful for CartPole), the worst eval and the
mean training time. ``--out FILE`` also appends the summary, with the per-seed rows, to FILE as
one JSON line. Training and wall times of concurrent runs share the machine, so compare them only
against sweeps run with the same ``--jobs`` (``--jobs 1`` for wall times that mean anything).
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def seed_range(text: str) -> list[int]:
    seeds: list[int] = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        seeds += list(range(int(lo), int(hi or lo) + 1))
    return seeds


def first_reaching(metrics: Path, bar: float) -> int | None:
    """The env steps of the first update whose mean training episode return reached ``bar``."""
    with metrics.open() as f:
        for row in csv.DictReader(f):
            if row["episodic_return"] and float(row["episodic_return"]) >= bar:
                return int(row["env_steps"])
    return None


def run_seed(config: str, seed: int, overrides: list[str], tmp: str, curve_bar: float | None = None) -> dict:
    run_dir = Path(tmp) / f"s{seed}"
    cmd = [sys.executable, "main.py", "--config", config, "--seed", str(seed), "--run-dir", str(run_dir)]
    for o in overrides:
        cmd += ["--set", o]
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        return {"seed": seed, "error": proc.stderr.strip().splitlines()[-1:]}
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    row = {"seed": seed, "eval": round(out["eval_return_mean"], 3), "train_s": out["train_seconds"],
           "wall_s": round(wall, 2), "env_steps": out["env_steps"]}
    if curve_bar is not None:
        row["train_return_reached_at"] = first_reaching(run_dir / "metrics.csv", curve_bar)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config")
    parser.add_argument("--seeds", type=seed_range, default=seed_range("0-9"))
    parser.add_argument("--set", dest="overrides", action="append", default=[])
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--bar", type=float, default=475.0)
    parser.add_argument("--curve-bar", type=float,
                        help="also record the env steps at which the training episode return first reached this")
    parser.add_argument("--keep", metavar="DIR", help="write the run folders under DIR/s<seed> and keep them")
    parser.add_argument("--out", type=Path, help="append the summary and the per-seed rows to this JSONL file")
    parser.add_argument("--note", help="--out: a note stored with the line (e.g. which version of the config)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(args.jobs) as pool:
        root = args.keep or tmp
        rows = list(pool.map(lambda s: run_seed(args.config, s, args.overrides, root, args.curve_bar), args.seeds))
    for row in rows:
        print(json.dumps(row))
    ok = [r for r in rows if "eval" in r]
    summary = {"config": args.config, "overrides": args.overrides, "seeds": len(rows),
               "seed_list": [r["seed"] for r in rows], "at_500": sum(r["eval"] >= 500.0 for r in ok),
               "solved": sum(r["eval"] >= args.bar for r in ok), "worst": min(r["eval"] for r in ok),
               "evals": [r["eval"] for r in ok],
               "mean_train_s": round(statistics.fmean(r["train_s"] for r in ok), 2)}
    print(json.dumps(summary))
    if args.out:
        if args.note:
            summary["note"] = args.note
        summary.update(bar=args.bar, curve_bar=args.curve_bar, jobs=args.jobs,
                       median_wall_s=round(statistics.median(r["wall_s"] for r in ok), 2), rows=rows)
        with args.out.open("a") as f:
            f.write(json.dumps(summary) + "\n")


if __name__ == "__main__":
    main()
