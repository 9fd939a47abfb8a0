"""The training loop: collect, compute advantages, update, log; checkpoints, signals, resume."""

from __future__ import annotations

import json
import math
import platform
import signal
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np
import torch
from tqdm import tqdm

import core
from shell.callbacks import CallbackContext, EvalEnv, TrainEnv, callback_states, load_callback_states, takes_context
from shell.checkpointer import Checkpointer
from shell.config import Config, dump_toml
from shell.devices import resolve_device
from shell.distributed import Dist, RankLost, settle_signal
from shell.envs import Rows, check_eval_env, env_package_versions, make_lanes, masks
from shell.errors import ConfigError, TrainingError, said
from shell.evaluation import EvalResult, EvalSpec, check_opponents, eval_fields, evaluate, resolve_opponents
from shell.faults import kill_point
from shell.files import new_run_folder
from shell.games import OpponentPool, PoolEnv, Ratings, check_selfplay
from shell.games.exploitability import AVERAGE_FIELDS, EXPLOITABILITY_FIELDS, measures_exploitability
from shell.inference import load_weights, policy_for
from shell.installation import git_state, package_version
from shell.lanes import LANE_METRICS, Lanes
from shell.logs import CSV_FIELDS, LANE_FIELDS, RunLogs, lane_file
from shell.seeding import sampling_seed, train_seeds
from shell.stop import Interrupted, StopRequest, exit_code
from shell.tracking import FAILED, FINISHED, KILLED, Loggers, RunEnd, RunStart, numeric, open_loggers

__all__ = ["CSV_FIELDS", "Trainer", "prepare_run_dir", "resolve_device"]  # resolve_device: shell.devices

def default_run_dir(config: Config) -> Path:
    """``runs/<env>__s<seed>__<time>`` under the current folder, new (``-1``, ``-2``, ... if taken)."""
    env_name = config.env.id.replace("/", "_").replace(":", "_")
    return new_run_folder(f"{env_name}__s{config.run.seed}")


def prepare_run_dir(run_dir: Path | None, config: Config) -> Path:
    """Create the run dir; a non-empty existing one is refused (ConfigError)."""
    path = Path(run_dir) if run_dir is not None else default_run_dir(config)
    if path.exists() and (not path.is_dir() or any(path.iterdir())):
        raise ConfigError(f"{said('run_dir', path)} exists and is not empty; continue it with "
                          f"{said('resume', path)}, or pick a new folder")
    path.mkdir(parents=True, exist_ok=True)
    return path


def library_versions() -> dict[str, str | bool | None]:
    """Versions of Python, torch, gymnasium, numpy and this package (``ppo_core``: the installed
    distribution's version), of the env packages the run has imported (:func:`shell.envs.env_package_versions`),
    plus the git commit and dirty flag when the code runs from a checkout."""
    commit, dirty = git_state()
    versions: dict[str, str | bool | None] = {
        "python": platform.python_version(), "torch": torch.__version__, "gymnasium": gymnasium.__version__,
        "numpy": np.__version__, "ppo_core": package_version(), **env_package_versions()}
    return {**versions, "git_commit": commit, "git_dirty": dirty}


