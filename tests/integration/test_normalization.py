"""Observation normalisation and reward scaling: statistics, freezing, checkpoints, resets."""

import json

import gymnasium as gym
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

import core
from shell.api import resume
from shell.checkpoint import load_checkpoint
from shell.config import config_from_dict
from shell.distributed import Dist
from shell.evaluation import EvalSpec, evaluate
from shell.normalization import ObsNormalizer, RewardScaler, RunningMoments
from shell.runner import Trainer

from .test_truncation import FINAL_MARK, MarkerEnv

batches = st.lists(
    st.lists(st.lists(st.floats(-1e3, 1e3, allow_nan=False), min_size=3, max_size=3), min_size=1, max_size=20),
    min_size=1, max_size=6)


@settings(deadline=None, max_examples=60)
@given(batches=batches, commit_every=st.integers(1, 3))
def test_running_moments_match_numpy_on_the_concatenated_data(batches, commit_every):
    moments = RunningMoments((3,))
    for i, batch in enumerate(batches):
        moments.observe(torch.tensor(batch, dtype=torch.float32), torch.ones(len(batch), dtype=torch.bool))
        if (i + 1) % commit_every == 0:
            moments.commit(Dist())
    mean, var, count = moments.current()
    data = np.concatenate([np.asarray(b, dtype=np.float32) for b in batches]).astype(np.float64)
    assert float(count) == len(data)
    np.testing.assert_allclose(mean.numpy(), data.mean(0), rtol=1e-9, atol=1e-7)
    np.testing.assert_allclose(var.numpy(), data.var(0), rtol=1e-7, atol=1e-6)


@settings(deadline=None, max_examples=60)
@given(batches=batches, data=st.data(), scalar=st.booleans())
def test_host_statistics_on_the_cpu_give_the_bits_of_the_tensor_merges(batches, data, scalar):
    """On the CPU the pending statistics are NumPy values: every current() and every commit gives the bits of the
    same merges in float64 tensors with tensor counts (how the statistics run on another device)."""
    shape = () if scalar else (3,)
    moments = RunningMoments(shape)
    g_mean, g_var, g_count = moments.mean.clone(), moments.var.clone(), moments.count.clone()
    pending = None
    for batch in batches:
        x = torch.tensor(batch, dtype=torch.float32)
        x = x[:, 0] if scalar else x
        valid = torch.tensor(data.draw(st.lists(st.booleans(), min_size=len(batch), max_size=len(batch))))
        moments.observe(x, valid)
        if valid.any():
            mean, var, n = core.batch_moments(x[valid].double())
            stats = (mean, var, torch.tensor(float(n), dtype=torch.float64))
            pending = stats if pending is None else core.merge_moments(*pending, *stats)
        expected = (g_mean, g_var, g_count) if pending is None else core.merge_moments(g_mean, g_var, g_count,
                                                                                         *pending)
        assert all(torch.equal(a, b) for a, b in zip(moments.current(), expected, strict=True))
        if data.draw(st.booleans()):
            moments.commit(Dist())
            if pending is not None:
                g_mean, g_var, g_count = core.merge_moments(g_mean, g_var, g_count, *pending)
            pending = None
            assert torch.equal(moments.mean, g_mean) and torch.equal(moments.var, g_var)
            assert torch.equal(moments.count, g_count)


def test_return_scaler_counts_real_transitions_and_resets_at_episode_ends():
    scaler = RewardScaler(gamma=0.5, enabled=True)
    seen = []
    for t in range(12):  # 2 envs, 4-step episodes: steps 3, 7, 11 end an episode (one terminates, one truncates)
        done = torch.tensor([t % 4 == 3, t % 4 == 3])
        scaler.scale(torch.ones(2), done, torch.ones(2, dtype=torch.bool))
        seen.append(scaler.discounted_return.clone())
    scaler.commit(Dist())
    assert float(scaler.moments.count) == 24
    # the discounted return restarts after each end: 1, 1.5, 1.75, 1.875, then 1 again
    returns = [1.0, 1.5, 1.75, 1.875]
    expected_values = np.array(returns * 3 * 2, dtype=np.float64)
    np.testing.assert_allclose(float(scaler.moments.mean), expected_values.mean())
    np.testing.assert_allclose(float(scaler.moments.var), expected_values.var())
    assert torch.equal(seen[3], torch.zeros(2, dtype=torch.float64))  # zeroed after the end
    assert torch.equal(seen[4], torch.ones(2, dtype=torch.float64))


