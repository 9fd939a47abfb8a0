"""Side-by-side benchmark: ``main.py --config ENV.toml`` against SB3 with the RL Zoo's hyperparameters.

Times whole processes (start to exit, imports and final evaluation included), alternating the two
libraries seed by seed so that machine noise hits both alike, and reports the ratios. SB3 runs twice
per seed: as the RL Zoo runs it (torch's default thread count) and with one torch thread, its
fastest setting on a 2-core machine. Needs the bench extra: ``pip install -e ".[bench]"``.

    python bench/vs_sb3.py pendulum [--seeds 0 1 2]      # writes bench/results/pendulum_vs_sb3.json
    python bench/vs_sb3.py cartpole
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def timed(cmd: list[str]) -> tuple[float, dict]:
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{proc.stderr[-2000:]}")
    return wall, json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("env", choices=("pendulum", "cartpole"))
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    args = parser.parse_args()
    out = ROOT / "bench" / "results" / f"{args.env}_vs_sb3.json"
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for seed in args.seeds:
            ours_wall, ours = timed([sys.executable, "main.py", "--config", f"{args.env}.toml", "--seed", str(seed),
                                     "--run-dir", f"{tmp}/ours_{seed}"])
            zoo_wall, zoo = timed([sys.executable, "bench/sb3_zoo.py", args.env, str(seed)])
            one_wall, one = timed([sys.executable, "bench/sb3_zoo.py", args.env, str(seed), "1"])
            row = {"seed": seed,
                   "ours_wall_s": round(ours_wall, 2), "ours_train_s": ours["train_seconds"],
                   "ours_eval": round(ours["eval_return_mean"], 1), "ours_env_steps": ours["env_steps"],
                   "sb3_zoo_wall_s": round(zoo_wall, 2), "sb3_zoo_learn_s": zoo["learn_seconds"],
                   "sb3_zoo_eval": round(zoo["eval_return_mean"], 1),
                   "sb3_1thread_wall_s": round(one_wall, 2), "sb3_1thread_learn_s": one["learn_seconds"],
                   "sb3_1thread_eval": round(one["eval_return_mean"], 1),
                   "speedup_vs_zoo": round(zoo_wall / ours_wall, 2),
                   "speedup_vs_1thread": round(one_wall / ours_wall, 2)}
            rows.append(row)
            print(json.dumps(row), flush=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(rows, indent=2) + "\n")
    keys = list(rows[0])
    print("| " + " | ".join(keys) + " |")
    print("|" + "---|" * len(keys))
    for r in rows:
        print("| " + " | ".join(str(r[k]) for k in keys) + " |")
    for k in ("speedup_vs_zoo", "speedup_vs_1thread"):
        print(f"{k}: mean {statistics.fmean(r[k] for r in rows):.2f}, min {min(r[k] for r in rows):.2f}")


if __name__ == "__main__":
    main()
