"""Where one training run's time goes, inside one process: the rollout's parts, the env step and the update.

    python bench/where_time_goes.py hopper [--steps 32768] [--set KEY=VALUE ...]

Trains the config in this process (``shell.api.train``, no evaluation, no loggers) with the methods below
wrapped in ``time.perf_counter`` and prints the seconds spent in each, and in all. Nested rows (indented)
are part of the row above them.
"""

from __future__ import annotations

import argparse
import collections
import tempfile
import time

import gymnasium as gym
import torch

from shell import normalization, ppo, rollout
from shell.api import train
from shell.envs import gymnasium as gym_backend

SPENT: collections.defaultdict[str, float] = collections.defaultdict(float)


def timed(owner: type, name: str, row: str) -> None:
    method = getattr(owner, name)

    def wrapper(*args, **kwargs):
        start = time.perf_counter()
        try:
            return method(*args, **kwargs)
        finally:
            SPENT[row] += time.perf_counter() - start

    setattr(owner, name, wrapper)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config")
    parser.add_argument("--steps", type=int, default=32768)
    parser.add_argument("--set", dest="overrides", action="append", default=[])
    args = parser.parse_args()
    torch.set_num_threads(1)  # as the command line does
    timed(rollout.LaneRollout, "act", "rollout: act (policy pass)")
    timed(normalization.ObsNormalizer, "update_and_normalize", "  observation normalisation")
    timed(gym_backend.GymVecEnv, "step", "env step (gymnasium backend)")
    timed(gym.vector.SyncVectorEnv, "step", "  SyncVectorEnv.step (this process)")
    timed(rollout.LaneRollout, "record", "rollout: record")
    timed(normalization.RewardScaler, "scale", "  reward scaling")
    timed(rollout.LaneRollout, "finish", "rollout: finish (advantages)")
    timed(ppo.PPO, "update", "update")
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as run_dir:
        train(args.config, overrides=[f"run.total_timesteps={args.steps}", "run.eval_episodes=0", "run.loggers=[]",
                                      *args.overrides], run_dir=f"{run_dir}/run", progress=False)
    total = time.perf_counter() - start
    for row in ("rollout: act (policy pass)", "  observation normalisation", "env step (gymnasium backend)",
                "  SyncVectorEnv.step (this process)", "rollout: record", "  reward scaling",
                "rollout: finish (advantages)", "update"):
        print(f"{row:38s} {SPENT[row]:8.2f} s")
    print(f"{'in all':38s} {total:8.2f} s")


if __name__ == "__main__":
    main()