class Trainer:
    """Owns the envs, the lanes (each group of agents' policy, update, storage), the logs and the
    checkpoints of one run.

    ``train()`` runs from the current counters to ``num_updates``; after
    ``load_state_dict`` of a checkpoint it continues that run exactly, except that
    the envs restart from a reset (seeded from ``seed`` and the update count).

    Every random stream comes from ``run.seed`` by ``run.seed_scheme`` (shell/seeding.py).
    Under torchrun (``dist.world_size > 1``) every rank builds a Trainer: each runs
    its own envs (with streams of its own rank) and takes
    ``total_timesteps / world_size`` of the steps; only rank 0 writes logs,
    evaluates and checkpoints. Every method that saves is collective.

    ``stop`` is polled at every env step, after every minibatch and during every
    evaluation; once requested, the run saves a checkpoint and returns its summary
    with ``interrupted: true`` (the CLI requests it on SIGINT/SIGTERM).

    ``callbacks`` are called after each update's metrics row is written, with that row (the
    columns of metrics.csv, and in a run of several lanes each lane's metrics as ``<group>/<metric>``;
    ``eval_return`` is ``""`` when no evaluation ran in the update): on
    rank 0, or on every rank for one that takes a second argument, a
    :class:`shell.callbacks.CallbackContext` (curricula: it reaches the envs). If one returns
    True, the loop ends after that update: the final checkpoint and evaluation follow as usual
    and the summary has ``stopped_early: true``. An exception raised by a callback propagates
    out of ``train()``. The state of callbacks with ``state_dict`` is in every checkpoint
    (shell/callbacks.py).

    Rank 0 hands every row to its loggers (``run.loggers``, shell/tracking/), which the trainer knows
    only through their interface; trackers get rows once a checkpoint covers them.
    """

    def __init__(self, config: Config, run_dir: Path, dist: Dist | None = None, stop: StopRequest | None = None,
                 env_source: Any = None, callbacks: Sequence[Callable[..., bool | None]] = (),
                 eval_source: Any = None, progress: bool = True, source_kind: str | None = None,
                 tracker_tags: dict[str, str] | None = None):
        # -- assembly: the run's envs, lanes, checkpoints and callbacks (the loggers open in train())
        self.config = config
        self.run_dir = Path(run_dir)
        self.dist = dist or Dist()
        self.stop = stop or StopRequest()
        self.device = resolve_device(config.run.device, self.dist)
        self.generator = torch.Generator(self.device).manual_seed(
            sampling_seed(config.run.seed, config.run.seed_scheme, self.dist.rank))
        self.num_updates = config.num_updates(self.dist.world_size)
        self.env_source, self.eval_source, self.source_kind = env_source, eval_source, source_kind
        self.callbacks = list(callbacks)
        self._with_context = [takes_context(cb) for cb in self.callbacks]
        self.eval_env_changes = EvalEnv()  # what callbacks set on the envs of later evaluations
        self.progress = progress
        self.stopped_early = False
        self.env = make_lanes(config.env, self.device, source=env_source, policy=config.policy)
        if env_source is None and eval_source is None and config.run.eval_episodes and self.dist.is_main:
            try:  # a backend evaluated on another backend's env: build one now, to fail before training
                check_eval_env(config.env, self.device)
            except ConfigError:
                self.env.close()
                raise
        #: ``[selfplay]``'s pool (None without it): who plays each copy's game; its opponents move inside the env
        self.pool: OpponentPool | None = None
        try:
            check_opponents(config, self.env.lanes)  # bots or openings that an env without opponents would ignore
            if config.run.eval_episodes and self.dist.is_main:
                resolve_opponents(config.run.eval_opponents)  # a bot that cannot be imported: fail before training
            if config.selfplay.enabled:
                check_selfplay(self.env.lanes, config)
            self.lanes = Lanes(self.env, config, self.device, self.generator, self.dist)
            if config.selfplay.enabled:
                self.pool = OpponentPool.for_run(self.env, self.lanes.only.agent, config, self.dist.rank, self.device)
                self.env = PoolEnv(self.env, self.pool)  # the game as the learner sees it: opponents move inside
        except ConfigError:
            self.env.close()
            raise
        self.agent = self.lanes.agent  # the run's policy, as checkpoints hold it
        #: a turn-based game's players rated at every evaluation (metrics.csv's ``elo``); nothing for other envs
        self.ratings = Ratings(self.env.lanes, config.run.seed, config.run.seed_scheme)
        #: ``run.exploitability``: an OpenSpiel game's evaluations measure the policy's exact exploitability
        self.exploitability = self.dist.is_main and measures_exploitability(config)
        self.spaces = self.lanes.spaces
        self.checkpoints = Checkpointer(self.run_dir, config.run.keep_checkpoints, self.dist.is_main)
        self.update = 0
        self.env_steps = 0
        self.train_seconds = 0.0
        self.best_eval: float | None = None
        self.recent_return: float | None = None
        self._signal: int | None = None  # the signal that interrupted train(), if any
        self._warned_openings = False  # said once: a rollout without a move of the learner
        self.tracker_tags = dict(tracker_tags or {})
        self._loggers = Loggers()  # rank 0's loggers (run.loggers), open during train()
        if self.dist.is_main:
            self.run_dir.mkdir(parents=True, exist_ok=True)
            (self.run_dir / "config.toml").write_text(dump_toml(config))
            (self.run_dir / "versions.json").write_text(json.dumps(library_versions(), indent=2) + "\n")

    # ------------------------------------------------------------------ state
    def state_dict(self) -> dict[str, Any]:
        """Everything a resume needs (collective under torchrun: gathers every rank's generator)."""
        lanes = self.lanes.state_dict()
        return {
            "world_size": self.dist.world_size,
            "config": self.config.to_dict(),
            "model": lanes["model"],
            "optimizer": lanes["optimizer"],
            "reward_scaler": lanes["reward_scaler"],
            **{key: lanes[key] for key in ("magnet", "average", "average_count") if key in lanes},
            **({} if self.pool is None else {"selfplay": self.pool.state_dict()}),
            "update": self.update,
            "env_steps": self.env_steps,
            "train_seconds": self.train_seconds,
            "best_eval": self.best_eval,
            "env_source": self.source_kind,
            "generator": self.generator.get_state(),
            "rank_generators": self.dist.gather_objects(self.generator.get_state()),
            "spaces": self.spaces,
            "action_mask": self.agent.action_mask_source,  # where the masks came from (None: unmasked)
            "callbacks": callback_states(self.callbacks),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from a checkpoint (see :meth:`state_dict`); its weights load as every checkpoint's do
        (:func:`shell.inference.load_weights`, which refuses an env of other spaces)."""
        load_weights(self.agent, state, average=False)  # the policy that trains, not its average
        self.lanes.load_state_dict(state)
        if self.pool is not None:
            self.pool.load_state_dict(state.get("selfplay"))
        self.update = int(state["update"])
        self.env_steps = int(state["env_steps"])
        self.train_seconds = float(state["train_seconds"])
        self.best_eval = state["best_eval"]
        if state.get("world_size", 1) != self.dist.world_size:
            raise ConfigError(f"the checkpoint was written by {state.get('world_size', 1)} process(es); "
                              f"resume it with the same number, not {self.dist.world_size}")
        self.generator.set_state(state["rank_generators"][self.dist.rank])
        load_callback_states(self.callbacks, state.get("callbacks", []))

    def save(self) -> Path:
        """Atomically write ``checkpoints/ckpt_<env_steps>.pt`` (rank 0; collective): :class:`Checkpointer`."""
        return self.checkpoints.save(self.state_dict(), self.update, self.env_steps,
                                     on_written=lambda: kill_point("checkpoint", self.update))

    def _poll(self, phase: str) -> None:
        """The loop's poll point: the fault-injection hook, then the stop request (not under torchrun,
        where ranks stop together at the next update)."""
        kill_point(phase, self.update + 1)
        if not self.dist.enabled:
            self.stop.check()

    # ------------------------------------------------------------------ collect and update
    def collect(self, rows: dict[str | None, Rows]) -> tuple[dict[str | None, Rows], dict[str | None, torch.Tensor]]:
        """Fill every lane's storage with one rollout from ``rows`` (:meth:`shell.lanes.Lanes.collect`).

        Returns:
            The next rows, and each lane's ``[3]`` device totals over the episodes that ended:
            (count, sum of raw returns, sum of lengths).

        Raises:
            Interrupted: a stop was requested (polled before every env step).
        """
        halfway = self.config.ppo.num_steps // 2

        def poll(t: int) -> None:
            if t == halfway:
                kill_point("rollout", self.update + 1)
            if not self.dist.enabled:
                self.stop.check()

        return self.lanes.collect(self.env, rows, poll)

    def _update_and_check(self, episodes: dict[str | None, torch.Tensor]) -> tuple[dict[str, Any], dict[str, dict]]:
        """Every lane's PPO update, then one host sync to read the metrics and episode totals and check
        finiteness. Returns the run's values (metrics.csv's) and each lane's (a run of several lanes)."""
        metrics, per_lane = self.lanes.update(poll=lambda: self._poll("update"))
        totals = Lanes.episode_totals(episodes)
        self.dist.all_reduce_sum(totals)
        # every value the host reads, by name, in one transfer
        named: dict[str, torch.Tensor] = {**metrics, **dict(zip(EPISODE_TOTALS, totals, strict=True))}
        for name in self.lanes.reported:
            self.dist.all_reduce_sum(episodes[name])
            named.update({f"{name}/{k}": per_lane[name][k] for k in LANE_METRICS})
            named.update({f"{name}/{k}": v for k, v in zip(EPISODE_TOTALS, episodes[name], strict=True)})
        named["parameters_finite"] = torch.stack([p.isfinite().all() for p in self.agent.parameters()]).all().float()
        values = dict(zip(named, torch.stack(list(named.values())).tolist(), strict=True))
        out: dict[str, Any] = {key: values[key] for key in metrics}
        bad = [k for k in ("policy_loss", "value_loss", "entropy", "grad_norm") if not math.isfinite(out[k])]
        if values["parameters_finite"] != 1.0:
            bad.append("parameters")
        if bad:
            raise TrainingError(f"non-finite {', '.join(bad)} at update {self.update + 1} "
                                f"(env step {self.env_steps}); training stopped")
        out.update(_episode_means(values))
        lanes = {name: {**{k: values[f"{name}/{k}"] for k in LANE_METRICS},
                        **_episode_means({k: values[f"{name}/{k}"] for k in EPISODE_TOTALS})}
                 for name in self.lanes.reported}
        return out, lanes

    # ------------------------------------------------------------------ loop
    def train(self) -> dict[str, Any]:
        """Run to ``num_updates``; return the summary (rank 0 also writes it to summary.json).

        Order within an update: collect, update, (periodic evaluation), the metrics rows
        (flushed), then the checkpoint: a checkpoint never covers an update whose row is
        missing, and a resume drops the rows after its checkpoint (shell/logs.py).

        Raises:
            TrainingError: non-finite loss, gradient or parameters, or an env that raised;
                the message says where the last good checkpoint is.
        """
        cfg, main = self.config, self.dist.is_main
        fields = CSV_FIELDS + self.ratings.fields + self._exploitability_fields()
        logs = _RunFiles(self.run_dir, self.update, self.lanes.reported, fields) if main else None
        progress = tqdm(total=self.num_updates * cfg.batch_size * self.dist.world_size, initial=self.env_steps,
                        unit="step", file=sys.stderr, dynamic_ncols=True, mininterval=0.5, desc=cfg.env.id,
                        disable=not (main and self.progress))
        if logs is not None:
            self._loggers = open_loggers(cfg.run.loggers, RunStart(
                self.run_dir, cfg.to_dict(), self.update, self.env_steps, logs.done_rows(),
                cfg.run.tracker_timeout, self.tracker_tags))
            self.checkpoints.loggers = self._loggers
        try:
            summary, checkpoint = self._train(logs, progress)
        except BaseException as exc:
            self._loggers.finish(RunEnd(FAILED))
            self._loggers.close()
            if isinstance(exc, RankLost):
                raise TrainingError(self._rank_lost_message(exc)) from exc
            raise
        self._loggers.finish(RunEnd(KILLED if self._signal is not None else FINISHED, summary, checkpoint))
        self._loggers.close()
        return summary

    def _train(self, logs: _RunFiles | None, progress: tqdm) -> tuple[dict[str, Any], Path | None]:
        """The loop of :meth:`train`; returns the summary and the final checkpoint."""
        cfg = self.config
        step_batch = cfg.batch_size * self.dist.world_size
        outcome: EvalResult | None = None
        checkpoint: Path | None = None
        pending: dict[str, Any] | None = None  # the row of a finished update, not yet written
        try:
            rows = self._start()
            start = time.perf_counter() - self.train_seconds
            while self.update < self.num_updates:
                self._check_stop()
                lr = self._learning_rate()
                # -- collect and compute advantages, then update
                rows, episodes = self.collect(rows)
                if self.pool is not None and not self.pool.take_learner_moves():
                    self._warn_no_learner_moves()
                values, lane_values = self._update_and_check(episodes)
                self.update += 1
                self.lanes.after_update(self.update, cfg.ppo.magnet_every,
                                        int(cfg.ppo.average_start * self.num_updates))
                if self.pool is not None:
                    self.pool.after_update(self.update)
                self.env_steps += step_batch
                self.train_seconds = time.perf_counter() - start
                pending = self._row(lr, values, lane_values)  # written if the evaluation is interrupted
                # -- periodic evaluation
                eval_due = bool(cfg.run.eval_every) and self.update % cfg.run.eval_every == 0 \
                    and self.update < self.num_updates
                if eval_due:
                    outcome = self._periodic_eval()
                    pending.update(self._eval_columns(outcome))
                    start = time.perf_counter() - self.train_seconds  # evaluation time is not training time
                # -- log, callbacks, checkpoint
                row, pending = pending, None
                self._log(logs, row)
                if self.callbacks and self._callbacks_say_stop(row):
                    self.stopped_early = True
                if eval_due or (cfg.run.checkpoint_every and self.update % cfg.run.checkpoint_every == 0):
                    checkpoint = self.save()
                    if eval_due and row["eval_return"] == self.best_eval:
                        self.checkpoints.mark_best(checkpoint)
                self._show(progress, row, step_batch)
                if self.stopped_early:
                    break
            checkpoint = self.save()
            if self.dist.is_main:
                outcome = self._evaluate(self.stop)
        except Interrupted as exc:
            self._signal = exc.signum
            if pending is not None:
                self._log(logs, pending)
            if self.checkpoints.saved_update != self.update:
                checkpoint = self.save()
        except RankLost:
            raise  # train() says where the checkpoints are and how to resume
        except TrainingError as exc:
            raise TrainingError(f"{exc}; {self.checkpoints.note()}") from exc
        finally:
            progress.close()
            if logs is not None:
                logs.close()
            self.env.close()
        if self._signal is not None and self.dist.is_main:  # after the progress bar's last line
            print(f"interrupted by {signal.Signals(self._signal).name}: checkpoint saved to {checkpoint}; "
                  f"continue with {said('resume', self.run_dir)}", file=sys.stderr)
        return self._write_summary(outcome, checkpoint), checkpoint

    def _row(self, lr: float, values: dict[str, Any], lane_values: dict[str, dict]) -> dict[str, Any]:
        """The metrics row of the update just finished (``eval_return`` still empty)."""
        if values["episodic_return"] != "":
            self.recent_return = values["episodic_return"]
        return {"update": self.update, "env_steps": self.env_steps, "seconds": round(self.train_seconds, 3),
                "sps": round(self.env_steps / self.train_seconds, 1), "learning_rate": lr, **values,
                **self._eval_columns(None), **_lane_keys(lane_values)}

    def _eval_columns(self, outcome: EvalResult | None) -> dict[str, Any]:
        """The row's evaluation columns: ``eval_return``, a game's ``elo`` and an OpenSpiel game's ``nash_conv``
        and ``exploitability`` (``""`` in an update without an evaluation: ``outcome`` None)."""
        mean = None if outcome is None or not outcome.returns else sum(outcome.returns) / len(outcome.returns)
        figures = {} if outcome is None else {"": outcome.exploitability, "average_": outcome.average_exploitability}
        exploitability = {}
        for field in self._exploitability_fields():  # nash_conv, exploitability, and the average policy's
            prefix = "average_" if field.startswith("average_") else ""
            value = getattr(figures.get(prefix), field.removeprefix(prefix), None)
            exploitability[field] = "" if value is None else value
        return {"eval_return": "" if mean is None else mean,
                **self.ratings.columns(None if outcome is None else outcome.ratings), **exploitability}

    def _exploitability_fields(self) -> tuple[str, ...]:
        """metrics.csv's columns of the exact exploitability: the policy's, and its average's
        (``ppo.average_decay``); none without ``run.exploitability``."""
        if not self.exploitability:
            return ()
        return EXPLOITABILITY_FIELDS + (AVERAGE_FIELDS if self.lanes.average is not None else ())

    def _show(self, progress: tqdm, row: dict[str, Any], step_batch: int) -> None:
        """Advance the progress bar by an update; the last update's line is drawn once, by the bar's close."""
        progress.set_postfix(sps=int(row["sps"]), refresh=False,
                             ret="-" if self.recent_return is None else f"{self.recent_return:.1f}")
        if self.update < self.num_updates and not self.stopped_early:
            progress.update(step_batch)
        else:
            progress.n += step_batch

    def _start(self) -> dict[str | None, Rows]:
        """Reset the envs for the loop with seeds of this rank and update count (a fresh run: update 0; a
        resumed one: its own, so a resume never replays a stream; :func:`shell.seeding.train_seeds`); callbacks
        with ``on_train_start`` run first (every rank: restored curriculum state reaches the new envs). Then one
        line on stderr says where the action masks come from (:func:`shell.envs.masks.announce`)."""
        run = self.config.run
        for callback in self.callbacks:
            if callable(getattr(callback, "on_train_start", None)):
                callback.on_train_start(self._context())
        rows = self.env.reset(seed=train_seeds(run.seed, run.seed_scheme, self.config.env.num_envs, self.dist.rank,
                                               self.dist.world_size, self.update))
        self.lanes.restart(self.env)
        # -- say where the action masks come from (or that none were found), above the progress bar
        line = masks.announce(self.config.env.action_mask, self.env.mask_sources(),
                              {name: spec.action_space for name, spec in self.env.lanes.items()})
        if line is not None and self.dist.is_main and self.progress:
            tqdm.write(line, file=sys.stderr)
        return rows

    def _learning_rate(self) -> float:
        """This update's learning rate (annealed linearly to 0 with ``ppo.anneal_lr``), set on every lane, and its
        entropy coefficient (``ppo.ent_coef_end``)."""
        cfg = self.config.ppo
        if cfg.ent_coef_end is not None:  # the entropy coefficient's schedule, beside the learning rate's
            self.lanes.set_ent_coef(self.update, self.num_updates, cfg.ent_coef_end)
        if not cfg.anneal_lr:
            return cfg.learning_rate
        lr = core.linear_schedule(cfg.learning_rate, 0.0, self.update, self.num_updates)
        self.lanes.set_learning_rate(lr)
        return lr

    def _log(self, logs: _RunFiles | None, row: dict[str, Any]) -> None:
        """Write an update's rows (rank 0) and hand them to the loggers."""
        if logs is not None:
            logs.write(row)
            self._loggers.log(row)

    def _context(self) -> CallbackContext:
        return CallbackContext(TrainEnv(self.env), self.eval_env_changes, self.update,
                               self.env_steps, self.config, self.run_dir, self.dist.rank, self.dist.world_size)

    def _callbacks_say_stop(self, row: dict[str, Any]) -> bool:
        """Call the callbacks with the row: those of the row alone on rank 0, those that take a context on
        every rank (with rank 0's row); True when one asks to stop (agreed by all ranks)."""
        if any(self._with_context) and self.dist.enabled:
            row = self.dist.gather_objects(row if self.dist.is_main else None)[0]
        results = []
        for callback, with_context in zip(self.callbacks, self._with_context, strict=True):
            if with_context:
                results.append(callback(row, self._context()))
            elif self.dist.is_main:
                results.append(callback(row))
        return self.dist.any(any(bool(r) for r in results), self.device)

    def policy(self) -> Any:
        """The trained deterministic policy, as :func:`shell.inference.load_policy` loads it from the run: a
        :class:`shell.inference.Policy`, or for a multi-agent env an :class:`shell.inference.AgentsPolicy` (agent
        dict -> action dict); the average policy where the run keeps one (``ppo.average_decay``)."""
        average = self.lanes.average
        agent = self.agent if average is None or self.update == 0 else average
        return policy_for(agent, self.spaces.get("agents"), self.config.policy.agent_id)

    def _check_stop(self) -> None:
        """Raise Interrupted when a stop was requested (on any rank: they agree through one all_reduce)."""
        if not self.dist.enabled:
            self.stop.check()
            return
        if self.stop.requested:
            settle_signal()  # a launcher killed with SIGKILL may still be our parent for a moment
        if self.dist.any(self.stop.requested, self.device):
            self.stop.request(signal.SIGTERM)  # a rank that saw no signal stops as if terminated
            self.stop.check()

    def _warn_no_learner_moves(self) -> None:
        """One line on stderr, once per run: a rollout in which the learner made no move (every game ended in its
        random opening), so its update learns nothing."""
        if self._warned_openings:
            return
        self._warned_openings = True
        print(f"warning: the learner made no move in the rollout of update {self.update + 1}: every game ended within "
              f"its random opening (selfplay.opening_moves = {self.config.selfplay.opening_moves}); lower it",
              file=sys.stderr)

    def _rank_lost_message(self, exc: RankLost) -> str:
        """One line: a node was lost, where the last checkpoint is, how to resume."""
        where = self.checkpoints.note() if self.dist.is_main else f"rank 0 keeps the checkpoints in {self.run_dir}"
        return (f"{exc}; {where}; when every node is up again, run the same torchrun command on each node, "
                f"{said('resume_instead', self.run_dir)}")

    def _evaluate(self, stop: StopRequest | None) -> EvalResult:
        """Evaluate the deterministic policy (rank 0) on the run's evaluation envs; in a turn-based game against
        the self-play pool's snapshots too, rating them (:func:`shell.evaluation.evaluate`)."""
        spec = EvalSpec.of_run(self.config, source=self.eval_source, wrappers=self.eval_env_changes.wrappers(),
                               snapshots={} if self.pool is None else self.pool.players(),
                               exploitability=self.exploitability, average=self.lanes.average)
        return evaluate(self.agent, spec, self.device, stop, on_step=lambda: kill_point("eval", self.update),
                        ratings=self.ratings)

    def _periodic_eval(self) -> EvalResult | None:
        """Evaluate the deterministic policy (rank 0; None on the others); track the best mean."""
        if not self.dist.is_main:
            return None
        # under torchrun the other ranks wait in the checkpoint's collective: stop at the next update instead
        outcome = self._evaluate(None if self.dist.enabled else self.stop)
        mean = sum(outcome.returns) / len(outcome.returns)
        if self.best_eval is None or mean > self.best_eval:
            self.best_eval = mean
        return outcome

    def _write_summary(self, outcome: EvalResult | None, checkpoint: Path | None) -> dict[str, Any]:
        cfg = self.config
        seconds = max(self.train_seconds, 1e-9)
        summary = {
            "env_id": cfg.env.id,
            "seed": cfg.run.seed,
            "env_steps": self.env_steps,
            "updates": self.update,
            "train_seconds": round(self.train_seconds, 3),
            "sps": round(self.env_steps / seconds, 1),
            **eval_fields(outcome or EvalResult([], 0, cfg.run.eval_max_episode_steps or 0)),
            "run_dir": str(self.run_dir),
            "checkpoint": str(checkpoint) if checkpoint else None,
            "world_size": self.dist.world_size,
            "device": str(self.device),
            "interrupted": self._signal is not None,
            "stopped_early": self.stopped_early,
        }
        if self._signal is not None:
            summary["signal"] = signal.Signals(self._signal).name
            summary["exit_code"] = exit_code(self._signal)
        if self.dist.is_main:
            (self.run_dir / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
        return summary




EPISODE_TOTALS = ("episodes", "return_sum", "length_sum")
"""The names of an update's ``[3]`` episode totals (:meth:`shell.lanes.Lanes.episode_totals`): the episodes that
ended, the sum of their raw returns and of their lengths."""


def _episode_means(totals: dict[str, float]) -> dict[str, Any]:
    """``episodic_return`` and ``episodic_length`` from the :data:`EPISODE_TOTALS`; ``""`` when no episode ended."""
    count, return_sum, length_sum = (totals[k] for k in EPISODE_TOTALS)
    return {"episodic_return": return_sum / count if count else "",
            "episodic_length": length_sum / count if count else ""}


def _lane_keys(lane_values: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Each lane's values as ``<group>/<metric>`` keys of the run's row (for the loggers and callbacks)."""
    return {f"{name}/{key}": value for name, values in lane_values.items() for key, value in values.items()}


class _RunFiles:
    """metrics.csv and, in a run of several lanes, each lane's ``metrics.<group>.csv`` (shell/logs.py), opened
    at update ``update`` with the same exactly-once rules."""

    def __init__(self, run_dir: Path, update: int, lanes: list[str], fields: tuple[str, ...] = CSV_FIELDS):
        self.run = RunLogs(run_dir, update, fields=fields)
        self.lanes = {name: RunLogs(run_dir, update, lane_file(name), LANE_FIELDS) for name in lanes}

    def done_rows(self) -> list[dict[str, Any]]:
        """The rows of the updates already done, as numbers, with each lane's values as ``<group>/<metric>``."""
        by_update = {name: {r["update"]: r for r in logs.done_rows} for name, logs in self.lanes.items()}
        rows = []
        for row in self.run.done_rows:
            lane_values = {name: {k: v for k, v in found[row["update"]].items() if k not in ("update", "env_steps")}
                           for name, found in by_update.items() if row["update"] in found}
            rows.append(numeric({**row, **_lane_keys(lane_values)}))
        return rows

    def write(self, row: dict[str, Any]) -> None:
        self.run.write(row)
        for name, logs in self.lanes.items():
            logs.write({"update": row["update"], "env_steps": row["env_steps"],
                        **{key: row[f"{name}/{key}"] for key in LANE_FIELDS[2:]}})

    def close(self) -> None:
        self.run.close()
        for logs in self.lanes.values():
            logs.close()
