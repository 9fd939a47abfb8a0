"""Run by torchrun from test_distributed.py: one PPO update per rank, then compare parameters across ranks.

Arguments: the recurrent core ("none", "lstm"), and "compile" for ``run.compile``."""

import hashlib
import os
import sys
import tempfile
from pathlib import Path

import torch
import torch.distributed as dist

from shell.config import config_from_dict
from shell.distributed import init_distributed, shutdown
from shell.runner import Trainer


def main() -> None:
    d, _ = init_distributed("cpu")
    run = {"device": "cpu", "eval_episodes": 0, "compile": sys.argv[2:3] == ["compile"]}
    cfg = config_from_dict({"env": {"id": "CartPole-v1", "num_envs": 4, "normalize_obs": True,
                                    "normalize_reward": True}, "ppo": {"num_steps": 64,
                            "num_minibatches": 4, "update_epochs": 2}, "run": run,
                            "policy": {"recurrent": sys.argv[1] if len(sys.argv) > 1 else "none", "seq_len": 16}})
    trainer = Trainer(cfg, Path(tempfile.mkdtemp()), d)
    assert (trainer.lanes.only.ppo.compiled is not None) == cfg.run.compile
    obs = trainer.env.reset(seed=cfg.run.seed + cfg.env.num_envs * d.rank)
    before = torch.cat([p.detach().flatten() for p in trainer.agent.parameters()])
    _, episodes = trainer.collect(obs)
    trainer._update_and_check(episodes)
    after = torch.cat([p.detach().flatten() for p in trainer.agent.parameters()])
    gathered = [torch.zeros_like(after) for _ in range(d.world_size)]
    dist.all_gather(gathered, after)
    obs_gathered = [torch.zeros_like(trainer.lanes.only.storage.obs) for _ in range(d.world_size)]
    dist.all_gather(obs_gathered, trainer.lanes.only.storage.obs)
    rewards = trainer.lanes.only.reward_scaler.moments
    stats = torch.cat([trainer.agent.obs_normalizer.moments.mean, trainer.agent.obs_normalizer.moments.var,
                       trainer.agent.obs_normalizer.moments.count[None], rewards.mean[None], rewards.var[None],
                       rewards.count[None]])
    stats_gathered = [torch.zeros_like(stats) for _ in range(d.world_size)]
    dist.all_gather(stats_gathered, stats)
    if d.is_main:
        assert all(torch.equal(g, stats_gathered[0]) for g in stats_gathered), "normaliser statistics differ"
        assert float(trainer.agent.obs_normalizer.moments.count) == d.world_size * 64 * 4  # every rank's steps
        assert float(trainer.lanes.only.reward_scaler.moments.count) == d.world_size * 64 * 4
        assert not torch.equal(before, after), "the update changed nothing"
        assert all(torch.equal(g, gathered[0]) for g in gathered), "parameters differ across ranks"
        assert not torch.equal(obs_gathered[0], obs_gathered[1]), "ranks collected identical rollouts"
        digest = hashlib.sha256(after.numpy().tobytes() + stats.numpy().tobytes()).hexdigest()[:16]
        print(f"IDENTICAL world_size={d.world_size} max_change={float((after - before).abs().max()):.3e} "
              f"digest={digest}")
    trainer.env.close()
    shutdown()


if __name__ == "__main__":
    main()
    sys.stdout.flush()
    # As main.py does: torch 2.13 sometimes aborts in interpreter teardown after a gloo group and
    # torch.optim ("terminate called without an active exception"), which torchrun reports as a failure.
    os._exit(0)
