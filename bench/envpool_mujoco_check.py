"""Does EnvPool's MuJoCo task match gymnasium's of the same id? Spaces, and the returns of fixed policies.

    python bench/envpool_mujoco_check.py RUN_DIR [--episodes 32] [--out FILE]

EnvPool builds its MuJoCo envs on its own MuJoCo (3.x), gymnasium on the ``mujoco`` package (4.0
here), so the two cannot agree step for step. What must agree is the task: the observation and
action spaces, the reward and the termination rules. This script compares the spaces, then runs
two fixed policies for ``--episodes`` episodes on each side, from different seeds:

- the trained deterministic policy of RUN_DIR (``load_policy``: its frozen observation statistics,
  the squash onto the Box), trained on gymnasium's env;
- the zero action (the body left to fall or stand).

It prints one JSON object. First the spaces: their shapes and bounds must match (EnvPool's action
dtype is float64 where gymnasium's is float32; the backend casts actions to the space's dtype).
Then per policy and side, the mean return and episode length with their standard errors, and the
difference of the means in units of its standard error (``z``). Episodes are the first episode of
each of ``--episodes`` envs, stepped in one vector env per side (gymnasium's SyncVectorEnv,
EnvPool's ``make_gymnasium`` pool). Needs the ``mujoco`` and ``envpool`` extras.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from shell.config import load_config
from shell.inference import load_policy


def first_episodes(env: gym.vector.VectorEnv, act, n: int, seed: int) -> tuple[list[float], list[int]]:
    """Step ``env`` (n sub-envs) until each has ended one episode; its returns and lengths."""
    obs, _ = env.reset(seed=seed)
    returns, lengths = np.zeros(n), np.zeros(n, dtype=np.int64)
    alive = np.ones(n, dtype=bool)
    while alive.any():
        obs, reward, terminated, truncated, _ = env.step(act(obs))
        returns[alive] += reward[alive]
        lengths[alive] += 1
        alive &= ~(terminated | truncated)
    return returns.tolist(), lengths.tolist()


def summary(values: list[float]) -> dict:
    return {"mean": round(statistics.fmean(values), 2),
            "se": round(statistics.stdev(values) / math.sqrt(len(values)), 2)}


def z_score(a: dict, b: dict) -> float:
    spread = math.hypot(a["se"], b["se"])
    return round((a["mean"] - b["mean"]) / spread, 2) if spread else 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--episodes", type=int, default=32)
    parser.add_argument("--out", type=Path, help="also write the JSON object to this file")
    args = parser.parse_args()
    import envpool

    env_id = load_config(str(args.run_dir / "config.toml")).env.id
    n = args.episodes
    sides = {
        "gymnasium": gym.make_vec(env_id, num_envs=n, vectorization_mode="sync"),
        "envpool": envpool.make_gymnasium(env_id, num_envs=n, num_threads=1),
    }
    spaces = {name: {"observation": repr(env.single_observation_space), "action": repr(env.single_action_space)}
              for name, env in sides.items()}
    policy = load_policy(args.run_dir)
    action_shape = sides["gymnasium"].single_action_space.shape
    policies = {"trained": lambda obs: np.asarray(policy(obs), dtype=np.float64),
                "zero_action": lambda obs: np.zeros((obs.shape[0], *action_shape))}
    gym_env, pool = sides["gymnasium"], sides["envpool"]
    same_boxes = all(a.shape == b.shape and np.array_equal(a.low, b.low) and np.array_equal(a.high, b.high)
                     for a, b in [(gym_env.single_observation_space, pool.single_observation_space),
                                  (gym_env.single_action_space, pool.single_action_space)])
    result: dict = {"env_id": env_id, "run_dir": str(args.run_dir), "episodes": n, "spaces": spaces,
                    "shapes_and_bounds_match": same_boxes}
    for pname, act in policies.items():
        row = {}
        for seed_offset, (side, env) in enumerate(sides.items()):
            # EnvPool ignores reset's seed: its pool keeps the streams it was built with (its default seed 42)
            returns, lengths = first_episodes(env, act, n, seed=1000 + 100 * seed_offset)
            row[side] = {"return": summary(returns), "length": summary(lengths)}
        row["z_return"] = z_score(row["gymnasium"]["return"], row["envpool"]["return"])
        row["z_length"] = z_score(row["gymnasium"]["length"], row["envpool"]["length"])
        result[pname] = row
    for env in sides.values():
        env.close()
    text = json.dumps(result, indent=1)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