def test_obs_normalizer_clips_and_is_identity_when_disabled():
    off = ObsNormalizer(2, enabled=False)
    x = torch.randn(5, 2)
    assert off.update_and_normalize(x, torch.ones(5, dtype=torch.bool)) is x and not list(off.buffers())
    on = ObsNormalizer(2, enabled=True, clip=3.0)
    on.update_and_normalize(torch.tensor([[0.0, 0.0], [0.0, 2.0]]), torch.ones(2, dtype=torch.bool))
    on.commit(Dist())
    out = on.normalize(torch.tensor([[1e6, 1.0]]))
    assert out[0, 0] == 3.0 and torch.isclose(out[0, 1], torch.tensor(0.0), atol=1e-6)


def _cfg(total=512):
    return config_from_dict({"env": {"id": "Pendulum-v1", "num_envs": 2, "normalize_obs": True,
                                      "normalize_reward": True},
                             "ppo": {"num_steps": 64, "num_minibatches": 2, "update_epochs": 1},
                             "run": {"total_timesteps": total, "eval_episodes": 2, "device": "cpu"}})


def test_evaluation_leaves_the_statistics_unchanged(tmp_path):
    trainer = Trainer(_cfg(), tmp_path)
    trainer.train()
    before = {k: v.clone() for k, v in trainer.agent.obs_normalizer.state_dict().items()}
    assert float(before["moments.count"]) == 512
    evaluate(trainer.agent, EvalSpec(trainer.config.env, 3, 0), torch.device("cpu"))
    after = trainer.agent.obs_normalizer.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)
    assert trainer.agent.obs_normalizer.moments.pending is None


def test_resume_restores_the_statistics_exactly(tmp_path):
    run = tmp_path / "run"
    trainer = Trainer(_cfg(), run)
    trainer.train()
    state = load_checkpoint(next((run / "checkpoints").glob("ckpt_*.pt")))
    fresh = Trainer(_cfg(), tmp_path / "other")
    fresh.load_state_dict(state)
    for name in ("mean", "var", "count"):
        assert torch.equal(getattr(fresh.agent.obs_normalizer.moments, name),
                           getattr(trainer.agent.obs_normalizer.moments, name))
        assert torch.equal(getattr(fresh.lanes.only.reward_scaler.moments, name),
                           getattr(trainer.lanes.only.reward_scaler.moments, name))
    summary = resume(run, total_timesteps=768).summary
    assert summary["env_steps"] == 768
    state = load_checkpoint(summary["checkpoint"])
    assert float(state["model"]["obs_normalizer.moments.count"]) == 768
    assert float(state["reward_scaler"]["moments.count"]) == 768


class FirstFeature(nn.Module):
    def forward(self, obs):
        return obs[:, :1]


def test_truncation_bootstrap_sees_final_obs_normalised_with_the_same_statistics(tmp_path):
    gym.register("MarkerEnvNorm-v0", entry_point=MarkerEnv, max_episode_steps=5)
    try:
        cfg = config_from_dict({"env": {"id": "MarkerEnvNorm-v0", "num_envs": 2, "normalize_obs": True,
                                        "obs_clip": 1e6},
                                "ppo": {"num_steps": 5, "gamma": 0.9, "num_minibatches": 1}})
        trainer = Trainer(cfg, tmp_path)
        trainer.agent.critic = FirstFeature()
        trainer.collect(trainer.env.reset(seed=0))
        seen = np.array([-50.0, 1.0, 2.0, 3.0, 4.0])  # observations acted on, steps 0..4, in both envs
        expected = 0.9 * (FINAL_MARK - seen.mean()) / np.sqrt(seen.var() + 1e-8)
        assert torch.allclose(trainer.lanes.only.storage.rewards[4], torch.full((2,), float(expected)), rtol=1e-5)
        # normalised at action time: later stats differ
        stored = trainer.lanes.only.storage.obs[:, 0, 0].double().numpy()
        assert stored[0] != pytest.approx((seen[0] - seen.mean()) / seen.std())
        trainer.env.close()
    finally:
        gym.registry.pop("MarkerEnvNorm-v0")


def test_short_halfcheetah_run(main, tmp_path):
    proc = main("--config", "halfcheetah", "--total-timesteps", "4096", "--set", "run.eval_episodes=1",
                "--run-dir", str(tmp_path / "r"))
    assert proc.returncode == 0, proc.stderr[-2000:]
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert summary["env_id"] == "HalfCheetah-v5" and summary["env_steps"] == 4096
