"""The training loop: collect, compute advantages, update, log; checkpoints, signals, resume."""

from __future__ import annotations

import csv
import json
import math
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np
import torch
from tqdm import tqdm

import core
from shell.checkpoint import latest_checkpoint, load_checkpoint, save_checkpoint
from shell.config import Config, config_from_saved, dump_toml
from shell.distributed import Dist
from shell.envs import make_env
from shell.errors import ConfigError, TrainingError
from shell.evaluation import evaluate
from shell.networks import ActorCritic, default_ent_coef
from shell.normalization import RewardScaler
from shell.ppo import PPO
from shell.storage import RolloutStorage

CSV_FIELDS = ("update", "env_steps", "seconds", "sps", "learning_rate", "policy_loss", "value_loss", "entropy",
              "approx_kl", "clipfrac", "explained_variance", "grad_norm", "epochs", "episodic_return",
              "episodic_length", "eval_return")
SIGNAL_EXIT = {signal.SIGINT: 130, signal.SIGTERM: 143}


class Interrupted(Exception):
    """Raised inside the loop when SIGINT or SIGTERM arrived."""


def resolve_device(name: str, dist: Dist | None = None) -> torch.device:
    """'auto' -> cuda when available, else cpu; under torchrun, CUDA rank r uses cuda:LOCAL_RANK.

    Raises ConfigError for cuda without a GPU.
    """
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cuda" and not torch.cuda.is_available():
        raise ConfigError("run.device = 'cuda' but torch sees no CUDA device; use 'cpu' or 'auto'")
    if name == "cuda" and dist is not None and dist.enabled:
        return torch.device("cuda", dist.local_rank)
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
        raise ConfigError(f"--run-dir {path} exists and is not empty; use --resume {path} to continue it, "
                          "or pick a new folder")
    path.mkdir(parents=True, exist_ok=True)
    return path


def library_versions() -> dict[str, str | None]:
    """Versions of Python, torch, gymnasium and numpy, and this project's git commit if it has one."""
    root = Path(__file__).resolve().parent.parent
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True,
                                timeout=5).stdout.strip() or None
        dirty = bool(subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                                    capture_output=True, text=True, timeout=5).stdout.strip())
    except (OSError, subprocess.SubprocessError):
        commit, dirty = None, False
    return {"python": platform.python_version(), "torch": torch.__version__, "gymnasium": gymnasium.__version__,
            "numpy": np.__version__, "git_commit": commit, "git_dirty": dirty if commit else None}


