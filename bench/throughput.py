"""Env steps per second and training SPS against num_envs, for the env backends.

    python bench/throughput.py [--device auto] [--env Pendulum-v1] [--torch-envs 16 ... 16384]
                               [--gym-envs 16 ... 1024] [--envpool-envs 16 64 256]
                               [--out bench/results/throughput_<device>.json]

- env SPS: vector steps with random actions, no policy (the env alone).
- training SPS: whole PPO iterations (rollout + update) of the runner, after one warm-up
  iteration, with num_steps 16, update_epochs 4 and minibatches of at most 8,192; the time
  split between rollout and update is recorded too.
The same script runs on a GPU (device auto picks CUDA when there is one).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import torch

from shell.config import config_from_dict
from shell.envs import make_env
from shell.runner import Trainer, resolve_device

ROOT = Path(__file__).resolve().parent.parent


def env_sps(env_id: str, backend: str, num_envs: int, device: torch.device, seconds: float = 1.0) -> float:
    cfg = config_from_dict({"env": {"id": env_id, "backend": backend, "num_envs": num_envs}}).env
    env = make_env(cfg, device)
    env.reset(seed=0)
    space = env.action_space
    low = torch.as_tensor(space.low, device=device)
    high = torch.as_tensor(space.high, device=device)
    steps, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        action = low + (high - low) * torch.rand((num_envs, *space.shape), device=device)
        env.step(action)
        steps += 1
    if device.type == "cuda":
        torch.cuda.synchronize()
    elapsed = time.perf_counter() - start
    env.close()
    return steps * num_envs / elapsed


def train_sps(env_id: str, backend: str, num_envs: int, device: torch.device, iterations: int = 2) -> dict:
    batch = num_envs * 16
    minibatches = max(1, batch // 8192)
    cfg = config_from_dict({"env": {"id": env_id, "backend": backend, "num_envs": num_envs},
                            "ppo": {"num_steps": 16, "update_epochs": 4, "num_minibatches": minibatches},
                            "run": {"device": str(device.type), "eval_episodes": 0}})
    with tempfile.TemporaryDirectory() as tmp:
        trainer = Trainer(cfg, Path(tmp))
        obs = trainer.env.reset(seed=0)
        rollout = update = 0.0
        for i in range(iterations + 1):
            t0 = time.perf_counter()
            obs, episodes = trainer.collect(obs)
            if device.type == "cuda":
                torch.cuda.synchronize()
            t1 = time.perf_counter()
            trainer._update_and_check(episodes)  # ends with a host sync
            t2 = time.perf_counter()
            if i:  # the first iteration is a warm-up
                rollout, update = rollout + t1 - t0, update + t2 - t1
        trainer.env.close()
    steps = iterations * batch
    return {"train_sps": steps / (rollout + update), "rollout_share": rollout / (rollout + update)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="auto")
    parser.add_argument("--env", default="Pendulum-v1")
    parser.add_argument("--torch-envs", type=int, nargs="+", default=[16, 64, 256, 1024, 4096, 16384])
    parser.add_argument("--gym-envs", type=int, nargs="+", default=[16, 64, 256, 1024])
    parser.add_argument("--envpool-envs", type=int, nargs="*", default=[],
                        help="also the envpool backend at these sizes (needs the envpool extra)")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    torch.set_num_threads(1)
    device = resolve_device(args.device)
    rows = []
    for backend, sizes in (("torch", args.torch_envs), ("gymnasium", args.gym_envs), ("envpool", args.envpool_envs)):
        for n in sizes:
            row = {"backend": backend, "num_envs": n, "device": str(device),
                   "env_sps": round(env_sps(args.env, backend, n, device)),
                   **{k: round(v, 3) if k == "rollout_share" else round(v)
                      for k, v in train_sps(args.env, backend, n, device).items()}}
            rows.append(row)
            print(json.dumps(row), flush=True)
    out = args.out or ROOT / "bench" / "results" / f"throughput_{device.type}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(rows, indent=2) + "\n")
    print("| backend | num_envs | env SPS | training SPS | rollout share |")
    print("|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['backend']} | {r['num_envs']} | {r['env_sps']:,} | {r['train_sps']:,} "
              f"| {r['rollout_share']:.0%} |")


if __name__ == "__main__":
    main()
