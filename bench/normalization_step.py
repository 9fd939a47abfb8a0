"""Microseconds per env step of the running normalisers: observation normalisation and reward scaling.

    python bench/normalization_step.py [--num-envs 16] [--obs-size 11] [--calls 5000] [--rounds 3]
    PYTHONPATH=OLD_CHECKOUT python bench/normalization_step.py      # the same on an older commit's code

Times, in this process on the CPU with one torch thread (as the command line runs), what a rollout does for
each env step: ``ObsNormalizer.update_and_normalize`` on a ``[num_envs, obs_size]`` float32 batch and
``RewardScaler.scale`` on ``[num_envs]`` rewards, every row valid, statistics pending as within a rollout
(committed every 128 calls, as after a rollout of 128 steps). Hopper-v5: 16 envs, 11 observations. Prints the
median of ``--rounds`` rounds of ``--calls`` calls each, and which checkout's ``shell`` ran.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch

import shell
from shell.distributed import Dist
from shell.normalization import ObsNormalizer, RewardScaler


def per_call_us(call: Callable[[], None], commit: Callable[[], None], calls: int) -> float:
    """Microseconds per call over ``calls`` calls (``commit`` every 128, outside the timing)."""
    spent = 0.0
    for i in range(calls):
        if i % 128 == 0:
            commit()
        start = time.perf_counter()
        call()
        spent += time.perf_counter() - start
    return spent / calls * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num-envs", type=int, default=16)
    parser.add_argument("--obs-size", type=int, default=11)
    parser.add_argument("--calls", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(1)
    generator = torch.Generator().manual_seed(0)
    obs = torch.randn(args.num_envs, args.obs_size, generator=generator)
    reward = torch.randn(args.num_envs, generator=generator)
    done = torch.zeros(args.num_envs, dtype=torch.bool)
    valid = torch.ones(args.num_envs, dtype=torch.bool)
    normalizer, scaler = ObsNormalizer(args.obs_size, enabled=True), RewardScaler(0.99, enabled=True)
    rows = {"observation normalisation": ([], lambda: normalizer.update_and_normalize(obs, valid),
                                          lambda: normalizer.commit(Dist())),
            "reward scaling": ([], lambda: scaler.scale(reward, done, valid), lambda: scaler.commit(Dist()))}
    for _ in range(args.rounds + 1):  # the first round warms up, uncounted
        for times, call, commit in rows.values():
            times.append(per_call_us(call, commit, args.calls))
    print(f"shell from {shell.__file__}; {args.num_envs} envs, {args.obs_size} observations")
    for name, (times, _, _) in rows.items():
        counted = times[1:]
        print(f"{name:28s} {statistics.median(counted):7.1f} us per step (rounds: "
              f"{', '.join(f'{t:.1f}' for t in counted)})")


if __name__ == "__main__":
    main()