class Trainer:
    """Owns the envs, the agent, the PPO update, the storage and the logs of one run.

    ``train()`` runs from the current counters to ``num_updates``; after
    ``load_state_dict`` of a checkpoint it continues that run exactly, except that
    the envs restart from a reset (seeded from ``seed`` and the update count).

    Under torchrun (``dist.world_size > 1``) every rank builds a Trainer: each runs
    its own envs (sub-env i of rank r seeded ``seed + r * num_envs + i``) and takes
    ``total_timesteps / world_size`` of the steps; only rank 0 writes logs,
    evaluates and checkpoints. Every method that saves is collective.
    """

    def __init__(self, config: Config, run_dir: Path, dist: Dist | None = None):
        self.config = config
        self.run_dir = Path(run_dir)
        self.dist = dist or Dist()
        torch.set_num_threads(config.run.torch_threads)
        self.device = resolve_device(config.run.device, self.dist)
        torch.manual_seed(config.run.seed)  # the same initial parameters on every rank
        self.generator = torch.Generator(self.device).manual_seed(config.run.seed + self.dist.rank)
        self.num_updates = -(-config.run.total_timesteps // (config.batch_size * self.dist.world_size))

        self.env = make_env(config.env, self.device)
        self.agent = ActorCritic(self.env.obs_size, self.env.action_space, config.policy, config.env.normalize_obs,
                                 config.env.obs_clip).to(self.device)
        self.reward_scaler = RewardScaler(config.ppo.gamma, config.env.normalize_reward,
                                          config.env.reward_clip).to(self.device)
        self.ent_coef = (config.ppo.ent_coef if config.ppo.ent_coef is not None
                         else default_ent_coef(self.env.action_space))
        self.dist.broadcast_parameters(self.agent)
        self.ppo = PPO(self.agent, config.ppo, self.ent_coef, self.generator, self.dist)
        actor = self.agent.actor  # raw actions follow the policy (float u, long indices), not the space's dtype
        self.storage = RolloutStorage(config.ppo.num_steps, config.env.num_envs, self.env.obs_size,
                                      actor.raw_action_shape, actor.raw_action_dtype, self.device)
        self.update = 0
        self.env_steps = 0
        self.train_seconds = 0.0
        self.best_eval: float | None = None
        self.recent_return: float | None = None
        self._signal: int | None = None
        if self.dist.is_main:
            self.run_dir.mkdir(parents=True, exist_ok=True)
            (self.run_dir / "config.toml").write_text(dump_toml(config))
            (self.run_dir / "versions.json").write_text(json.dumps(library_versions(), indent=2) + "\n")

    # ------------------------------------------------------------------ state
    def state_dict(self) -> dict[str, Any]:
        """Everything a resume needs (collective under torchrun: gathers every rank's generator)."""
        return {
            "world_size": self.dist.world_size,
            "config": self.config.to_dict(),
            "model": self.agent.state_dict(),
            "optimizer": self.ppo.optimizer.state_dict(),
            "reward_scaler": self.reward_scaler.state_dict(),
            "update": self.update,
            "env_steps": self.env_steps,
            "train_seconds": self.train_seconds,
            "best_eval": self.best_eval,
            "torch_rng": torch.get_rng_state(),
            "generator": self.generator.get_state(),
            "rank_generators": self.dist.gather_objects(self.generator.get_state()),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.agent.load_state_dict(state["model"])
        self.ppo.optimizer.load_state_dict(state["optimizer"])
        self.reward_scaler.load_state_dict(state["reward_scaler"])
        self.update = int(state["update"])
        self.env_steps = int(state["env_steps"])
        self.train_seconds = float(state["train_seconds"])
        self.best_eval = state["best_eval"]
        torch.set_rng_state(state["torch_rng"])
        if state.get("world_size", 1) != self.dist.world_size:
            raise ConfigError(f"the checkpoint was written by {state.get('world_size', 1)} process(es); "
                              f"resume it with the same number, not {self.dist.world_size}")
        self.generator.set_state(state["rank_generators"][self.dist.rank])

    def save(self) -> Path:
        """Atomically write ``checkpoints/ckpt_<env_steps>.pt`` (rank 0); keep the newest ``keep_checkpoints``."""
        folder = self.run_dir / "checkpoints"
        path = folder / f"ckpt_{self.env_steps:012d}.pt"
        state = self.state_dict()
        if not self.dist.is_main:
            return path
        save_checkpoint(path, state)
        for old in sorted(folder.glob("ckpt_*.pt"))[: -self.config.run.keep_checkpoints]:
            old.unlink()
        return path

    # ------------------------------------------------------------------ collect
    def collect(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Fill the storage with one rollout from ``obs``.

        Returns:
            The next observation, and ``[3]`` device totals over the episodes that
            ended: (count, sum of raw returns, sum of lengths).
        """
        gamma = self.config.ppo.gamma
        storage, agent = self.storage, self.agent
        episodes = torch.zeros(3, device=self.device)
        storage.reset()
        normalize = agent.obs_normalizer.normalize
        with torch.inference_mode():
            for _ in range(storage.num_steps):
                if self._signal is not None and not self.dist.enabled:
                    raise Interrupted  # under torchrun, ranks stop together at the next update
                norm_obs = normalize(obs, update=True)
                action, raw_action = agent.sample_action(norm_obs, self.generator)
                step = self.env.step(action)
                done = step.terminated | step.truncated
                reward = self.reward_scaler.scale(step.reward, done) * self.config.ppo.reward_scale
                if step.final_obs is not None:
                    # Time-limit truncation bootstraps from V(final_obs) (DESIGN.md, "Truncation"),
                    # the final observation normalised with the same statistics.
                    reward = core.bootstrap_truncated(reward, step.terminated, step.truncated,
                                                      agent.value(normalize(step.final_obs)), gamma)
                storage.add(norm_obs, raw_action, reward, done)
                ended = step.episode_done
                if ended is not None:
                    episodes += torch.stack((ended.sum(), torch.where(ended, step.episode_return, 0.0).sum(),
                                             torch.where(ended, step.episode_length, 0).sum())).to(episodes.dtype)
                obs = step.obs
            # log pi_old and V(s_t) of the whole rollout in one batched pass (same parameters as at each step)
            storage.set_log_probs_and_values(*agent.log_prob_and_value(storage.obs.flatten(0, 1),
                                                                       storage.raw_actions.flatten(0, 1)))
            storage.compute_advantages(agent.value(normalize(obs)), gamma, self.config.ppo.gae_lambda)
        agent.obs_normalizer.commit(self.dist)
        self.reward_scaler.commit(self.dist)
        return obs, episodes

    def _update_and_check(self, episodes: torch.Tensor) -> dict[str, Any]:
        """One PPO update, then one host sync to read the metrics and episode totals and check finiteness."""
        metrics = self.ppo.update(self.storage)
        self.dist.all_reduce_sum(episodes)
        params_finite = torch.stack([p.isfinite().all() for p in self.agent.parameters()]).all()
        values = torch.cat((torch.stack(list(metrics.values())), episodes, params_finite.float()[None])).tolist()
        out: dict[str, Any] = dict(zip(metrics, values, strict=False))
        bad = [k for k in ("policy_loss", "value_loss", "entropy", "grad_norm") if not math.isfinite(out[k])]
        if values[-1] != 1.0:
            bad.append("parameters")
        if bad:
            raise TrainingError(
                f"non-finite {', '.join(bad)} at update {self.update + 1} (env step {self.env_steps}); "
                f"training stopped, the last good checkpoint is in {self.run_dir / 'checkpoints'}"
            )
        count, return_sum, length_sum = values[len(metrics):len(metrics) + 3]
        out["episodic_return"] = return_sum / count if count else ""
        out["episodic_length"] = length_sum / count if count else ""
        return out

    # ------------------------------------------------------------------ loop
    def train(self) -> dict[str, Any]:
        """Run to ``num_updates``; return the summary (rank 0 also writes it to summary.json)."""
        cfg, main = self.config, self.dist.is_main
        num_updates, step_batch = self.num_updates, cfg.batch_size * self.dist.world_size
        logs = self._open_logs() if main else None
        progress = tqdm(total=num_updates * step_batch, initial=self.env_steps, unit="step", file=sys.stderr,
                        dynamic_ncols=True, mininterval=0.5, desc=cfg.env.id, disable=not main)
        previous = {s: signal.signal(s, self._on_signal) for s in SIGNAL_EXIT}
        # A fresh run resets with `seed` (plus the rank's offset); a resumed one with a seed
        # derived from its update count.
        offset = cfg.env.num_envs * (self.dist.rank + self.update * self.dist.world_size)
        obs = self.env.reset(seed=cfg.run.seed + offset)
        self.reward_scaler.reset_returns()
        start = time.perf_counter() - self.train_seconds
        eval_returns: list[float] = []
        checkpoint: Path | None = None
        try:
            while self.update < num_updates:
                self._check_signal()
                lr = cfg.ppo.learning_rate
                if cfg.ppo.anneal_lr:
                    lr = core.linear_schedule(cfg.ppo.learning_rate, 0.0, self.update, num_updates)
                    self.ppo.set_learning_rate(lr)

                # -- collect and compute advantages
                obs, episodes = self.collect(obs)
                # -- update
                values = self._update_and_check(episodes)
                self.update += 1
                self.env_steps += step_batch
                self.train_seconds = time.perf_counter() - start

                # -- periodic evaluation and checkpoints
                row_eval = ""
                if cfg.run.eval_every and self.update % cfg.run.eval_every == 0 and self.update < num_updates:
                    row_eval = self._periodic_eval()
                    start = time.perf_counter() - self.train_seconds  # evaluation time is not training time
                elif cfg.run.checkpoint_every and self.update % cfg.run.checkpoint_every == 0:
                    self.save()

                # -- log
                if values["episodic_return"] != "":
                    self.recent_return = values["episodic_return"]
                row = {"update": self.update, "env_steps": self.env_steps, "seconds": round(self.train_seconds, 3),
                       "sps": round(self.env_steps / self.train_seconds, 1), "learning_rate": lr, **values,
                       "eval_return": row_eval if row_eval is not None else ""}
                if logs is not None:
                    self._log_row(logs, row)
                progress.update(step_batch)
                progress.set_postfix(sps=int(row["sps"]), refresh=False,
                                     ret="-" if self.recent_return is None else f"{self.recent_return:.1f}")
            checkpoint = self.save()
            if main:
                eval_returns = evaluate(self.agent, cfg.env, cfg.run.eval_episodes, cfg.run.seed, self.device)
        except Interrupted:
            checkpoint = self.save()
            if main:
                name = signal.Signals(self._signal).name
                print(f"\ninterrupted by {name}: checkpoint saved to {checkpoint}; continue with "
                      f"--resume {self.run_dir}", file=sys.stderr)
        finally:
            for s, handler in previous.items():
                signal.signal(s, handler)
            progress.close()
            if logs is not None:
                logs[0].close()
                logs[1].close()
            self.env.close()
        return self._write_summary(eval_returns, checkpoint)

    def _check_signal(self) -> None:
        """Raise Interrupted when a signal arrived (on any rank: they agree through one all_reduce)."""
        flag = self._signal is not None
        if self.dist.enabled:
            flag = bool(self.dist.all_reduce_sum(torch.tensor([float(flag)], device=self.device)).item())
            if flag and self._signal is None:
                self._signal = signal.SIGTERM
        if flag:
            raise Interrupted

    @staticmethod
    def _log_row(logs: tuple, row: dict[str, Any]) -> None:
        writer, _, csv_writer = logs
        csv_writer.writerow({k: row[k] for k in CSV_FIELDS})
        for key in CSV_FIELDS[2:]:
            if row[key] != "":
                group = "charts" if key.startswith(("episodic", "eval")) else "train"
                writer.add_scalar(f"{group}/{key}", row[key], row["env_steps"])

    def _on_signal(self, signum: int, _frame: Any) -> None:
        if self._signal is not None:  # a second Ctrl-C while saving is ignored; saving is quick
            return
        self._signal = signum

    def _periodic_eval(self) -> float | None:
        """Evaluate (rank 0), checkpoint (all ranks), and copy the checkpoint to best.pt when it is the best."""
        mean, is_best = None, False
        if self.dist.is_main:
            returns = evaluate(self.agent, self.config.env, self.config.run.eval_episodes, self.config.run.seed,
                               self.device)
            mean = statistics.fmean(returns)
            is_best = self.best_eval is None or mean > self.best_eval
            if is_best:
                self.best_eval = mean
        path = self.save()
        if is_best:
            tmp = path.with_name(".best.pt.tmp")
            shutil.copyfile(path, tmp)
            tmp.replace(path.with_name("best.pt"))
        return mean

    def _write_summary(self, eval_returns: list[float], checkpoint: Path | None) -> dict[str, Any]:
        cfg = self.config
        seconds = max(self.train_seconds, 1e-9)
        summary = {
            "env_id": cfg.env.id,
            "seed": cfg.run.seed,
            "env_steps": self.env_steps,
            "updates": self.update,
            "train_seconds": round(self.train_seconds, 3),
            "sps": round(self.env_steps / seconds, 1),
            "eval_return_mean": statistics.fmean(eval_returns) if eval_returns else None,
            "eval_return_std": statistics.pstdev(eval_returns) if eval_returns else None,
            "eval_episodes": len(eval_returns),
            "run_dir": str(self.run_dir),
            "checkpoint": str(checkpoint) if checkpoint else None,
            "world_size": self.dist.world_size,
            "device": str(self.device),
            "interrupted": self._signal is not None,
        }
        if self._signal is not None:
            summary["signal"] = signal.Signals(self._signal).name
            summary["exit_code"] = SIGNAL_EXIT[self._signal]
        if self.dist.is_main:
            (self.run_dir / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
        return summary

    def _open_logs(self):
        from torch.utils.tensorboard import SummaryWriter  # imported late: it is the slowest import

        writer = SummaryWriter(log_dir=str(self.run_dir / "tensorboard"), purge_step=self.env_steps or None)
        path = self.run_dir / "metrics.csv"
        fresh = self.update == 0 or not path.exists()
        csv_file = open(path, "w" if fresh else "a", newline="")
        csv_writer = csv.DictWriter(csv_file, fieldnames=CSV_FIELDS)
        if fresh:
            csv_writer.writeheader()
        return writer, csv_file, csv_writer


def train(config: Config, run_dir: Path | None = None, dist: Dist | None = None) -> dict[str, Any]:
    """Train one run and return its summary (also written to RUN_DIR/summary.json).

    Under torchrun, rank 0 picks and prepares the run dir and tells the others.
    """
    dist = dist or Dist()
    existed = run_dir is not None and Path(run_dir).exists()
    path = prepare_run_dir(run_dir, config) if dist.is_main else None
    path = Path(dist.gather_objects(str(path))[0])
    try:
        trainer = Trainer(config, path, dist)
    except ConfigError:
        # a start-up error (env id, space, device, missing extra) leaves no empty run dir behind
        if dist.is_main and not existed and path.is_dir() and not any(path.iterdir()):
            path.rmdir()
        raise
    return trainer.train()


def resume(run_dir: Path, total_timesteps: int | None = None, device: str | None = None,
           dist: Dist | None = None) -> dict[str, Any]:
    """Continue the run in ``run_dir`` from its newest checkpoint.

    The config is the checkpoint's; ``total_timesteps`` may extend it and ``device``
    may move it. Counters, learning-rate schedule, optimizer moments and RNG streams
    continue exactly; the envs restart from a reset.

    Raises:
        ConfigError: no such run dir, no checkpoint in it, or a corrupt one.
    """
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise ConfigError(f"--resume {run_dir}: no such run dir")
    path = latest_checkpoint(run_dir / "checkpoints")
    state = load_checkpoint(path)
    if total_timesteps is not None and total_timesteps <= state["env_steps"]:
        raise ConfigError(f"--resume {run_dir}: the run already took {state['env_steps']} steps; "
                          f"--total-timesteps {total_timesteps} must be larger")
    config = config_from_saved(state["config"], total_timesteps=total_timesteps, device=device)
    trainer = Trainer(config, run_dir, dist)
    trainer.load_state_dict(state)
    print(f"resuming {run_dir} from {path.name} (update {trainer.update}, env step {trainer.env_steps})",
          file=sys.stderr)
    return trainer.train()
