"""Single-observation inference latency on the CPU: the exported ONNX file (onnxruntime) and pt2 program
(torch.export) against ``shell.inference.load_policy``.

    python bench/export_latency.py [--calls 4000] [--rounds 8] [--out bench/results/export_latency.json]

Trains pendulum.toml and cartpole.toml (their shipped settings, seed 0) into a temporary folder
through main.py, exports each run's policy to ONNX and pt2 (``main.py export``), then times one call
per observation, numpy in and numpy out, as a deployed controller makes them:

- ``load_policy``: ``policy(obs)`` (the library's Policy: to tensors, normalise, act, to numpy);
- ``onnxruntime``: ``session.run(None, {"obs": obs[None]})`` with one intra-op and one inter-op thread;
- ``pt2``: ``torch.export.load(file).module()(torch.from_numpy(obs[None])).numpy()`` under inference mode.

torch runs on one thread (``torch.set_num_threads(1)``, as ``main.py eval`` does). Observations
cycle through 1,000 taken from random-action rollouts. The three are timed in interleaved rounds of
``--calls`` calls each (after a warm-up round), so that the noise of a shared machine falls on all
three alike; p50 and p99 are over all timed calls. Prints one JSON object and writes it to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

ENVS = {"Pendulum-v1": "pendulum", "CartPole-v1": "cartpole"}


def sh(*args: str) -> str:
    proc = subprocess.run([sys.executable, str(ROOT / "main.py"), *args], capture_output=True, text=True, cwd=ROOT)
    if proc.returncode != 0:
        raise SystemExit(f"main.py {' '.join(args)} failed: {proc.stderr.strip().splitlines()[-1]}")
    return proc.stdout.strip().splitlines()[-1]


def observations(env_id: str, n: int = 1000) -> np.ndarray:
    import gymnasium as gym

    env = gym.make(env_id)
    env.action_space.seed(0)
    obs, _ = env.reset(seed=0)
    out = []
    for _ in range(n):
        out.append(obs)
        obs, _, terminated, truncated, _ = env.step(env.action_space.sample())
        if terminated or truncated:
            obs, _ = env.reset()
    return np.asarray(out, dtype=np.float32)


def percentiles(samples_ns: list[int]) -> dict[str, float]:
    us = np.asarray(samples_ns, dtype=np.float64) / 1000.0
    return {"p50_us": round(float(np.percentile(us, 50)), 2), "p99_us": round(float(np.percentile(us, 99)), 2),
            "mean_us": round(float(us.mean()), 2), "calls": len(us)}


def bench_env(env_id: str, run: Path, calls: int, rounds: int) -> dict:
    import onnxruntime
    import torch

    from shell.inference import load_policy

    onnx_file, pt2_file = (Path(json.loads(sh("export", str(run), "--format", f))["export"]) for f in ("onnx", "pt2"))
    policy = load_policy(run)
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    session = onnxruntime.InferenceSession(str(onnx_file), options, providers=["CPUExecutionProvider"])
    program = torch.export.load(str(pt2_file)).module()
    obs = observations(env_id)

    def run_pt2(o: np.ndarray) -> np.ndarray:
        with torch.inference_mode():
            return program(torch.from_numpy(o[None])).numpy()[0]

    fns = {
        "load_policy": policy,
        "onnxruntime": lambda o: session.run(None, {"obs": o[None]})[0][0],
        "pt2": run_pt2,
    }
    for name, fn in fns.items():  # the same actions, or the timing means nothing
        got = np.stack([fn(o) for o in obs[:100]])
        want = np.stack([policy(o) for o in obs[:100]])
        assert got.dtype == want.dtype and np.abs(got.astype(float) - want.astype(float)).max() <= 1e-5, name
    samples: dict[str, list[int]] = {name: [] for name in fns}
    for r in range(rounds + 1):  # round 0 warms up
        for name, fn in fns.items():
            times = samples[name]
            for i in range(calls):
                o = obs[i % len(obs)]
                start = time.perf_counter_ns()
                fn(o)
                if r:
                    times.append(time.perf_counter_ns() - start)
    out = {name: percentiles(times) for name, times in samples.items()}
    base = out["load_policy"]["p50_us"]
    for name in ("onnxruntime", "pt2"):
        out[name]["p50_speedup_vs_load_policy"] = round(base / out[name]["p50_us"], 2)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=4000, help="calls per method per round")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "export_latency.json"))
    args = parser.parse_args()
    import onnxruntime
    import torch

    torch.set_num_threads(1)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                            text=True).stdout.strip() or None
    result: dict = {"date": date.today().isoformat(), "commit": commit, "python": platform.python_version(),
                    "torch": torch.__version__, "onnxruntime": onnxruntime.__version__, "torch_threads": 1,
                    "calls_per_round": args.calls, "rounds": args.rounds, "envs": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for env_id, config in ENVS.items():
            run = Path(tmp) / config
            summary = json.loads(sh("--config", config, "--run-dir", str(run)))
            result["envs"][env_id] = {"config": f"{config}.toml", "eval_return_mean": summary["eval_return_mean"],
                                      **bench_env(env_id, run, args.calls, args.rounds)}
    text = json.dumps(result, indent=2)
    Path(args.out).write_text(text + "\n")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
