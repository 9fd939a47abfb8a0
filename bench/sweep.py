"""Robustness sweep: one config (plus ``--set`` overrides) over many seeds, two processes at a time.

    python bench/sweep.py cartpole --seeds 0-9 --set ppo.update_epochs=6 [--set ...] [--jobs 2]

Prints one JSON line per seed (deterministic eval return, training seconds, env steps) and a
summary line: the seeds, how many reach ``--bar`` (``solved``; default 475) and how many the
maximum of 500 (``at_500``, meaningful for CartPole), the worst eval and the mean training
time. Training times of concurrent runs share the machine, so compare them only against sweeps
run with the same ``--jobs``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def seed_range(text: str) -> list[int]:
    seeds: list[int] = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        seeds += list(range(int(lo), int(hi or lo) + 1))
    return seeds


def run_seed(config: str, seed: int, overrides: list[str], tmp: str) -> dict:
    cmd = [sys.executable, "main.py", "--config", config, "--seed", str(seed), "--run-dir", f"{tmp}/s{seed}"]
    for o in overrides:
        cmd += ["--set", o]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        return {"seed": seed, "error": proc.stderr.strip().splitlines()[-1:]}
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    return {"seed": seed, "eval": round(out["eval_return_mean"], 1), "train_s": out["train_seconds"],
            "env_steps": out["env_steps"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config")
    parser.add_argument("--seeds", type=seed_range, default=seed_range("0-9"))
    parser.add_argument("--set", dest="overrides", action="append", default=[])
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--bar", type=float, default=475.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(args.jobs) as pool:
        rows = list(pool.map(lambda s: run_seed(args.config, s, args.overrides, tmp), args.seeds))
    for row in rows:
        print(json.dumps(row))
    ok = [r for r in rows if "eval" in r]
    print(json.dumps({"config": args.config, "overrides": args.overrides, "seeds": len(rows),
                      "seed_list": [r["seed"] for r in rows], "at_500": sum(r["eval"] >= 500.0 for r in ok),
                      "solved": sum(r["eval"] >= args.bar for r in ok), "worst": min(r["eval"] for r in ok),
                      "evals": [r["eval"] for r in ok],
                      "mean_train_s": round(statistics.fmean(r["train_s"] for r in ok), 2)}))


if __name__ == "__main__":
    main()
