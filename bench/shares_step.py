"""The env step alone: N sub-envs in one SyncVectorEnv against the same sub-envs in shares (shell/envs/shards.py).

    python bench/shares_step.py [ENV_ID ...] [--num-envs 16] [--shares 2] [--steps 1000] [--rounds 2]

For each env id, the two vector envs alternate (sync, shares, sync, shares, ...), each built fresh, reset
with seeds 0..N-1 and stepped ``--steps`` times with uniform random actions drawn up front from one
generator (the same actions on both sides); the time of the steps alone is printed, with the ratio sync /
shares (above 1: shares are faster). Shares pay where a step of the sub-envs costs well above a pipe round
trip between two processes (about 0.1 ms on a 2-core machine).
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from shell.config import EnvConfig
from shell.envs.gymnasium import make_vector_env


def time_steps(cfg: EnvConfig, num_envs: int, steps: int) -> float:
    env = make_vector_env(cfg, num_envs)
    try:
        env.reset(seed=list(range(num_envs)))
        space = env.single_action_space
        rng = np.random.default_rng(0)
        if hasattr(space, "n"):
            actions = rng.integers(0, space.n, (steps, num_envs))
        else:
            actions = rng.uniform(space.low, space.high, (steps, num_envs, *space.shape)).astype(space.dtype)
        start = time.perf_counter()
        for action in actions:
            env.step(action)
        return time.perf_counter() - start
    finally:
        env.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("env_ids", nargs="*", default=["Hopper-v5", "HalfCheetah-v5"])
    parser.add_argument("--num-envs", type=int, default=16)
    parser.add_argument("--shares", type=int, default=2)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    for env_id in args.env_ids:
        sync = EnvConfig(id=env_id)
        shares = EnvConfig(id=env_id, vectorization_mode="async", shares=args.shares)
        times: dict[str, list[float]] = {"sync": [], "shares": []}
        for _ in range(args.rounds):
            times["sync"].append(round(time_steps(sync, args.num_envs, args.steps), 3))
            times["shares"].append(round(time_steps(shares, args.num_envs, args.steps), 3))
        ratios = [round(a / b, 3) for a, b in zip(times["sync"], times["shares"], strict=True)]
        print(json.dumps({"env_id": env_id, "num_envs": args.num_envs, "shares": args.shares, "steps": args.steps,
                          "sync_s": times["sync"], "shares_s": times["shares"], "ratio_sync_over_shares": ratios}))


if __name__ == "__main__":
    main()
