"""The PPO update: owns the optimiser, calls only core for the maths."""

from __future__ import annotations

import copy
import functools
import inspect
import sys
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

import core
from shell.config import PPOConfig
from shell.distributed import Dist
from shell.errors import TrainingError, first_line
from shell.optim import Adam
from shell.storage import RolloutStorage

METRICS = ("policy_loss", "value_loss", "entropy", "approx_kl", "clipfrac", "grad_norm")
APPROX_KL = METRICS.index("approx_kl")  # its place in a minibatch's stacked statistics


class PPO:
    """Clipped-surrogate PPO with Adam, global gradient clipping and optional target-KL stop.

    Reference: "Proximal Policy Optimization Algorithms", Schulman et al., 2017:
    arXiv:1707.06347; implementation details after Huang et al., "The 37
    Implementation Details of PPO", ICLR blog track 2022.
    """

    def __init__(self, agent: nn.Module, cfg: PPOConfig, ent_coef: float, generator: torch.Generator | None = None,
                 dist: Dist | None = None, seq_len: int = 0, compile: bool = False,
                 symmetry: Callable[..., Any] | None = None):
        self.agent = agent
        self.seq_len = seq_len  # recurrent policies: update on sequences of this many steps (0: single steps)
        self.cfg = cfg
        self.ent_coef = ent_coef
        # ppo.ent_coef left out: with masks the bonus is normalised per state, 0.01 * H(s) / sum_k ln n_legal,k(s)
        # (core.entropy_weight); an explicit coefficient stays fixed
        self.per_state_entropy = cfg.ent_coef is None
        self.generator = generator
        self.dist = dist or Dist()
        self.params = list(agent.parameters())
        self.optimizer = Adam(self.params, lr=cfg.learning_rate, eps=cfg.adam_eps)
        #: ``ppo.value_norm``: the policy's running statistics of the returns (None without it)
        self.value_normalizer = agent.value_normalizer
        self._evaluate_kw = {"rpo_alpha": cfg.rpo_alpha} if cfg.rpo_alpha else {}
        #: ``ppo.magnet_every``: the magnet policy, a frozen copy of the agent refreshed by :meth:`refresh_magnet`
        #: (None: no magnet, or the uniform one of ``magnet_every = 0``)
        self.magnet: nn.Module | None = None
        if cfg.magnet_coef and cfg.magnet_every:
            self.magnet = copy.deepcopy(agent).requires_grad_(False)
        #: ``ppo.symmetry``: the imported function that mirrors a minibatch (None: off)
        self.symmetry = symmetry
        #: ``run.compile``: the minibatch loss and the gradient clip through ``torch.compile`` (None: eager)
        self.compiled: dict[str, Callable[..., Any]] | None = None
        if compile:
            self.compiled = _compiled(self, "a recurrent policy's sequence minibatches" if seq_len else None)

    def _minibatches(self, storage: RolloutStorage):
        """Shuffled single steps, or for a recurrent policy shuffled sequences of ``seq_len`` steps."""
        if self.seq_len:
            return storage.sequence_minibatches(self.cfg.num_minibatches, self.seq_len, self.generator)
        return storage.minibatches(self.cfg.num_minibatches, self.generator)

    def _mirrored(self, mb: dict[str, Any]) -> dict[str, Any]:
        """``ppo.symmetry``: the minibatch with each row replaced by its mirror image with probability 1/2, drawn
        ``[B]`` from the run's generator; the observation, raw action and mask of a row are replaced together, and
        its old log-prob, value, advantage and return kept, as rsl_rl's symmetry augmentation does ("Symmetry
        Considerations for Learning Task Symmetric Robot Policies", Mittal et al., ICRA 2024, arXiv:2403.04359).
        The kept old log-prob is the right one: the mirrored move was drawn by the mirrored policy with it. A
        function with a keyword ``generator`` (a game of several symmetries) gets the run's generator, from which it
        draws each row's image before the rows to replace are drawn.

        Raises:
            TrainingError: the function raises, or does not return ``(obs, raw_actions, action_mask)`` of the
                shapes and dtypes it was given.
        """
        obs, actions, mask = mb["obs"], mb["raw_actions"], mb.get("action_masks")
        name = self.cfg.symmetry
        try:
            image = self.symmetry(obs, actions, mask, **_generator_kw(self.symmetry, self.generator))
        except Exception as exc:  # a mirror of another game (connect four's on tic-tac-toe), a bug in a user's
            raise TrainingError(f"ppo.symmetry {name!r} raised {first_line(exc, with_type=True)}") from exc
        if not isinstance(image, tuple) or len(image) != 3:
            raise TrainingError(f"ppo.symmetry {name!r} returned {type(image).__name__}, not the tuple "
                                "(obs, raw_actions, action_mask)")
        for what, given, got in zip(("obs", "raw_actions", "action_mask"), (obs, actions, mask), image, strict=True):
            if given is None and got is not None:  # a game without masks has none to mirror
                raise TrainingError(f"ppo.symmetry {name!r} returned {what} as {type(got).__name__}, not None as "
                                    "given (the game has no masks)")
            for key, a, b in _parts(given, got):
                if not isinstance(b, torch.Tensor) or b.shape != a.shape or b.dtype != a.dtype:
                    found = f"{tuple(b.shape)} {b.dtype}" if isinstance(b, torch.Tensor) else type(b).__name__
                    raise TrainingError(f"ppo.symmetry {name!r} returned {what}{key} as {found}, not "
                                        f"{tuple(a.shape)} {a.dtype} as given")
        flip = torch.rand(len(actions), generator=self.generator, device=actions.device) < 0.5

        def pick(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
            return torch.where(flip.view(-1, *(1,) * (a.dim() - 1)), b, a)

        out = dict(mb)
        out["obs"] = {k: pick(v, image[0][k]) for k, v in obs.items()} if isinstance(obs, dict) \
            else pick(obs, image[0])
        out["raw_actions"] = pick(actions, image[1])
        if mask is not None:
            out["action_masks"] = pick(mask, image[2])
        return out

    def set_learning_rate(self, lr: float) -> None:
        if self.compiled is not None and isinstance(self.optimizer.lr, torch.Tensor):
            self.optimizer.lr.fill_(lr)  # the same 0-d tensor: annealing never recompiles
        else:
            self.optimizer.lr = lr

    def _adaptive_lr(self, device: torch.device) -> torch.Tensor:
        """``ppo.desired_kl`` and ``run.compile``: the learning rate as a 0-d float32 tensor on the device, where
        the KL rule moves it per minibatch without a host synchronisation and annealing fills it in place (a float
        after a checkpoint's load becomes one again)."""
        lr = self.optimizer.lr
        if not isinstance(lr, torch.Tensor) or lr.device != device:
            lr = torch.tensor(float(lr), dtype=torch.float32, device=device)
            self.optimizer.lr = lr
        return lr

    def _normalize(self, advantages: torch.Tensor) -> torch.Tensor:
        if not self.dist.enabled:
            return core.normalize_advantages(advantages)
        count = torch.tensor(float(advantages.numel()), device=advantages.device)
        total = self.dist.all_reduce_sum(torch.stack((advantages.sum(), advantages.square().sum(), count)))
        mean, std = core.mean_std_from_sums(total[0], total[1], total[2])
        return core.normalize_advantages(advantages, mean=mean, std=std)

    def refresh_magnet(self) -> None:
        """``ppo.magnet_every``: the magnet becomes a copy of the current policy."""
        self.magnet.load_state_dict(self.agent.state_dict())

    def _magnet_kl(self, obs: Any, mask: torch.Tensor | None) -> torch.Tensor:
        """``[B]`` KL from the policy to its magnet at each state (core.magnet_kl, summed over a MultiDiscrete
        space's components): the magnet is the frozen copy, or the uniform policy over the legal actions."""
        logits = self.agent.action_logits(obs)
        if self.magnet is None:
            magnet = [torch.zeros_like(part) for part in logits]
        else:
            with torch.no_grad():
                magnet = self.magnet.action_logits(obs)
        masks = [None] * len(logits) if mask is None else self.agent.actor._masks(mask, logits[0].shape[0])
        return sum(core.magnet_kl(part, rho, m) for part, rho, m in zip(logits, magnet, masks, strict=True))

    def _minibatch_loss(self, obs: Any, raw_actions: torch.Tensor, mask: torch.Tensor | None,
                        log_probs: torch.Tensor, values: torch.Tensor, advantages: torch.Tensor,
                        returns: torch.Tensor, normalize: bool, generator: torch.Generator | None,
                        draws: Any = None) -> tuple[torch.Tensor, torch.Tensor]:
        """One feed-forward minibatch ``[B]``: the policy's evaluation of the stored actions, then :meth:`_losses`.

        ``run.compile`` compiles it with ``generator=None`` and a Box head's random ``draws`` made beforehand
        (dynamo cannot trace a generator, and guarding on one would recompile for every run of a process)."""
        new_log_prob, entropy, new_value = self.agent.evaluate(obs, raw_actions, generator, mask,
                                                               **self._evaluate_kw,
                                                               **({} if draws is None else {"draws": draws}))
        magnet = self._magnet_kl(obs, mask) if self.cfg.magnet_coef else None
        return self._losses(new_log_prob, entropy, new_value, mask, log_probs, values, advantages, returns, normalize,
                            magnet)

    def _losses(self, new_log_prob: torch.Tensor, entropy: torch.Tensor, new_value: torch.Tensor,
                mask: torch.Tensor | None, log_probs: torch.Tensor, values: torch.Tensor, advantages: torch.Tensor,
                returns: torch.Tensor, normalize: bool, magnet: torch.Tensor | None = None
                ) -> tuple[torch.Tensor, torch.Tensor]:
        """The PPO loss of one minibatch (all ``[B]``) and its detached metrics
        ``[policy_loss, value_loss, entropy, approx_kl, clipfrac]``; ``magnet`` (``[B]``, ``ppo.magnet_coef``) is
        each state's KL from the policy to its magnet, whose mean times ``magnet_coef`` joins the loss."""
        cfg = self.cfg
        if normalize:
            advantages = self._normalize(advantages)
        pg_loss = core.clip_loss(new_log_prob, log_probs, advantages, cfg.clip_coef)
        value_norm = self.value_normalizer
        if value_norm is not None:  # the head's units; old values scaled as the targets are (MAPPO's way)
            returns, values = value_norm.normalize(returns), value_norm.normalize(values)
        v_loss = core.value_loss(new_value, returns, values, cfg.clip_coef if cfg.clip_vloss else None)
        entropy_mean = entropy.mean()
        bonus = entropy_mean
        if mask is not None and self.per_state_entropy:
            # ent_coef * w(s) * H(s) = 0.01 * H(s) / sum_k ln n_legal,k(s); w = 1.0 exactly where all is
            # legal, so an all-true mask gives the unmasked loss bit for bit
            bonus = (entropy * self.agent.entropy_weight(mask)).mean()
        loss = pg_loss + cfg.vf_coef * v_loss - self.ent_coef * bonus
        if magnet is not None:
            loss = loss + cfg.magnet_coef * magnet.mean()
        with torch.no_grad():
            kl = core.approx_kl(new_log_prob, log_probs)
            clipfrac = core.clip_fraction(new_log_prob, log_probs, cfg.clip_coef)
            stats = torch.stack((pg_loss.detach(), v_loss.detach(), entropy_mean.detach(), kl, clipfrac))
        return loss, stats

    def _clip_gradients(self) -> torch.Tensor:
        """Clip the gradients to a global norm of ``max_grad_norm``; the norm before clipping (0-d)."""
        return nn.utils.clip_grad_norm_(self.params, self.cfg.max_grad_norm, foreach=True)

    def update(self, storage: RolloutStorage, poll: Callable[[], None] | None = None) -> dict[str, torch.Tensor]:
        """Run ``update_epochs`` passes of minibatch SGD over the rollout.

        No host synchronisation per minibatch: metrics stay device tensors;
        with ``target_kl`` one scalar is read per epoch. Under torchrun the
        gradients are averaged over ranks, and advantage normalisation and the
        target-KL check use statistics over all ranks.

        ``poll`` is called after every minibatch (the runner checks its stop request
        there, so a signal is answered within one minibatch); an exception it raises
        ends the update with the minibatches taken so far applied.

        Options (each off by default, and then not a single operation or random draw more):
        ``rpo_alpha`` scores the actions under RPO's perturbed mean; ``desired_kl`` moves the
        learning rate (a device tensor) by rsl_rl's rule on each minibatch's approx_kl before its
        step, averaged over ranks; ``value_norm`` first merges the rollout's returns into the
        policy's statistics and then trains the critic on returns scaled by them. ``run.compile``
        (:func:`_compiled`) runs a feed-forward minibatch's loss and the gradient clip compiled.

        Returns:
            Mean of each metric over the minibatches run (0-d tensors), plus
            ``epochs`` (how many ran) and ``explained_variance``; with ``desired_kl``
            also ``learning_rate`` (the rate after the last step).
        """
        cfg = self.cfg
        sums = torch.zeros(len(METRICS), device=storage.values.device)
        count = 0
        epochs = 0
        if self.value_normalizer is not None:  # this rollout's returns join the statistics the critic's targets
            self.value_normalizer.update(storage.valid_values_and_returns()[1], self.dist)  # are scaled by
        adaptive = cfg.desired_kl is not None
        compiled = self.compiled
        # advantages are normalised inside the (compiled) loss, except under torchrun, whose statistics need a
        # collective that stays outside a compiled graph
        norm_inside = cfg.norm_adv and not (compiled is not None and self.dist.enabled)
        if compiled is not None:
            self._adaptive_lr(sums.device)  # the rate as a device tensor, read by the optimiser's step
        for _ in range(cfg.update_epochs):
            epoch_kl = torch.zeros((), device=sums.device)
            n_mb = 0
            for mb in self._minibatches(storage):
                if self.symmetry is not None:
                    mb = self._mirrored(mb)
                mask = mb.get("action_masks")  # each stored action is scored under the mask it was drawn with
                if self.seq_len:
                    new_log_prob, entropy, new_value = self.agent.evaluate_sequences(
                        mb["obs"], mb["raw_actions"], mb["states"], mb["episode_starts"], self.generator, mask,
                        **self._evaluate_kw)
                    keep = mb["valid"]  # rows that are not valid stay in their sequence, out of the losses
                    if not self.dist.enabled and not keep.any():  # sequences of agents that were all absent
                        continue
                    new_log_prob, entropy, new_value = new_log_prob[keep], entropy[keep], new_value[keep]
                    mask = None if mask is None else mask.flatten(0, 1)[keep]
                    mb = {k: mb[k][keep] for k in ("log_probs", "values", "advantages", "returns")}
                    loss, stats = self._losses(new_log_prob, entropy, new_value, mask, mb["log_probs"], mb["values"],
                                               mb["advantages"], mb["returns"], cfg.norm_adv)
                elif compiled is not None:
                    advantages = mb["advantages"]
                    if cfg.norm_adv and not norm_inside:
                        advantages = self._normalize(advantages)
                    draws = None  # a Box head's noise, drawn here from the generator in the order evaluate draws it
                    if hasattr(self.agent.actor, "draws"):
                        draws = self.agent.actor.draws(len(advantages), self.generator, cfg.rpo_alpha,
                                                       advantages.device)
                    loss, stats = compiled["loss"](mb["obs"], mb["raw_actions"], mask, mb["log_probs"],
                                                   mb["values"], advantages, mb["returns"], norm_inside, None, draws)
                else:
                    loss, stats = self._minibatch_loss(mb["obs"], mb["raw_actions"], mask, mb["log_probs"],
                                                       mb["values"], mb["advantages"], mb["returns"], cfg.norm_adv,
                                                       self.generator)

                if adaptive:  # rsl_rl's rule on this minibatch's KL, before its step, on the device
                    with torch.no_grad():
                        mb_kl = stats[APPROX_KL]
                        if self.dist.enabled:
                            mb_kl = self.dist.all_reduce_sum(mb_kl.clone()) / self.dist.world_size
                        self.optimizer.lr = core.adaptive_learning_rate(self._adaptive_lr(mb_kl.device), mb_kl,
                                                                        cfg.desired_kl)
                self.optimizer.zero_grad()
                loss.backward()
                self.dist.average_gradients(self.params)
                if compiled is not None:
                    grad_norm = compiled["clip"]()
                else:
                    grad_norm = self._clip_gradients()
                self.optimizer.step()

                with torch.no_grad():
                    sums += torch.cat((stats, grad_norm.reshape(1)))
                    epoch_kl += stats[APPROX_KL]
                n_mb += 1
                if poll is not None:
                    poll()
            count += n_mb
            epochs += 1
            if cfg.target_kl is not None:
                mean_kl = self.dist.all_reduce_sum(epoch_kl / max(n_mb, 1)) / self.dist.world_size
                if mean_kl.item() > cfg.target_kl:
                    break
        # a rollout without a valid row (a group of agents absent throughout) takes no step: its metrics are 0
        out = dict(zip(METRICS, sums / max(count, 1), strict=True))
        out["epochs"] = torch.tensor(float(epochs), device=sums.device)
        values, returns = storage.valid_values_and_returns()
        out["explained_variance"] = core.explained_variance(values, returns) if len(returns) else sums.new_zeros(())
        if adaptive:
            out["learning_rate"] = self._adaptive_lr(sums.device).detach().clone()  # where the KL rule left it
        return out


def _generator_kw(function: Callable[..., Any], generator: torch.Generator | None) -> dict[str, Any]:
    """``{"generator": generator}`` for a function that takes a keyword ``generator`` (a symmetry of a game of
    several, which draws each row's from it), else ``{}``."""
    try:
        takes = "generator" in inspect.signature(function).parameters
    except (TypeError, ValueError):  # a builtin without a signature
        takes = False
    return {"generator": generator} if takes else {}


def _parts(given: Any, got: Any) -> list[tuple[str, Any, Any]]:
    """``(key, given part, returned part)`` for a tensor (key ``""``), a dict of tensors (``"['k']"``) or None (no
    parts), for :meth:`PPO._mirrored`'s check of what a symmetry function returned."""
    if given is None:
        return []
    if isinstance(given, dict):
        got = got if isinstance(got, dict) else {}
        return [(f"[{k!r}]", v, got.get(k)) for k, v in given.items()]
    return [("", given, got)]


REFUSED_WHY = "their valid rows are picked with data-dependent shapes, a new graph per minibatch"


@functools.cache
def _compiler_missing() -> str | None:
    """Why inductor cannot build its CPU kernels here (None: it can), found by its own check for a C++
    compiler (``torch._inductor.cpp_builder.get_cpp_compiler``, which honours ``CXX``); asked once per process."""
    try:
        from torch._inductor import cpp_builder
        cpp_builder.get_cpp_compiler()
    except Exception as exc:  # InvalidCxxCompiler, or an inductor that cannot even be imported
        return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else 'no C++ compiler found'}"
    return None


