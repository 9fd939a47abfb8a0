"""Stable-Baselines3 PPO with the RL Baselines3 Zoo hyperparameters, as one whole process.

    python bench/sb3_zoo.py ENV SEED [THREADS]      # THREADS 0 = torch default
    # ENV: pendulum | cartpole | doorkey (PPO); cartpole-lstm | pendulum-lstm (sb3-contrib's RecurrentPPO)

Hyperparameters from the Zoo's hyperparams/ppo.yml:
- Pendulum-v1: 4 envs, n_steps 1024, gae_lambda 0.95, gamma 0.9, n_epochs 10, ent_coef 0,
  learning_rate 1e-3, clip_range 0.2, use_sde True, sde_sample_freq 4, 1e5 steps (batch_size: SB3's 64).
- CartPole-v1: 8 envs, n_steps 32, batch_size 256, gae_lambda 0.8, gamma 0.98, n_epochs 20,
  ent_coef 0, learning_rate lin_1e-3, clip_range lin_0.2, 1e5 steps.
- MiniGrid-DoorKey-5x5-v0 (the "minigrid-defaults" anchor, after lcswillems/rl-starter-files):
  env_wrapper minigrid.wrappers.FlatObsWrapper, normalize true (VecNormalize of observations and
  rewards), 8 envs, n_steps 128, batch_size 64, gae_lambda 0.95, gamma 0.99, n_epochs 10, ent_coef 0,
  learning_rate 2.5e-4, clip_range 0.2, 1e5 steps.
- CartPoleNoVel-v1 (hyperparams/ppo_lstm.yml; RecurrentPPO, MlpLstmPolicy): normalize true, 8 envs,
  n_steps 32, batch_size 256, gae_lambda 0.8, gamma 0.98, n_epochs 20, ent_coef 0, learning_rate
  lin_1e-3, clip_range lin_0.2, policy_kwargs ortho_init False, ReLU, lstm_hidden_size 64,
  enable_critic_lstm True, net_arch pi [64] vf [64]; 1e5 steps.
- PendulumNoVel-v1 (ppo_lstm.yml): normalize true, 4 envs, n_steps 1024, gae_lambda 0.95, gamma 0.9,
  n_epochs 10, ent_coef 0, learning_rate 1e-3, clip_range 0.2, use_sde True, sde_sample_freq 4,
  the same policy_kwargs; 1e5 steps.
The NoVel envs are this project's registrations (``import shell``): the Zoo's velocity masking.
Evaluated like ours: 20 deterministic episodes on envs seeded apart from training (with
VecNormalize, its observation statistics frozen and the raw episode returns reported, as the Zoo
evaluates). Prints one JSON line. Needs the bench extra: pip install -e ".[bench]" (doorkey also the
minigrid extra; the lstm entries sb3-contrib, in the bench extra).
"""

import json
import sys
import time
from pathlib import Path

import numpy as np
import torch
from stable_baselines3 import PPO
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.evaluation import evaluate_policy
from stable_baselines3.common.vec_env import VecNormalize

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # this project's shell, for the NoVel ids


def linear(start: float):
    return lambda progress_remaining: progress_remaining * start


ZOO = {
    "pendulum": ("Pendulum-v1", 4, dict(n_steps=1024, gae_lambda=0.95, gamma=0.9, n_epochs=10, ent_coef=0.0,
                                        learning_rate=1e-3, clip_range=0.2, use_sde=True, sde_sample_freq=4)),
    "cartpole": ("CartPole-v1", 8, dict(n_steps=32, batch_size=256, gae_lambda=0.8, gamma=0.98, n_epochs=20,
                                        ent_coef=0.0, learning_rate=linear(1e-3), clip_range=linear(0.2))),
    "doorkey": ("MiniGrid-DoorKey-5x5-v0", 8, dict(n_steps=128, batch_size=64, gae_lambda=0.95, gamma=0.99,
                                                   n_epochs=10, ent_coef=0.0, learning_rate=2.5e-4, clip_range=0.2)),
    "cartpole-lstm": ("CartPoleNoVel-v1", 8, dict(n_steps=32, batch_size=256, gae_lambda=0.8, gamma=0.98,
                                                  n_epochs=20, ent_coef=0.0, learning_rate=linear(1e-3),
                                                  clip_range=linear(0.2))),
    "pendulum-lstm": ("PendulumNoVel-v1", 4, dict(n_steps=1024, gae_lambda=0.95, gamma=0.9, n_epochs=10,
                                                  ent_coef=0.0, learning_rate=1e-3, clip_range=0.2, use_sde=True,
                                                  sde_sample_freq=4)),
}
# Zoo entries with an env_wrapper and/or normalize: true
WRAPPED = {"doorkey", "cartpole-lstm", "pendulum-lstm"}
RECURRENT = {"cartpole-lstm", "pendulum-lstm"}


def make_env(name: str, env_id: str, n_envs: int, seed: int, train_env=None):
    """The vector env as the Zoo builds it; ``train_env`` given: an evaluation env sharing its
    VecNormalize observation statistics, frozen."""
    if name not in WRAPPED:
        return make_vec_env(env_id, n_envs=n_envs, seed=seed)
    if name == "doorkey":
        import minigrid  # noqa: F401  (registers the MiniGrid ids)
        from minigrid.wrappers import FlatObsWrapper

        env = make_vec_env(env_id, n_envs=n_envs, seed=seed, wrapper_class=FlatObsWrapper)
    else:
        import shell  # noqa: F401  (registers the NoVel ids)

        env = make_vec_env(env_id, n_envs=n_envs, seed=seed)
    if train_env is None:
        return VecNormalize(env, gamma=ZOO[name][2]["gamma"])
    env = VecNormalize(env, training=False, norm_reward=False, gamma=ZOO[name][2]["gamma"])
    env.obs_rms = train_env.obs_rms
    return env


def main(name: str, seed: int, threads: int = 0) -> None:
    if threads:
        torch.set_num_threads(threads)
    env_id, n_envs, kwargs = ZOO[name]
    env = make_env(name, env_id, n_envs, seed)
    if name in RECURRENT:
        from sb3_contrib import RecurrentPPO

        policy_kwargs = dict(ortho_init=False, activation_fn=torch.nn.ReLU, lstm_hidden_size=64,
                             enable_critic_lstm=True, net_arch=dict(pi=[64], vf=[64]))
        model = RecurrentPPO("MlpLstmPolicy", env, seed=seed, verbose=0, device="cpu", policy_kwargs=policy_kwargs,
                             **kwargs)
    else:
        model = PPO("MlpPolicy", env, seed=seed, verbose=0, device="cpu", **kwargs)
    start = time.perf_counter()
    model.learn(total_timesteps=100_000)
    learn_seconds = time.perf_counter() - start
    eval_env = make_env(name, env_id, 1, seed + 1_000_000, train_env=env)
    returns, _ = evaluate_policy(model, eval_env, n_eval_episodes=20, deterministic=True, return_episode_rewards=True)
    print(json.dumps({"env_id": env_id, "seed": seed, "threads": threads or torch.get_num_threads(),
                      "learn_seconds": round(learn_seconds, 2), "eval_return_mean": float(np.mean(returns)),
                      "eval_return_std": float(np.std(returns))}))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 0, int(sys.argv[3]) if len(sys.argv) > 3 else 0)
