"""What a tracker costs: train_seconds and whole-process seconds with a tracker on, against TensorBoard alone.

    python bench/tracker_overhead.py --tracker mlflow [--pairs 10] [--config pendulum] [--out FILE.json]
        [--set KEY=VALUE ...] [--uri http://127.0.0.1:5000]

Runs ``python main.py --config CONFIG`` with ``run.loggers = ["tensorboard", TRACKER]`` (A) and with the
default ``["tensorboard"]`` (B) in turn, A B A B ..., after one warm-up pair that is not counted, each in
a fresh run dir under a temporary folder; records each run's ``train_seconds`` (from its JSON summary) and
its whole-process wall seconds, and the ratio A/B pair by pair (pairing keeps a ratio meaningful on a
shared machine whose speed drifts). W&B runs offline (``WANDB_MODE=offline``); MLflow uses the run dir's
SQLite store unless ``--uri`` names a tracking server. MLflow's telemetry is off.
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

ROOT = Path(__file__).resolve().parents[1]


def one_run(args: list[str], cwd: Path, env: dict[str, str]) -> dict[str, float]:
    started = time.monotonic()
    proc = subprocess.run([sys.executable, str(ROOT / "main.py"), *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=1800)
    wall = time.monotonic() - started
    if proc.returncode != 0:
        raise SystemExit(f"run failed ({proc.returncode}): {proc.stderr[-2000:]}")
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    return {"train_seconds": summary["train_seconds"], "wall_seconds": round(wall, 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tracker", choices=("mlflow", "wandb"), required=True)
    parser.add_argument("--pairs", type=int, default=10)
    parser.add_argument("--config", default="pendulum")
    parser.add_argument("--uri", help="MLflow tracking server (default: SQLite in each run dir)")
    parser.add_argument("--set", dest="overrides", action="append", default=[])
    parser.add_argument("--out")
    opts = parser.parse_args()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MLFLOW_DISABLE_TELEMETRY": "true", "WANDB_MODE": "offline",
           "WANDB_SILENT": "true"}
    common = ["--config", opts.config, *[a for o in opts.overrides for a in ("--set", o)]]
    tracked = [*common, "--set", f'run.loggers=["tensorboard","{opts.tracker}"]']
    if opts.uri:
        tracked += ["--set", f"run.mlflow.tracking_uri={json.dumps(opts.uri)}"]
    pairs = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(opts.pairs + 1):
            a = one_run(tracked, Path(tmp), env)
            b = one_run(common, Path(tmp), env)
            if i:  # the first pair warms the file caches
                pairs.append({"a": a, "b": b})
                print(json.dumps(pairs[-1]), file=sys.stderr, flush=True)

    def median(key: str, side: str | None = None) -> float:
        if side:
            return statistics.median(p[side][key] for p in pairs)
        return statistics.median(p["a"][key] / p["b"][key] for p in pairs)

    result = {"tracker": opts.tracker, "config": opts.config, "overrides": opts.overrides, "uri": opts.uri,
              "pairs": pairs,
              "median_train_seconds": {"a": median("train_seconds", "a"), "b": median("train_seconds", "b")},
              "median_ratio_train_seconds": round(median("train_seconds"), 4),
              "median_wall_seconds": {"a": median("wall_seconds", "a"), "b": median("wall_seconds", "b")},
              "median_ratio_wall_seconds": round(median("wall_seconds"), 4),
              "median_extra_wall_seconds": round(statistics.median(p["a"]["wall_seconds"] - p["b"]["wall_seconds"]
                                                                   for p in pairs), 3)}
    text = json.dumps(result, indent=2)
    if opts.out:
        Path(opts.out).write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
