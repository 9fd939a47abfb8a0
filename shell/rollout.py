"""One rollout: the collector runs the policy in the vector env and fills the storage with transitions.

The trainer (shell/runner.py) keeps the loop around it: the update, evaluation, callbacks,
checkpoints and the summary. The collector keeps what lives from one rollout to the next: the
recurrent state per sub-env and which observations start an episode.
"""

from __future__ import annotations

from collections.abc import Callable, Generator

import torch

import core
from shell.config import Config
from shell.distributed import Dist
from shell.envs.base import StepResult, VecEnv
from shell.normalization import RewardScaler
from shell.observations import Obs, map_obs
from shell.policies import ActorCritic
from shell.storage import RolloutStorage, Transition

LOG_PROB_CHUNK_ELEMENTS = 4_194_304  # the rollout's log-prob pass in pieces of at most 16 MB of float input


class Collector:
    """Runs ``agent`` in ``env`` for ``storage.num_steps`` steps per :meth:`collect`.

    Each step it reads the env's ``valid [N]`` rows (all true, except a NEXT_STEP source's
    dummy steps: DESIGN.md, "Rows and the validity mask"), normalises the observation (valid rows
    enter the statistics), samples an action, steps the env, scales the reward, folds a
    truncation's bootstrap ``gamma * V(final_obs)`` into it (DESIGN.md, "Truncation") and writes one
    :class:`shell.storage.Transition`. Then it fills log pi_old and V(s_t) where the policy did not
    give them per step, and computes GAE (:func:`core.gae`) into the storage.

    Args:
        env: the vector env of ``N = config.env.num_envs`` rows.
        agent: the actor-critic; its ``obs_normalizer`` is updated here.
        storage: ``[T, N]`` storage on the env's device.
        reward_scaler: the run's reward scaler (identity when disabled).
        config: the run's config (``ppo.gamma``, ``ppo.gae_lambda``, ``ppo.reward_scale``, ``env.sign_reward``).
        generator: the rank's generator on the device (action sampling).
        dist: the process group; the normalisers' statistics of all ranks merge after each rollout.
    """

    def __init__(self, env: VecEnv, agent: ActorCritic, storage: RolloutStorage, reward_scaler: RewardScaler,
                 config: Config, generator: torch.Generator, dist: Dist):
        self.env, self.agent, self.storage = env, agent, storage
        self.reward_scaler = reward_scaler
        self.config = config
        self.generator = generator
        self.dist = dist
        device = storage.values.device
        # a recurrent policy's state per sub-env, carried across rollouts (None: feed-forward), and which
        # observations start an episode
        self.rnn_state = agent.initial_state(env.num_envs, device)
        self.episode_start = torch.ones(env.num_envs, dtype=torch.bool, device=device)

    def restart(self) -> None:
        """The envs were reset: every observation starts an episode, and no discounted return carries over."""
        # a new tensor: the one a rollout left is an inference tensor, which no in-place write may touch
        self.episode_start = torch.ones_like(self.episode_start)
        self.reward_scaler.reset_returns()
        # the first reset settles where masks come from ("auto" may find them in its info): the agent keeps it
        self.agent.action_mask_source = getattr(self.env, "mask_source", None)

    def collect(self, obs: Obs, poll: Callable[[int], None]) -> tuple[Obs, torch.Tensor]:
        """Fill the storage with one rollout from ``obs`` and compute its advantages and returns.

        ``poll(t)`` is called before every env step ``t`` (the trainer's stop request and
        fault-injection point); an exception it raises ends the rollout.

        Returns:
            The next observation, and ``[3]`` device totals over the episodes that ended:
            (count, sum of raw returns, sum of lengths).

        Raises:
            TrainingError: the env raised.
        """
        with torch.inference_mode():
            steps = self.steps(obs, poll)
            action = next(steps)
            while True:
                try:
                    action = steps.send(self.env.step(action))
                except StopIteration as end:
                    obs, episodes = end.value
                    break
        self.commit()
        return obs, episodes

    def steps(self, obs: Obs,
              poll: Callable[[int], None]) -> Generator[torch.Tensor, StepResult, tuple[Obs, torch.Tensor]]:
        """:meth:`collect` as a generator, for a caller that steps the env itself (several groups of agents in
        one joint step, :class:`GroupCollector`): it yields each step's action and takes the env's
        :class:`StepResult`; after the last step it computes the advantages and returns what :meth:`collect`
        returns. The caller holds ``torch.inference_mode`` around it and calls :meth:`commit` after it."""
        cfg = self.config
        gamma, sign_reward, reward_scale = cfg.ppo.gamma, cfg.env.sign_reward, cfg.ppo.reward_scale
        env, agent, storage = self.env, self.agent, self.storage
        normalizer = agent.obs_normalizer
        episodes = torch.zeros(3, device=storage.values.device)
        storage.reset()
        for t in range(storage.num_steps):
            poll(t)
            valid = env.valid
            norm_obs = normalizer.update_and_normalize(obs, valid)
            state, start = self.rnn_state, self.episode_start
            mask = env.action_mask  # [N, A] bool of obs, or None; it travels beside obs, to the heads only
            sample, self.rnn_state = agent.rollout_step(norm_obs, state, start, self.generator, mask)
            step = yield sample.action
            done = step.terminated | step.truncated
            reward = step.reward.sign() if sign_reward else step.reward  # statistics keep the score
            reward = self.reward_scaler.scale(reward, done, valid) * reward_scale
            if step.final_obs is not None:
                # Time-limit truncation bootstraps from V(final_obs), the final observation normalised
                # with the same statistics (and, for a recurrent policy, the ended episode's state).
                value = agent.rollout_value(normalizer.normalize(step.final_obs), self.rnn_state)
                reward = core.bootstrap_truncated(reward, step.terminated, step.truncated, value, gamma)
            storage.add(Transition(norm_obs, sample.raw_action, reward, done, valid, sample.log_prob,
                                   sample.value, state, start, mask))
            # the reset rule: the state restarts at an episode's first observation
            self.episode_start = done if step.episode_start is None else step.episode_start
            ended = step.episode_done
            if ended is not None:
                episodes += torch.stack((ended.sum(), torch.where(ended, step.episode_return, 0.0).sum(),
                                         torch.where(ended, step.episode_length, 0).sum())).to(episodes.dtype)
            obs = step.obs
        if not agent.values_in_rollout_step:
            self._log_probs_and_values()
        last_value = agent.rollout_value(normalizer.normalize(obs), self.rnn_state, self.episode_start)
        storage.compute_advantages(last_value, gamma, cfg.ppo.gae_lambda)
        return obs, episodes

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