_warned: set[str] = set()


def _warn_once(message: str) -> None:
    """One line on stderr, once per process and message (every lane of a run asks the same)."""
    if message not in _warned:
        _warned.add(message)
        print(f"warning: {message}", file=sys.stderr)


def _compiled(ppo: PPO, refused: str | None) -> dict[str, Callable[..., Any]] | None:
    """``run.compile``'s functions for ``ppo``: ``loss`` (:meth:`PPO._minibatch_loss`: the policy's forward,
    the losses and, through AOTAutograd, their backward) and ``clip`` (:meth:`PPO._clip_gradients`), each
    through ``torch.compile``; None, after one warning line, where the update stays eager: ``refused`` (the
    reason compile does not serve this update), or no C++ compiler for inductor's CPU kernels.

    ``torch`` is imported with compile's machinery only here, so a run without ``run.compile`` never loads
    ``torch._dynamo`` or ``torch._inductor``. The optimiser step stays eager: torch marks its fused Adam
    kernel ``torch.compiler.disable``; its learning rate is a device tensor, so annealing changes a value and
    never a compiled graph's guards.
    """
    if refused is not None:
        _warn_once(f"run.compile: {refused} stay eager ({REFUSED_WHY})")
        return None
    if ppo.params[0].device.type == "cpu":
        missing = _compiler_missing()
        if missing is not None:
            _warn_once(f"run.compile: no C++ compiler for torch.compile ({missing}); the update runs eager")
            return None
    return {"loss": torch.compile(ppo._minibatch_loss), "clip": torch.compile(ppo._clip_gradients)}
