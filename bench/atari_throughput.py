"""Atari training throughput and peak memory: ``configs/pong.toml`` against SB3 PPO, side by side.

Both sides do the RL Zoo's work per agent step: 8 envs x 128 steps, 4 epochs, minibatches of 256, the
Nature CNN, 4 emulator frames per agent step. Ours: ``main.py --config pong.toml`` with those four
settings passed by ``--set`` (everything else is pong.toml's), timed by its training loop
(``train_seconds`` of the summary). SB3: ``PPO("CnnPolicy")`` on ``PongNoFrameskip-v4`` under its
``AtariWrapper`` (``make_atari_env``) and ``VecFrameStack(4)`` with the Zoo's Atari hyperparameters,
timed around ``learn()``. Both run ``--threads`` torch threads (default 1; ours through
``run.torch_threads``). The peak resident memory of each whole process tree (env workers included)
is sampled every 0.1 s with psutil. Needs the bench and atari extras.

    python bench/atari_throughput.py [--steps 40960] [--repeats 1] [--threads 1] [--set env.backend=ale ...]
    # writes bench/results/atari_throughput.json, or --out FILE
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
ZOO_SETTINGS = ["--set", "env.num_envs=8", "--set", "ppo.num_steps=128", "--set", "ppo.update_epochs=4",
                "--set", "ppo.num_minibatches=4"]


def run_measured(cmd: list[str]) -> tuple[dict, float, float]:
    """Run ``cmd``; return its last JSON line, wall seconds and peak RSS of its process tree in MiB."""
    import psutil

    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    root = psutil.Process(proc.pid)
    peak = 0
    while proc.poll() is None:
        try:
            tree = [root, *root.children(recursive=True)]
            peak = max(peak, sum(p.memory_info().rss for p in tree if p.is_running()))
        except psutil.Error:
            pass
        time.sleep(0.1)
    out, err = proc.communicate()
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{err[-3000:]}")
    return json.loads(out.strip().splitlines()[-1]), wall, peak / 2**20


def sb3_child(steps: int, seed: int, threads: int) -> None:
    """SB3 PPO with the RL Zoo's Atari hyperparameters (hyperparams/ppo.yml, ``atari``)."""
    import ale_py
    import gymnasium as gym
    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_atari_env
    from stable_baselines3.common.vec_env import VecFrameStack

    torch.set_num_threads(threads)
    gym.register_envs(ale_py)
    env = VecFrameStack(make_atari_env("PongNoFrameskip-v4", n_envs=8, seed=seed), n_stack=4)
    model = PPO("CnnPolicy", env, n_steps=128, n_epochs=4, batch_size=256, learning_rate=lambda f: f * 2.5e-4,
                clip_range=lambda f: f * 0.1, vf_coef=0.5, ent_coef=0.01, seed=seed, device="cpu", verbose=0)
    start = time.perf_counter()
    model.learn(total_timesteps=steps)
    seconds = time.perf_counter() - start
    print(json.dumps({"learn_seconds": round(seconds, 2), "sps": round(model.num_timesteps / seconds, 1),
                      "env_steps": model.num_timesteps}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=40960)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1, help="torch threads of each side (run.torch_threads)")
    parser.add_argument("--sb3-child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--set", dest="extra", action="append", default=[], help="more --set for ours")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "atari_throughput.json")
    args = parser.parse_args()
    if args.sb3_child:
        sb3_child(args.steps, args.seed, args.threads)
        return
    rows = []
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                            text=True).stdout.strip() or None
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.repeats):
            extra = [x for s in args.extra for x in ("--set", s)]
            ours, ours_wall, ours_mem = run_measured(
                [sys.executable, "main.py", "--config", "pong.toml", "--seed", str(args.seed), "--total-timesteps",
                 str(args.steps), *ZOO_SETTINGS, *extra, "--set", "run.eval_episodes=0",
                 "--set", f"run.torch_threads={args.threads}",
                 "--run-dir", f"{tmp}/ours_{i}"])
            sb3, sb3_wall, sb3_mem = run_measured([sys.executable, __file__, "--sb3-child", "--steps", str(args.steps),
                                                   "--seed", str(args.seed), "--threads", str(args.threads)])
            row = {"repeat": i, "ours_env_steps": ours["env_steps"], "ours_train_s": ours["train_seconds"],
                   "ours_sps": ours["sps"], "ours_wall_s": round(ours_wall, 1), "ours_peak_rss_mib": round(ours_mem),
                   "sb3_env_steps": sb3["env_steps"], "sb3_learn_s": sb3["learn_seconds"], "sb3_sps": sb3["sps"],
                   "sb3_wall_s": round(sb3_wall, 1), "sb3_peak_rss_mib": round(sb3_mem),
                   "sps_ratio": round(ours["sps"] / sb3["sps"], 2), "threads": args.threads, "extra": args.extra,
                   "date": time.strftime("%Y-%m-%d"), "commit": commit}
            rows.append(row)
            print(json.dumps(row), flush=True)
    args.out.write_text(json.dumps(rows, indent=2) + "\n")
    print(f"sps ratio: mean {statistics.fmean(r['sps_ratio'] for r in rows):.2f}")


if __name__ == "__main__":
    main()
