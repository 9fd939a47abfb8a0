"""Per-update time of the PPO update, eager against ``run.compile``, each in fresh processes.

    python bench/compile_update.py [--configs halfcheetah hopper walker2d] [--pairs 2] [--warmup 5]
                                   [--updates 25] [--out bench/results/compile_update.json]

For each config and pair, two fresh processes run one after the other (eager, then compiled; the
next pair starts with compiled, so neither always runs first). Each process builds the config's
trainer on the CPU with one torch thread, collects one rollout, then runs ``--warmup`` updates on it
(discarded: they include compilation) and ``--updates`` timed updates, each ending with a host read
of its metrics. It reports the median of the timed updates, the warm-up's seconds, and, compiled,
the graphs dynamo built during the timed updates (``recompiles``; 0 means none after warm-up). The
first update of a run also pays compilation: ``warmup_s`` is what a whole run adds.
As rsl_rl measured its compiled update (PR 199): warm-up discarded, the median of 25 updates.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def one(config: str, compiled: bool, warmup: int, updates: int) -> dict:
    """One process's measurement (run in a fresh interpreter by :func:`main`)."""
    import torch

    from shell.config import config_from_dict, read_toml, resolve_config_path
    from shell.runner import Trainer

    torch.set_num_threads(1)
    data = read_toml(resolve_config_path(config))
    data["run"] = {**data.get("run", {}), "eval_episodes": 0, "device": "cpu", "compile": compiled, "loggers": []}
    with tempfile.TemporaryDirectory() as tmp:
        trainer = Trainer(config_from_dict(data), Path(tmp), progress=False)
        rows = trainer.env.reset(seed=0)
        trainer.collect(rows)
        lane = trainer.lanes.only
        t0 = time.perf_counter()
        for _ in range(warmup):
            [float(v) for v in lane.ppo.update(lane.storage).values()]
        warmup_s = time.perf_counter() - t0
        graphs = _graphs() if compiled else 0
        times = []
        for _ in range(updates):
            t0 = time.perf_counter()
            [float(v) for v in lane.ppo.update(lane.storage).values()]  # the host read ends the update
            times.append(time.perf_counter() - t0)
        trainer.env.close()
    return {"config": config, "mode": "compiled" if compiled else "eager", "median_ms": 1000 * statistics.median(times),
            "warmup_s": warmup_s, "recompiles": (_graphs() - graphs) if compiled else 0,
            "graph_breaks": _breaks() if compiled else 0, "dynamo_loaded": "torch._dynamo" in sys.modules}


def _graphs() -> int:
    from torch._dynamo.utils import counters
    return int(counters["stats"]["unique_graphs"])


def _breaks() -> int:
    from torch._dynamo.utils import counters
    return int(sum(counters["graph_break"].values()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", nargs="+", default=["halfcheetah", "hopper", "walker2d"])
    parser.add_argument("--pairs", type=int, default=2)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--updates", type=int, default=25)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--one", nargs=2, metavar=("CONFIG", "MODE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one(args.one[0], args.one[1] == "compiled", args.warmup, args.updates)))
        return
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    rows = []
    for config in args.configs:
        for pair in range(args.pairs):
            for mode in (("eager", "compiled") if pair % 2 == 0 else ("compiled", "eager")):
                out = subprocess.run([sys.executable, __file__, "--one", config, mode, "--warmup", str(args.warmup),
                                      "--updates", str(args.updates)], env=env, cwd=ROOT, capture_output=True,
                                     text=True, check=True)
                row = {**json.loads(out.stdout.strip().splitlines()[-1]), "pair": pair}
                rows.append(row)
                print(json.dumps(row), flush=True)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(rows, indent=2) + "\n")
    print("| config | eager ms/update | compiled ms/update | ratio | compile warm-up s | recompiles |")
    print("|---|---|---|---|---|---|")
    for config in args.configs:
        mine = [r for r in rows if r["config"] == config]
        eager = statistics.median(r["median_ms"] for r in mine if r["mode"] == "eager")
        comp = [r for r in mine if r["mode"] == "compiled"]
        compiled = statistics.median(r["median_ms"] for r in comp)
        print(f"| {config} | {eager:.1f} | {compiled:.1f} | {eager / compiled:.2f}x | "
              f"{statistics.median(r['warmup_s'] for r in comp):.1f} | {max(r['recompiles'] for r in comp)} |")


if __name__ == "__main__":
    main()
