"""The rollout's validity mask: always present, and with every row valid it changes no bit of any result."""

from pathlib import Path

import pytest
import torch

import core
from shell.config import load_config
from shell.normalization import RewardScaler, RunningMoments
from shell.runner import Trainer
from shell.storage import RolloutStorage, Transition


def filled_storage(valid: torch.Tensor) -> RolloutStorage:
    """A [T=6, N=4] storage of random transitions with the given [T, N] validity."""
    T, N = valid.shape
    storage = RolloutStorage(T, N, 3, (), torch.long, torch.device("cpu"))
    gen = torch.Generator().manual_seed(0)
    for t in range(T):
        storage.add(Transition(torch.randn(N, 3, generator=gen), torch.randint(0, 5, (N,), generator=gen),
                               torch.randn(N, generator=gen), torch.zeros(N, dtype=torch.bool), valid[t],
                               torch.randn(N, generator=gen), torch.randn(N, generator=gen)))
    storage.compute_advantages(torch.zeros(N), 0.99, 0.95)
    return storage


def test_all_valid_minibatches_are_the_plain_shuffle_bit_for_bit():
    storage = filled_storage(torch.ones(6, 4, dtype=torch.bool))
    got = list(storage.minibatches(3, torch.Generator().manual_seed(7)))
    perm = torch.randperm(24, generator=torch.Generator().manual_seed(7))  # the shuffle without a mask
    for i, mb in enumerate(got):
        rows = perm[i * 8:(i + 1) * 8]
        assert torch.equal(mb["obs"], storage.obs.flatten(0, 1)[rows])
        assert torch.equal(mb["advantages"], storage.advantages.flatten()[rows])
        assert torch.equal(mb["raw_actions"], storage.raw_actions.flatten()[rows])


def test_rows_that_are_not_valid_never_enter_a_minibatch():
    valid = torch.ones(6, 4, dtype=torch.bool)
    valid[2, 1] = valid[4, 3] = valid[5, 0] = False
    storage = filled_storage(valid)
    seen = torch.cat([mb["log_probs"] for mb in storage.minibatches(3, torch.Generator().manual_seed(1))])
    assert len(seen) == 21  # 21 valid rows, 3 minibatches of 7
    assert torch.equal(seen.sort().values, storage.log_probs[valid].sort().values)
    values, returns = storage.valid_values_and_returns()
    assert torch.equal(values, storage.values[valid]) and torch.equal(returns, storage.returns[valid])


def test_all_valid_statistics_are_those_of_the_whole_batch_bit_for_bit():
    batch = torch.randn(16, 3, generator=torch.Generator().manual_seed(3)) * 5 + 2
    moments = RunningMoments((3,))
    moments.observe(batch, torch.ones(16, dtype=torch.bool))
    mean, var, _ = core.batch_moments(batch.double())
    pending_mean, pending_var, _ = (torch.as_tensor(x) for x in moments.pending)  # NumPy on the CPU
    assert torch.equal(pending_mean, mean) and torch.equal(pending_var, var)
    # the reward scaler: a valid mask of all true is the unmasked rule
    rewards = torch.randn(5, 4, generator=torch.Generator().manual_seed(4))
    dones = torch.rand(5, 4, generator=torch.Generator().manual_seed(5)) < 0.3
    scaler = RewardScaler(0.9, enabled=True)
    running = torch.zeros(4, dtype=torch.float64)
    for t in range(5):
        got = scaler.scale(rewards[t], dones[t], torch.ones(4, dtype=torch.bool))
        _, running = core.discounted_return_step(running, rewards[t].double(), dones[t], 0.9)
        assert torch.equal(scaler.discounted_return, running)
        assert torch.equal(got, core.scale_rewards(rewards[t], scaler.moments.current()[1], 10.0, 1e-8))


@pytest.mark.parametrize("config", ["cartpole", "cartpole-lstm", "pendulum-torch"])
def test_a_source_without_dummy_steps_gives_all_valid_rows(tmp_path: Path, config: str):
    cfg = load_config(config, {"env.num_envs": 2, "ppo.num_steps": 16, "ppo.num_minibatches": 2,
                               "run.eval_episodes": 0})
    trainer = Trainer(cfg, tmp_path)
    rows, _ = trainer.collect(trainer.env.reset(seed=0))
    assert trainer.lanes.only.storage.valid.all() and rows[None].valid.all() and rows[None].valid.shape == (2,)
    trainer.env.close()
