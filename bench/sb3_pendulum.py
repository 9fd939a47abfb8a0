"""Stable-Baselines3 PPO on Pendulum-v1 with the RL Baselines3 Zoo hyperparameters, as a whole process.

Zoo (hyperparams/ppo.yml, Pendulum-v1): 4 envs, n_steps 1024, gae_lambda 0.95, gamma 0.9,
n_epochs 10, ent_coef 0, learning_rate 1e-3, clip_range 0.2, use_sde True, sde_sample_freq 4,
1e5 timesteps (batch_size stays SB3's default 64). Evaluated like ours: 20 deterministic episodes.
Prints one JSON line. Needs the ``bench`` extra: pip install -e ".[bench]".
"""

import json
import sys
import time

import numpy as np
import torch
from stable_baselines3 import PPO
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.evaluation import evaluate_policy


def main(seed: int, threads: int = 0) -> None:
    if threads:
        torch.set_num_threads(threads)
    env = make_vec_env("Pendulum-v1", n_envs=4, seed=seed)
    model = PPO("MlpPolicy", env, n_steps=1024, gae_lambda=0.95, gamma=0.9, n_epochs=10, ent_coef=0.0,
                learning_rate=1e-3, clip_range=0.2, use_sde=True, sde_sample_freq=4, seed=seed, verbose=0,
                device="cpu")
    start = time.perf_counter()
    model.learn(total_timesteps=100_000)
    learn_seconds = time.perf_counter() - start
    eval_env = make_vec_env("Pendulum-v1", n_envs=1, seed=seed + 1_000_000)
    returns, _ = evaluate_policy(model, eval_env, n_eval_episodes=20, deterministic=True, return_episode_rewards=True)
    print(json.dumps({"seed": seed, "learn_seconds": round(learn_seconds, 2),
                      "eval_return_mean": float(np.mean(returns)), "eval_return_std": float(np.std(returns))}))


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 0, int(sys.argv[2]) if len(sys.argv) > 2 else 0)
