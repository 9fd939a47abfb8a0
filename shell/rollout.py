"""One rollout: the collector runs every lane's policy in the env and fills each lane's storage.

The trainer (shell/runner.py) keeps the loop around it: the update, evaluation, callbacks,
checkpoints and the summary. Each lane's :class:`LaneRollout` keeps what lives from one rollout to the
next: the recurrent state per row and which observations start an episode.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

import core
from shell.config import Config
from shell.distributed import Dist
from shell.envs.base import LaneEnv, Rows, StepResult
from shell.normalization import RewardScaler
from shell.observations import map_obs
from shell.policies import ActorCritic
from shell.storage import RolloutStorage, Transition

LOG_PROB_CHUNK_ELEMENTS = 4_194_304  # the rollout's log-prob pass in pieces of at most 16 MB of float input


class LaneRollout:
    """One lane's part of a rollout: its policy, storage, reward scaler and what lives from one rollout to the
    next (the recurrent state per row and which observations start an episode).

    Each step (:meth:`act`, then :meth:`record`) it normalises the observation of the lane's rows (valid
    rows enter the statistics; DESIGN.md, "Rows and the validity mask"), samples an action under the
    rows' mask, and after the joint env step scales the reward, folds a truncation's bootstrap
    ``gamma * V(final_obs)`` into it (DESIGN.md, "Truncation") and writes one
    :class:`shell.storage.Transition`. :meth:`finish` fills log pi_old and V(s_t) where the policy did not
    give them per step and computes GAE (:func:`core.gae`) into the storage.

    Args:
        agent: the lane's actor-critic; its ``obs_normalizer`` is updated here.
        storage: the lane's ``[T, N]`` storage on the device.
        reward_scaler: the lane's reward scaler (identity when disabled).
        config: the run's config (``ppo.gamma``, ``ppo.gae_lambda``, ``ppo.reward_scale``, ``env.sign_reward``).
        generator: the rank's generator on the device (action sampling; shared by the lanes, in lane order).
        dist: the process group; the normalisers' statistics of all ranks merge after each rollout.
    """

    def __init__(self, agent: ActorCritic, storage: RolloutStorage, reward_scaler: RewardScaler, config: Config,
                 generator: torch.Generator, dist: Dist):
        self.agent, self.storage, self.reward_scaler = agent, storage, reward_scaler
        self.config, self.generator, self.dist = config, generator, dist
        device = storage.values.device
        self.rnn_state = agent.initial_state(storage.num_envs, device)
        self.episode_start = torch.ones(storage.num_envs, dtype=torch.bool, device=device)
        self.episodes = torch.zeros(3, device=device)
        self._step: tuple | None = None  # what act() saw and drew, for record()

    def restart(self, mask_source: str | None) -> None:
        """The envs were reset: every observation starts an episode, and no discounted return carries over.
        ``mask_source`` (the lane's, settled by the first reset) is kept by the agent."""
        # a new tensor: the one a rollout left is an inference tensor, which no in-place write may touch
        self.episode_start = torch.ones_like(self.episode_start)
        self.reward_scaler.reset_returns()
        self.agent.action_mask_source = mask_source

    def begin(self) -> None:
        self.storage.reset()
        self.episodes = torch.zeros(3, device=self.storage.values.device)

    def act(self, rows: Rows) -> torch.Tensor:
        """Sample the actions of ``rows`` (the mask travels beside the observation, to the heads only); the
        ``rows.valid`` rows enter the observation statistics and, recorded, the update."""
        valid = rows.valid
        norm_obs = self.agent.obs_normalizer.update_and_normalize(rows.obs, valid)
        state, start = self.rnn_state, self.episode_start
        sample, self.rnn_state = self.agent.rollout_step(norm_obs, state, start, self.generator, rows.action_mask)
        self._step = (norm_obs, sample, state, start, valid, rows.action_mask)
        return sample.action

    def record(self, step: StepResult) -> None:
        """Write the transition of the last :meth:`act` with the env's result for the lane."""
        cfg = self.config
        norm_obs, sample, state, start, valid, mask = self._step
        done = step.terminated | step.truncated
        reward = step.reward.sign() if cfg.env.sign_reward else step.reward  # statistics keep the score
        reward = self.reward_scaler.scale(reward, done, valid) * cfg.ppo.reward_scale
        if step.final_obs is not None:
            # Time-limit truncation bootstraps from V(final_obs), the final observation normalised
            # with the same statistics (and, for a recurrent policy, the ended episode's state).
            value = self.agent.rollout_value(self.agent.obs_normalizer.normalize(step.final_obs), self.rnn_state)
            reward = core.bootstrap_truncated(reward, step.terminated, step.truncated, value, cfg.ppo.gamma)
        self.storage.add(Transition(norm_obs, sample.raw_action, reward, done, valid, sample.log_prob,
                                    sample.value, state, start, mask))
        # the reset rule: the state restarts at an episode's first observation
        self.episode_start = done if step.episode_start is None else step.episode_start
        ended = step.episode_done
        if ended is not None:
            self.episodes += torch.stack((ended.sum(), torch.where(ended, step.episode_return, 0.0).sum(),
                                          torch.where(ended, step.episode_length, 0).sum())).to(self.episodes.dtype)

    def finish(self, rows: Rows) -> torch.Tensor:
        """After the last step: log-probs and values where needed, then the advantages from the value of
        ``rows.obs`` (the rows to act on next; ``rows.valid`` says which act on it, for a turn-based lane).
        Returns the lane's ``[3]`` episode totals (count, sum of raw returns, sum of lengths)."""
        agent = self.agent
        if not agent.values_in_rollout_step:
            self._log_probs_and_values()
        last_value = agent.rollout_value(agent.obs_normalizer.normalize(rows.obs), self.rnn_state,
                                         self.episode_start)
        self.storage.compute_advantages(last_value, self.config.ppo.gamma, self.config.ppo.gae_lambda,
                                        rows.valid)
        return self.episodes

    def commit(self) -> None:
        """Merge the rollout's normaliser statistics (over all ranks)."""
        self.agent.obs_normalizer.commit(self.dist)
        self.reward_scaler.commit(self.dist)

    def _log_probs_and_values(self) -> None:
        """log pi_old and V(s_t) of the whole rollout in batched passes (the parameters are those of every
        step), in chunks of at most :data:`LOG_PROB_CHUNK_ELEMENTS` input elements."""
        storage, agent = self.storage, self.agent
        b_obs = map_obs(lambda x: x.flatten(0, 1), storage.obs)
        b_raw = storage.raw_actions.flatten(0, 1)
        b_masks = None if storage.action_masks is None else storage.action_masks.flatten(0, 1)
        per_sample = sum(x[0].numel() for x in (b_obs.values() if isinstance(b_obs, dict) else [b_obs]))
        chunk = max(256, LOG_PROB_CHUNK_ELEMENTS // per_sample)  # Atari frames: 256; vectors: whole rollouts
        parts = [agent.log_prob_and_value(map_obs(lambda x, i=i: x[i:i + chunk], b_obs), b_raw[i:i + chunk],
                                          None if b_masks is None else b_masks[i:i + chunk])
                 for i in range(0, len(b_raw), chunk)]
        storage.set_log_probs_and_values(torch.cat([p[0] for p in parts]), torch.cat([p[1] for p in parts]))


class Collector:
    """Runs every lane in an env for ``num_steps`` joint steps per :meth:`collect`: each lane acts on its
    rows (in lane order, so the lanes draw from the rank's generator in a fixed order), the env steps once
    with all the actions, and each lane records its result.

    Args:
        lanes: each lane's :class:`LaneRollout`, keyed as the env's ``lanes``.
        num_steps: the rollout length T.
    """

    def __init__(self, lanes: dict[str | None, LaneRollout], num_steps: int):
        self.lanes, self.num_steps = lanes, num_steps

    def restart(self, env: LaneEnv) -> None:
        """``env`` was reset (see :meth:`LaneRollout.restart`)."""
        sources = env.mask_sources()
        for name, lane in self.lanes.items():
            lane.restart(sources[name])

    def collect(self, env: LaneEnv, rows: dict[str | None, Rows],
                poll: Callable[[int], None]) -> tuple[dict[str | None, Rows], dict[str | None, torch.Tensor]]:
        """Fill every lane's storage with one rollout of ``env`` (:class:`shell.envs.base.LaneEnv`) from ``rows``
        and compute its advantages and returns.

        ``poll(t)`` is called before every joint step ``t`` (the trainer's stop request and
        fault-injection point); an exception it raises ends the rollout.

        Returns:
            The next rows, and each lane's ``[3]`` device totals over the episodes that ended:
            (count, sum of raw returns, sum of lengths).

        Raises:
            TrainingError: the env raised.
        """
        lanes = self.lanes
        with torch.inference_mode():
            for lane in lanes.values():
                lane.begin()
            for t in range(self.num_steps):
                poll(t)
                actions = {name: lane.act(rows[name]) for name, lane in lanes.items()}
                results = env.step(actions)
                rows = {}
                for name, lane in lanes.items():
                    step = results[name]
                    lane.record(step)
                    rows[name] = Rows(step.obs, step.valid, step.action_mask)
            episodes = {name: lane.finish(rows[name]) for name, lane in lanes.items()}
        for lane in lanes.values():
            lane.commit()
        return rows, episodes
