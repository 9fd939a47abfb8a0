"""The env step alone: N sub-envs in one SyncVectorEnv against the same sub-envs in shares (shell/envs/shards.py),
the other shares in worker processes (``"async"``) and in threads of this process (``"threads"``).

    python bench/shares_step.py [ENV_ID ...] [--num-envs 16] [--shares 2] [--steps 1000] [--rounds 2]

For each env id, the three vector envs alternate (sync, async shares, threads, sync, ...), each built fresh,
reset with seeds 0..N-1 and stepped ``--steps`` times with uniform random actions drawn up front from one
generator (the same actions on every side); the time of the steps alone is printed, with the ratios sync /
shares (above 1: shares are faster). Shares in processes pay where a step of the sub-envs costs well above a
pipe round trip between two processes (about 0.1 ms on a 2-core machine); shares in threads where most of a
step runs without the GIL.
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
        modes = {"sync": EnvConfig(id=env_id),
                 "shares": EnvConfig(id=env_id, vectorization_mode="async", shares=args.shares),
                 "threads": EnvConfig(id=env_id, vectorization_mode="threads", shares=args.shares)}
        times: dict[str, list[float]] = {mode: [] for mode in modes}
        for _ in range(args.rounds):
            for mode, cfg in modes.items():
                times[mode].append(round(time_steps(cfg, args.num_envs, args.steps), 3))
        record = {"env_id": env_id, "num_envs": args.num_envs, "shares": args.shares, "steps": args.steps}
        record.update({f"{mode}_s": values for mode, values in times.items()})
        for mode in ("shares", "threads"):
            record[f"ratio_sync_over_{mode}"] = [round(a / b, 3) for a, b in zip(times["sync"], times[mode],
                                                                                   strict=True)]
        print(json.dumps(record))


if __name__ == "__main__":
    main()
