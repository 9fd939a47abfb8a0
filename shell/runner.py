"""The training loop: collect, compute advantages, update, log; then checkpoint and evaluate."""

from __future__ import annotations

import csv
import json
import math
import statistics
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import torch
from tqdm import tqdm

import core
from shell.checkpoint import save_checkpoint
from shell.config import Config, dump_toml
from shell.envs import make_env
from shell.errors import ConfigError, TrainingError
from shell.evaluation import evaluate
from shell.networks import ActorCritic, default_ent_coef
from shell.ppo import PPO
from shell.storage import RolloutStorage

CSV_FIELDS = ("update", "env_steps", "seconds", "sps", "learning_rate", "policy_loss", "value_loss", "entropy",
              "approx_kl", "clipfrac", "explained_variance", "epochs", "episodic_return", "episodic_length")


def resolve_device(name: str) -> torch.device:
    """'auto' -> cuda when available, else cpu. Raises ConfigError for cuda without a GPU."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise ConfigError("run.device = 'cuda' but torch sees no CUDA device; use 'cpu' or 'auto'")
    return torch.device(name)


def default_run_dir(config: Config) -> Path:
    env_name = config.env.id.replace("/", "_").replace(":", "_")
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    base = Path("runs") / f"{env_name}__s{config.run.seed}__{stamp}"
    path, i = base, 1
    while path.exists():
        path, i = base.with_name(f"{base.name}-{i}"), i + 1
    return path


def prepare_run_dir(run_dir: Path | None, config: Config) -> Path:
    """Create the run dir; a non-empty existing one is refused (ConfigError)."""
    path = Path(run_dir) if run_dir is not None else default_run_dir(config)
    if path.exists() and (not path.is_dir() or any(path.iterdir())):
        raise ConfigError(f"--run-dir {path} exists and is not empty; pick a new one or remove it")
    path.mkdir(parents=True, exist_ok=True)
    return path


class Trainer:
    """Owns the envs, the agent, the PPO update, the storage and the logs of one run."""

    def __init__(self, config: Config, run_dir: Path):
        self.config = config
        self.run_dir = run_dir
        torch.set_num_threads(config.run.torch_threads)
        self.device = resolve_device(config.run.device)
        torch.manual_seed(config.run.seed)
        self.generator = torch.Generator(self.device).manual_seed(config.run.seed)

        self.env = make_env(config.env, self.device)
        self.agent = ActorCritic(self.env.obs_size, self.env.action_space, config.policy).to(self.device)
        self.ent_coef = (config.ppo.ent_coef if config.ppo.ent_coef is not None
                         else default_ent_coef(self.env.action_space))
        self.ppo = PPO(self.agent, config.ppo, self.ent_coef, self.generator)
        space = self.env.action_space
        action_dtype = torch.float32 if space.dtype.kind == "f" else torch.long
        self.storage = RolloutStorage(config.ppo.num_steps, config.env.num_envs, self.env.obs_size,
                                      tuple(space.shape), action_dtype, self.device)
        self.update = 0
        self.env_steps = 0
        self.episode_returns: list[float] = []
        run_dir.mkdir(parents=True, exist_ok=True)
        (run_dir / "config.toml").write_text(dump_toml(config))

    # ------------------------------------------------------------------ collect
    def collect(self, obs: torch.Tensor) -> tuple[torch.Tensor, list[float], list[int]]:
        """Fill the storage with one rollout from ``obs``; return the next obs and finished episodes."""
        gamma = self.config.ppo.gamma
        storage, agent = self.storage, self.agent
        returns: list[float] = []
        lengths: list[int] = []
        storage.reset()
        with torch.inference_mode():
            for _ in range(storage.num_steps):
                sample = agent.get_action(obs, generator=self.generator)
                step = self.env.step(sample.action)
                reward = step.reward * self.config.ppo.reward_scale
                if step.final_obs is not None:
                    # Time-limit truncation bootstraps from V(final_obs) (DESIGN.md, "Truncation").
                    reward = core.bootstrap_truncated(reward, step.terminated, step.truncated,
                                                      agent.value(step.final_obs), gamma)
                storage.add(obs, sample.raw_action, sample.log_prob, sample.value, reward,
                            step.terminated | step.truncated)
                returns += step.episode_returns
                lengths += step.episode_lengths
                obs = step.obs
            storage.compute_advantages(agent.value(obs), gamma, self.config.ppo.gae_lambda)
        return obs, returns, lengths

    # ------------------------------------------------------------------ loop
    def train(self) -> dict[str, Any]:
        cfg = self.config
        num_updates = cfg.num_updates
        writer, csv_file, csv_writer = self._open_logs()
        progress = tqdm(total=num_updates * cfg.batch_size, unit="step", file=sys.stderr, dynamic_ncols=True,
                        mininterval=0.5, desc=cfg.env.id)
        obs = self.env.reset(seed=cfg.run.seed)
        start = time.perf_counter()
        try:
            for update in range(num_updates):
                lr = cfg.ppo.learning_rate
                if cfg.ppo.anneal_lr:
                    lr = core.linear_schedule(cfg.ppo.learning_rate, 0.0, update, num_updates)
                    self.ppo.set_learning_rate(lr)

                # -- collect and compute advantages
                obs, ep_returns, ep_lengths = self.collect(obs)
                self.env_steps += cfg.batch_size

                # -- update
                metrics = self.ppo.update(self.storage)
                values = dict(zip(metrics, torch.stack(list(metrics.values())).tolist(), strict=True))
                bad = [k for k, v in values.items() if not math.isfinite(v)]
                if bad:
                    raise TrainingError(f"non-finite {', '.join(bad)} at update {update + 1}; stopping")
                self.update = update + 1

                # -- log
                elapsed = time.perf_counter() - start
                self.episode_returns += ep_returns
                row = {"update": self.update, "env_steps": self.env_steps, "seconds": round(elapsed, 3),
                       "sps": round(self.env_steps / elapsed, 1), "learning_rate": lr, **values,
                       "episodic_return": statistics.fmean(ep_returns) if ep_returns else "",
                       "episodic_length": statistics.fmean(ep_lengths) if ep_lengths else ""}
                csv_writer.writerow(row)
                for key, value in row.items():
                    if key not in ("update", "env_steps") and value != "":
                        writer.add_scalar(f"{'charts' if key.startswith('episodic') else 'train'}/{key}",
                                          value, self.env_steps)
                progress.update(cfg.batch_size)
                recent = self.episode_returns[-20:]
                progress.set_postfix(sps=int(row["sps"]), ret=f"{statistics.fmean(recent):.1f}" if recent else "-",
                                     refresh=False)
            train_seconds = time.perf_counter() - start
        finally:
            progress.close()
            writer.close()
            csv_file.close()
            self.env.close()

        checkpoint = self.save()
        eval_returns = evaluate(self.agent, cfg.env, cfg.run.eval_episodes, cfg.run.seed, self.device)
        summary = {
            "env_id": cfg.env.id,
            "seed": cfg.run.seed,
            "env_steps": self.env_steps,
            "updates": self.update,
            "train_seconds": round(train_seconds, 3),
            "sps": round(self.env_steps / train_seconds, 1),
            "eval_return_mean": statistics.fmean(eval_returns) if eval_returns else None,
            "eval_return_std": statistics.pstdev(eval_returns) if eval_returns else None,
            "eval_episodes": len(eval_returns),
            "run_dir": str(self.run_dir),
            "checkpoint": str(checkpoint),
            "world_size": 1,
            "device": str(self.device),
            "interrupted": False,
        }
        (self.run_dir / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
        return summary

    def _open_logs(self):
        from torch.utils.tensorboard import SummaryWriter  # imported late: it is the slowest import

        writer = SummaryWriter(log_dir=str(self.run_dir / "tensorboard"))
        csv_file = open(self.run_dir / "metrics.csv", "w", newline="")  # noqa: SIM115 - closed in train()
        csv_writer = csv.DictWriter(csv_file, fieldnames=CSV_FIELDS)
        csv_writer.writeheader()
        return writer, csv_file, csv_writer

    def save(self) -> Path:
        """Atomically write ``checkpoints/ckpt_<env_steps>.pt`` and point ``latest.pt`` at it."""
        state = {
            "model": self.agent.state_dict(),
            "optimizer": self.ppo.optimizer.state_dict(),
            "config": self.config.to_dict(),
            "update": self.update,
            "env_steps": self.env_steps,
            "torch_rng": torch.get_rng_state(),
            "generator": self.generator.get_state(),
        }
        return save_checkpoint(self.run_dir / "checkpoints" / f"ckpt_{self.env_steps:010d}.pt", state)


def train(config: Config, run_dir: Path | None = None) -> dict[str, Any]:
    """Train one run and return its summary (also written to RUN_DIR/summary.json)."""
    path = prepare_run_dir(run_dir, config)
    return Trainer(config, path).train()
