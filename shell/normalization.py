"""Running observation normalisation and reward scaling, with statistics on the device.

Both keep *global* statistics ``G`` (identical on every rank, saved in checkpoints) and a
*pending* batch ``D`` that grows during a rollout. Observations are normalised at action time
with ``merge(G, D)``; at the end of each rollout ``D`` of every rank is merged into ``G`` with
core's pure merge (Chan et al.), so all ranks agree again. Evaluation uses ``G`` only and never
changes it.

Why not gymnasium's NormalizeObservation / NormalizeReward wrappers: the statistics must live on
the device, merge across ranks and survive checkpoints, and the vector reward normaliser
miscounts around autoresets.
"""

from __future__ import annotations

import torch
from torch import nn

import core
from shell.distributed import Dist
from shell.observations import Obs, ObsLayout

STAT_DTYPE = torch.float64


class RunningMoments(nn.Module):
    """Global (mean, var, count) as buffers, plus a pending batch merged in by :meth:`commit`.

    On the CPU the pending statistics are float64 NumPy values (views of the batch moments torch
    computed): every env step merges them twice (:meth:`observe`, :meth:`current`), and
    ``core.merge_moments`` gives NumPy's results bit for bit as torch's, at a fraction of torch's
    cost per operation. On another device they stay tensors there, with no host synchronisation.
    """

    def __init__(self, shape: tuple[int, ...]):
        super().__init__()
        self.register_buffer("mean", torch.zeros(shape, dtype=STAT_DTYPE))
        self.register_buffer("var", torch.ones(shape, dtype=STAT_DTYPE))
        self.register_buffer("count", torch.zeros((), dtype=STAT_DTYPE))
        self.pending: tuple | None = None  # (mean, var, count): tensors, or NumPy values and a float on the CPU

    def observe(self, batch: torch.Tensor, valid: torch.Tensor) -> None:
        """Add the valid rows of a batch ``[B, *shape]`` (``valid [B]`` bool) to the pending statistics.

        The rows are selected, not weighted: with every row valid the statistics are bit for bit
        those of the whole batch.
        """
        batch = batch[valid]
        if batch.shape[0] == 0:
            return
        mean, var, n = core.batch_moments(batch.to(STAT_DTYPE))
        if mean.device.type == "cpu":
            stats = (mean.numpy(), var.numpy(), float(n))
        else:
            stats = (mean, var, torch.tensor(float(n), dtype=STAT_DTYPE, device=mean.device))
        self.pending = stats if self.pending is None else core.merge_moments(*self.pending, *stats)

    def current(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``merge(G, pending)``: the statistics to use now."""
        if self.pending is None:
            return self.mean, self.var, self.count
        if isinstance(self.pending[0], torch.Tensor):
            return core.merge_moments(self.mean, self.var, self.count, *self.pending)
        merged = core.merge_moments(self.mean.numpy(), self.var.numpy(), self.count.item(), *self.pending)
        return tuple(torch.as_tensor(x, dtype=STAT_DTYPE) for x in merged)

    def commit(self, dist: Dist) -> None:
        """Merge every rank's pending statistics into the global ones (in rank order), then clear them."""
        if self.pending is None:
            return
        merged = None
        pending = tuple(torch.as_tensor(t, dtype=STAT_DTYPE).cpu() for t in self.pending)
        for stats in dist.gather_objects(pending):
            stats = tuple(t.to(self.mean.device) for t in stats)
            merged = stats if merged is None else core.merge_moments(*merged, *stats)
        mean, var, count = core.merge_moments(self.mean, self.var, self.count, *merged)
        self.mean.copy_(mean)
        self.var.copy_(var)
        self.count.copy_(count)
        self.pending = None


class ObsNormalizer(nn.Module):
    """``clip((obs - mean) / sqrt(var + eps), -clip, clip)`` with running statistics, on vector features only.

    A plain flat observation ``[N, S]`` is normalised as a whole; of a Dict observation, each
    ``flat`` part (shell/observations.py) has its own statistics. Images and one-hot parts pass
    through unchanged. Disabled, it is the identity and holds no statistics.
    """

    def __init__(self, layout: ObsLayout | int, enabled: bool, clip: float = 10.0):
        super().__init__()
        self.clip = clip
        self.moments: RunningMoments | None = None
        self.key_moments: nn.ModuleDict | None = None
        if not enabled:
            return
        if isinstance(layout, int):  # a flat observation of that size
            self.moments = RunningMoments((layout,))
            return
        flat = {key: part for key, part in layout.parts.items() if part.kind == "flat"}
        if None in flat:
            self.moments = RunningMoments(flat[None].shape)
        elif flat:
            self.key_moments = nn.ModuleDict({key: RunningMoments(part.shape) for key, part in flat.items()})

    def _normalize(self, obs: torch.Tensor, moments: RunningMoments) -> torch.Tensor:
        mean, var, _ = moments.current()
        return core.normalize_obs(obs, mean.to(obs.dtype), var.to(obs.dtype), self.clip)

    def normalize(self, obs: Obs) -> Obs:
        """Normalise an observation (``[N, S]``, or a dict of parts) with the current statistics."""
        if self.moments is not None:
            return self._normalize(obs, self.moments)
        if self.key_moments is None:
            return obs
        out = dict(obs)
        for key, moments in self.key_moments.items():
            if key in obs:  # a deployed actor is not given the critic's own keys (policy.critic_keys)
                out[key] = self._normalize(obs[key], moments)
        return out

    def update_and_normalize(self, obs: Obs, valid: torch.Tensor) -> Obs:
        """Add the rows where ``valid [N]`` bool is true to the pending statistics, then :meth:`normalize`."""
        for key, moments in self._keyed():
            moments.observe(obs if key is None else obs[key], valid)
        return self.normalize(obs)

    def commit(self, dist: Dist) -> None:
        for _, moments in self._keyed():
            moments.commit(dist)

    def _keyed(self) -> list[tuple[str | None, RunningMoments]]:
        """Each statistics with its Dict key (None: the whole flat observation)."""
        if self.moments is not None:
            return [(None, self.moments)]
        return list(self.key_moments.items()) if self.key_moments is not None else []


class ValueNormalizer(nn.Module):
    """Running mean and variance of the returns, for ``ppo.value_norm`` (MAPPO's ``ValueNorm``, PopArt-lite).

    The critic's head predicts ``normalize_value(return)``; every value the rollout reads (GAE, the
    truncation bootstrap, explained variance) is the head's output through :meth:`denormalize`. At the
    start of each update the rollout's returns are merged into the statistics (:meth:`update`, over every
    rank), and the value loss compares the head with the returns normalised by them. Unlike PopArt the
    head's weights are not rescaled when the statistics move (MAPPO does the same). The statistics are
    buffers of the policy, so checkpoints hold them and ``--resume`` restores them.

    See "The Surprising Effectiveness of PPO in Cooperative Multi-Agent Games", Yu et al., 2022:
    arXiv:2103.01955; "Learning values across many orders of magnitude", van Hasselt et al., 2016:
    arXiv:1602.07714.
    """

    def __init__(self):
        super().__init__()
        self.moments = RunningMoments(())

    def normalize(self, values: torch.Tensor) -> torch.Tensor:
        """Values in return units -> the head's units (``core.normalize_value``)."""
        return core.normalize_value(values, self.moments.mean, self.moments.var)

    def denormalize(self, values: torch.Tensor) -> torch.Tensor:
        """The head's output -> values in return units (``core.denormalize_value``)."""
        return core.denormalize_value(values, self.moments.mean, self.moments.var)

    @torch.no_grad()
    def update(self, returns: torch.Tensor, dist: Dist) -> None:
        """Merge a rollout's returns ``[B]`` (the valid rows) of every rank into the statistics."""
        self.moments.observe(returns, torch.ones(returns.shape[0], dtype=torch.bool, device=returns.device))
        self.moments.commit(dist)


class RewardScaler(nn.Module):
    """Divide rewards by the running std of the discounted return (Engstrom et al., 2020, "reward scaling").

    Per env ``R_t = gamma * R_{t-1} + r_t``, reset to 0 after every episode end (termination or
    truncation); the std is over all real transitions' ``R_t``. See "Implementation Matters in
    Deep Policy Gradients", Engstrom et al., 2020: arXiv:2005.12729, algorithm 1.
    """

    def __init__(self, gamma: float, enabled: bool, clip: float = 10.0, eps: float = 1e-8):
        super().__init__()
        self.gamma, self.clip, self.eps = gamma, clip, eps
        self.moments = RunningMoments(()) if enabled else None
        self.discounted_return: torch.Tensor | None = None

    def scale(self, reward: torch.Tensor, done: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
        """Scale ``[N]`` rewards of one step; ``done`` ends the envs' discounted returns after it.

        Rows where ``valid [N]`` bool is false (a NEXT_STEP dummy step) neither enter the statistics
        nor change their env's discounted return.
        """
        if self.moments is None:
            return reward
        if self.discounted_return is None:
            self.discounted_return = torch.zeros_like(reward, dtype=STAT_DTYPE)
        running = self.discounted_return
        returns, self.discounted_return = core.discounted_return_step(running, reward.to(STAT_DTYPE), done, self.gamma)
        self.discounted_return = torch.where(valid, self.discounted_return, running)
        self.moments.observe(returns, valid)
        _, var, _ = self.moments.current()
        return core.scale_rewards(reward, var, self.clip, self.eps)

    def reset_returns(self) -> None:
        """Forget the per-env discounted returns (the envs were reset)."""
        self.discounted_return = None

    def commit(self, dist: Dist) -> None:
        if self.moments is not None:
            self.moments.commit(dist)