class GroupCollector:
    """One rollout of several groups of agents that act in the same joint steps (a multi-agent env with
    groups, shell/envs/pettingzoo.py): each group's :class:`Collector` (its policy, storage, normalisers)
    yields its actions, the env steps once with all of them, and each takes its group's result.

    Args:
        env: the multi-agent vector env (``step_groups``).
        collectors: each group's collector, built on the group's rows (``env.groups[g]``).
    """

    def __init__(self, env, collectors: dict[str, Collector]):
        self.env, self.collectors = env, collectors

    def restart(self) -> None:
        for collector in self.collectors.values():
            collector.restart()

    def collect(self, obs: dict[str, Obs], poll: Callable[[int], None]) -> tuple[dict[str, Obs], torch.Tensor]:
        """:meth:`Collector.collect` for every group at once: ``{group: next obs}`` and the ``[3]`` episode
        totals, an episode's return summed over every group's agents (count and lengths per copy)."""
        outs: dict[str, tuple[Obs, torch.Tensor]] = {}
        first = next(iter(self.collectors))
        with torch.inference_mode():
            steps = {g: c.steps(obs[g], poll if g == first else _no_poll) for g, c in self.collectors.items()}
            actions = {g: next(gen) for g, gen in steps.items()}
            while len(outs) < len(steps):
                results = self.env.step_groups(actions)
                actions = {}
                for g, gen in steps.items():
                    try:
                        actions[g] = gen.send(results[g])
                    except StopIteration as end:
                        outs[g] = end.value
        for collector in self.collectors.values():
            collector.commit()
        episodes = outs[first][1].clone()
        episodes[1] = sum(out[1][1] for out in outs.values())
        return {g: out[0] for g, out in outs.items()}, episodes


def _no_poll(t: int) -> None:
    """The poll of every group after the first (one poll per joint step)."""
