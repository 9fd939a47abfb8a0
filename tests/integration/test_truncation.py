"""A crafted env with a time limit: the bootstrap uses V(final_obs), not V(reset obs) or V(s_t)."""

from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn

from shell.config import config_from_dict
from shell.runner import Trainer

FINAL_MARK, RESET_MARK = 100.0, -50.0


class MarkerEnv(gym.Env):
    """Reward 0, never terminates; the observation is a marker: -50 at reset, t in between,
    and 100 on the step the time limit cuts (so V(final_obs) = 100 under an identity critic)."""

    observation_space = gym.spaces.Box(-1000.0, 1000.0, (1,), np.float32)
    action_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)

    def __init__(self, limit: int = 5):
        self.limit, self.t = limit, 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.array([RESET_MARK], np.float32), {}

    def step(self, action):
        self.t += 1
        mark = FINAL_MARK if self.t == self.limit else float(self.t)
        return np.array([mark], np.float32), 0.0, False, False, {}


class FirstFeature(nn.Module):
    """A critic with V(obs) = obs[:, 0]."""

    def forward(self, obs):
        return obs[:, :1]


@pytest.fixture(scope="module", autouse=True)
def marker_env():
    gym.register("MarkerEnv-v0", entry_point=MarkerEnv, max_episode_steps=5)
    yield
    gym.registry.pop("MarkerEnv-v0")


def test_truncation_bootstraps_from_final_obs(tmp_path: Path):
    gamma = 0.9
    cfg = config_from_dict({"env": {"id": "MarkerEnv-v0", "num_envs": 2},
                            "ppo": {"num_steps": 7, "gamma": gamma, "num_minibatches": 1}})
    trainer = Trainer(cfg, tmp_path)
    trainer.agent.critic = FirstFeature()
    obs = trainer.env.reset(seed=0)
    trainer.collect(obs)
    st = trainer.lanes.only.storage
    # steps 0..3 carry obs marks -50, 1, 2, 3 ... ; step 4 is the truncation
    assert st.dones[:, 0].tolist() == [False, False, False, False, True, False, False]
    assert torch.allclose(st.values[:5, 0], torch.tensor([RESET_MARK, 1.0, 2.0, 3.0, 4.0]))
    # reward 0 plus gamma * V(final_obs) = 0.9 * 100, not 0.9 * V(reset obs) = -45, not V(s_t) = 4
    assert torch.allclose(st.rewards[4], torch.full((2,), gamma * FINAL_MARK))
    assert torch.count_nonzero(st.rewards[[0, 1, 2, 3, 5, 6]]) == 0
    # after the reset the next stored observation is the reset one
    assert st.obs[5, 0, 0] == RESET_MARK
    # and the advantage at the truncation step sees only its own episode
    assert torch.allclose(st.advantages[4], torch.full((2,), gamma * FINAL_MARK - 4.0))
    trainer.env.close()


def test_truncation_bootstraps_from_final_obs_in_a_next_step_vector_env(tmp_path: Path):
    """The same env in gymnasium's NEXT_STEP mode: step 4 truncates, step 5 is the dummy (its input is the
    final observation, 100), step 6 starts the new episode from the reset observation."""
    from gymnasium.vector import AutoresetMode

    gamma = 0.9
    cfg = config_from_dict({"env": {"id": "MarkerEnv-v0", "num_envs": 2},
                            "ppo": {"num_steps": 7, "gamma": gamma, "num_minibatches": 1}})
    vec = gym.vector.SyncVectorEnv([lambda: gym.make("MarkerEnv-v0")] * 2, autoreset_mode=AutoresetMode.NEXT_STEP)
    trainer = Trainer(cfg, tmp_path, env_source=vec, source_kind="vector_env")
    trainer.agent.critic = FirstFeature()
    obs = trainer.env.reset(seed=0)
    trainer.collect(obs)
    st = trainer.lanes.only.storage
    assert st.dones[:, 0].tolist() == [False, False, False, False, True, False, False]
    assert st.valid[:, 0].tolist() == [True, True, True, True, True, False, True]
    assert torch.allclose(st.rewards[4], torch.full((2,), gamma * FINAL_MARK))  # V(final_obs), not V(reset)
    assert st.obs[5, 0, 0] == FINAL_MARK and st.obs[6, 0, 0] == RESET_MARK
    assert torch.allclose(st.advantages[4], torch.full((2,), gamma * FINAL_MARK - 4.0))
    trainer.env.close()
