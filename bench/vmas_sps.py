"""The VMAS backend's own steps per second (no policy, no learning): random actions in every world of a
scenario, through ``env.backend = "vmas"``'s lane env (rows, time limit, autoreset included) and through VMAS
alone (the same 100-step limit, and each world that is done reset alone with ``reset_at``), for several batch
sizes.

    python bench/vmas_sps.py --worlds 64 600 4096 --steps 200 [--scenario balance] [--device cpu]

A step is one step of the whole batch of worlds; steps per second count worlds (``worlds * steps / s``), as
BenchMARL counts frames. The last stdout line is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import time

import torch

from shell.config import load_config
from shell.envs import make_lanes


def lane_sps(scenario: str, kwargs: dict, worlds: int, steps: int, device: torch.device) -> float:
    cfg = load_config(None, {"env.backend": "vmas", "env.id": scenario, "env.kwargs": kwargs,
                             "env.num_envs": worlds, "env.max_episode_steps": 100})
    env = make_lanes(cfg.env, device, policy=cfg.policy)
    gen = torch.Generator(device).manual_seed(0)
    env.reset(seed=0)
    shapes = {g: (spec.num_envs, *spec.action_space.shape) for g, spec in env.lanes.items()}
    env.step({g: torch.rand(s, generator=gen, device=device) * 2 - 1 for g, s in shapes.items()})  # warm up
    start = time.perf_counter()
    for _ in range(steps):
        env.step({g: torch.rand(s, generator=gen, device=device) * 2 - 1 for g, s in shapes.items()})
    seconds = time.perf_counter() - start
    env.close()
    return worlds * steps / seconds


def vmas_sps(scenario: str, kwargs: dict, worlds: int, steps: int, device: torch.device) -> float:
    import vmas

    env = vmas.make_env(scenario, num_envs=worlds, device=device, seed=0, **kwargs)
    env.reset()
    gen = torch.Generator(device).manual_seed(0)
    sizes = [env.get_agent_action_size(a) for a in env.agents]
    elapsed = torch.zeros(worlds, dtype=torch.long, device=device)
    start = time.perf_counter()
    for _ in range(steps):
        _, _, done, _ = env.step([torch.rand(worlds, n, generator=gen, device=device) * 2 - 1 for n in sizes])
        elapsed += 1
        ended = done | (elapsed >= 100)  # the backend's 100-step limit
        if bool(ended.all()):
            env.reset()
        else:  # a world that ended resets alone (what TorchRL's VmasEnv does too)
            for i in torch.nonzero(ended).flatten().tolist():
                env.reset_at(i)
        elapsed[ended] = 0
    return worlds * steps / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scenario", default="balance")
    parser.add_argument("--n-agents", type=int, default=4)
    parser.add_argument("--worlds", type=int, nargs="+", default=[64, 600, 4096])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    kwargs = {"n_agents": args.n_agents}
    rows = []
    for worlds in args.worlds:
        ours = lane_sps(args.scenario, kwargs, worlds, args.steps, device)
        alone = vmas_sps(args.scenario, kwargs, worlds, args.steps, device)
        rows.append({"worlds": worlds, "backend_sps": round(ours), "vmas_sps": round(alone)})
        print(f"{worlds:>6} worlds: backend {ours:>10,.0f} steps/s, VMAS alone {alone:>10,.0f} steps/s", flush=True)
    print(json.dumps({"scenario": args.scenario, "n_agents": args.n_agents, "device": args.device,
                      "threads": args.threads, "steps": args.steps, "results": rows}))


if __name__ == "__main__":
    main()
