"""Side-by-side benchmark: ``main.py --config ENV.toml`` against SB3 with the RL Zoo's hyperparameters.

Times whole processes (start to exit, imports and final evaluation included), alternating the two
libraries seed by seed so that machine noise hits both alike, and reports the ratios. SB3 runs twice
per seed: as the RL Zoo runs it (torch's default thread count) and with one torch thread, its
fastest setting on a 2-core machine. Needs the bench extra: ``pip install -e ".[bench]"``.

    python bench/vs_sb3.py pendulum [--seeds 0 1 2]      # writes bench/results/pendulum_vs_sb3.json
    python bench/vs_sb3.py cartpole
    python bench/vs_sb3.py doorkey                       # SB3 on seed 0 only (--sb3-seeds), ours on 0 1 2
    python bench/vs_sb3.py cartpole-lstm                 # sb3-contrib RecurrentPPO on seed 0; also pendulum-lstm
    python bench/vs_sb3.py cartpole-envpool              # ours on EnvPool (the envpool extra), SB3 as for cartpole

``--sb3-seeds`` runs SB3 on only some of the seeds (default: all; doorkey: 0, as SB3 takes about
two minutes there); each row then has SB3's fields only where SB3 ran. The file holds the rows and a
summary: the median of our wall times over the seeds against SB3's median over its seeds.
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
    parser.add_argument("env", choices=("pendulum", "cartpole", "doorkey", "cartpole-lstm", "pendulum-lstm",
                                        "cartpole-envpool", "pendulum-envpool"))
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--sb3-seeds", type=int, nargs="+", help="seeds SB3 runs on (default: --seeds; doorkey: 0)")
    parser.add_argument("--sb3-one-thread-only", action="store_true",
                        help="skip SB3 at torch's default thread count (its slower setting on 2 cores)")
    args = parser.parse_args()
    sb3_seeds = args.sb3_seeds or ([0] if args.env in ("doorkey", "cartpole-lstm", "pendulum-lstm") else args.seeds)
    if not set(sb3_seeds) <= set(args.seeds):
        parser.error(f"--sb3-seeds {sb3_seeds} must be among --seeds {args.seeds}")
    sb3_env = args.env.removesuffix("-envpool")  # the same task for SB3, on gymnasium's envs
    out = ROOT / "bench" / "results" / f"{args.env}_vs_sb3.json"
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for seed in args.seeds:
            ours_wall, ours = timed([sys.executable, "main.py", "--config", f"{args.env}.toml", "--seed", str(seed),
                                     "--run-dir", f"{tmp}/ours_{seed}"])
            row = {"seed": seed,
                   "ours_wall_s": round(ours_wall, 2), "ours_train_s": ours["train_seconds"],
                   "ours_eval": round(ours["eval_return_mean"], 3), "ours_env_steps": ours["env_steps"]}
            if seed in sb3_seeds:
                if not args.sb3_one_thread_only:
                    zoo_wall, zoo = timed([sys.executable, "bench/sb3_zoo.py", sb3_env, str(seed)])
                    row.update({"sb3_zoo_wall_s": round(zoo_wall, 2), "sb3_zoo_learn_s": zoo["learn_seconds"],
                                "sb3_zoo_eval": round(zoo["eval_return_mean"], 3),
                                "speedup_vs_zoo": round(zoo_wall / ours_wall, 2)})
                one_wall, one = timed([sys.executable, "bench/sb3_zoo.py", sb3_env, str(seed), "1"])
                row.update({"sb3_1thread_wall_s": round(one_wall, 2), "sb3_1thread_learn_s": one["learn_seconds"],
                            "sb3_1thread_eval": round(one["eval_return_mean"], 3),
                            "speedup_vs_1thread": round(one_wall / ours_wall, 2)})
            rows.append(row)
            print(json.dumps(row), flush=True)
    ours_median = statistics.median(r["ours_wall_s"] for r in rows)
    summary = {"env": args.env, "seeds": args.seeds, "sb3_seeds": sb3_seeds, "ours_median_wall_s": ours_median,
               "ours_evals": [r["ours_eval"] for r in rows]}
    for k in ("sb3_zoo", "sb3_1thread"):
        walls = [r[f"{k}_wall_s"] for r in rows if f"{k}_wall_s" in r]
        if not walls:
            continue
        summary[f"{k}_median_wall_s"] = statistics.median(walls)
        summary[f"speedup_median_vs_{k.removeprefix('sb3_')}"] = round(statistics.median(walls) / ours_median, 2)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"rows": rows, "summary": summary}, indent=2) + "\n")
    keys = max((list(r) for r in rows), key=len)
    print("| " + " | ".join(keys) + " |")
    print("|" + "---|" * len(keys))
    for r in rows:
        print("| " + " | ".join(str(r.get(k, "")) for k in keys) + " |")
    for k in ("speedup_vs_zoo", "speedup_vs_1thread"):
        values = [r[k] for r in rows if k in r]
        if not values:
            continue
        print(f"{k} (per seed): mean {statistics.fmean(values):.2f}, min {min(values):.2f}")
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
