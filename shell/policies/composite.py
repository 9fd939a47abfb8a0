"""The actor of a composite (Dict or Tuple) action space: one child head per part, one joint distribution.

A composite action is drawn part by part, independently given the state: a tanh-squashed Gaussian over each Box
part, a Categorical over each Discrete or MultiDiscrete part (masked where the env masks it), independent bits
over each MultiBinary part, every head on the same features. Its log-prob is the sum of the parts' log-probs and
its entropy a weighted sum of theirs (core/composite.py, the maths)::

    log pi(a | s) = sum_p active_p(a) * log pi_p(a_p | s)
    H(s)          = sum_p active_p(a) * w_p * H_p(s)

with ``w_p = 1 / ln n`` for a Discrete part of ``n`` choices (``1 / sum_k ln n_k`` for a MultiDiscrete,
``1 / (n ln 2)`` for ``n`` bits, and under a mask ``1 / ln n_legal(s)``, as core.entropy_weight weighs a masked
Discrete action alone) and ``w_p = 1 / d`` for a Box part of ``d`` free dimensions: each part's entropy on the
scale of one normalised choice, so that ``ppo.ent_coef`` (default 0.01 for a composite) means the same whatever
the parts' sizes.

``policy.action_links`` makes it a parameterised (hybrid) action (Masson et al. 2016; H-PPO, Fan et al. 2019,
arXiv:1903.01344): ``{kind = {0 = ["run"], 1 = ["hop"]}}`` says that choice 0 of the Discrete part ``kind`` selects
the part ``run``, choice 1 the part ``hop``. A linked part counts (``active_p = 1``) only in the rows whose linking
choice selects it, in the rollout's log-probs and in the update alike: the parameters of a kind not taken add
nothing to the ratio and get exactly zero gradient from the policy loss. The env still receives every part; it reads
the ones the kind selects.

Storage keeps one float row per action, ``[N, R]``: each part's raw action side by side (a Box part's ``F`` free
pre-tanh components, a Discrete part's 0-based index, a MultiDiscrete part's ``K`` indices, a MultiBinary part's
``n`` bits; indices are exact in float32 up to 2**24). The env action is a float row ``[N, W]`` of the parts' env
actions (a Discrete part's index plus its start), which the env boundary (shell.actions.to_env_action) turns into
the space's structure and dtypes.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
from gymnasium import spaces
from torch import nn

import core
from shell.actions import ActionPart, action_parts
from shell.config import PolicyConfig
from shell.errors import ConfigError, clipped, space_text
from shell.policies.heads import (
    BernoulliActor,
    CategoricalActor,
    SquashedGaussianActor,
    check_mask_shape,
    make_leaf_actor,
)


class CompositeActor(nn.Module):
    """One joint policy over the parts of a Dict or Tuple action space, on encoder features ``[N, H]``.

    Each part has its own head (an MLP of ``policy.hidden_sizes`` on the shared features): a
    :class:`~shell.policies.heads.SquashedGaussianActor` for a Box part, a
    :class:`~shell.policies.heads.CategoricalActor` for a Discrete or MultiDiscrete part, a
    :class:`~shell.policies.heads.BernoulliActor` for a MultiBinary part. See the module docstring for the joint
    log-prob, the weighted entropy and ``policy.action_links``.

    Action masks (optional): ``[N, M]`` bool, the masks of the Discrete and MultiDiscrete parts concatenated in
    the parts' order (``M`` = the sum of their sizes; a MultiBinary part of a composite takes no mask). A masked
    choice has probability exactly 0 and is never drawn.

    Raises:
        ConfigError: at construction, for a part no head serves, or ``links`` that name an unknown part, link
            from a part that is not Discrete, name a choice out of its range, or link a part to itself (one line).
    """

    def __init__(self, in_size: int, action_space: spaces.Dict | spaces.Tuple, cfg: PolicyConfig,
                 links: dict[str, Any] | None = None):
        super().__init__()
        self.parts: list[ActionPart] = action_parts(action_space)
        self.heads = nn.ModuleList(make_leaf_actor(in_size, part.space, cfg) for part in self.parts)
        #: each part's columns in the stored raw row and in the env action row
        self.raw_widths = [_raw_width(head) for head in self.heads]
        self.widths = [part.width for part in self.parts]
        self.masked = [not isinstance(head, SquashedGaussianActor | BernoulliActor) for head in self.heads]
        self.mask_sizes = [head.mask_size for head, m in zip(self.heads, self.masked, strict=True) if m]
        self.register_buffer("entropy_weights", torch.tensor([_entropy_weight(h) for h in self.heads]),
                             persistent=False)
        self.link_parts, selects, governed = _links(self.parts, links or {}, action_space)
        for i, (table, parts) in enumerate(zip(selects, governed, strict=True)):
            self.register_buffer(f"selects_{i}", table, persistent=False)
            self.register_buffer(f"governed_{i}", parts, persistent=False)

    @property
    def raw_action_dtype(self) -> torch.dtype:
        """Storage keeps the raw rows in float32 (indices are exact there up to 2**24)."""
        return torch.float32

    @property
    def raw_action_shape(self) -> tuple[int, ...]:
        """``(R,)``: the parts' raw columns side by side."""
        return (sum(self.raw_widths),)

    @property
    def mask_size(self) -> int | None:
        """The size of one action mask (the Discrete and MultiDiscrete parts' sizes summed); None without such a
        part."""
        return sum(self.mask_sizes) if self.mask_sizes else None

    def _part_masks(self, action_mask: torch.Tensor | None, batch: int) -> list[torch.Tensor | None]:
        """One mask (or None) per part from the concatenated mask ``[B, M]``."""
        if action_mask is None:
            return [None] * len(self.heads)
        check_mask_shape(action_mask, batch, self.mask_size or 0)
        pieces = iter(action_mask.split(self.mask_sizes, dim=-1))
        return [next(pieces) if m else None for m in self.masked]

    def _active(self, raw_columns: list[torch.Tensor]) -> torch.Tensor | None:
        """``[B, P]`` bool, the parts that count in each row; None without links (every part counts).

        Each link (core.linked_active) keeps the parts its choice selects among those it governs, and only in the
        rows where its own linking part counts: a part selected by a choice that had no effect has none either.
        The links run from the top of the hierarchy down (:func:`_links` orders them).
        """
        active = None
        for i, k in enumerate(self.link_parts):
            choice = raw_columns[k][:, 0].long()
            linked = core.linked_active(choice, getattr(self, f"selects_{i}"))
            if active is None:
                active = linked
            else:  # a governed part also needs its linking part to count
                active = active & linked & (active[:, k:k + 1] | ~getattr(self, f"governed_{i}"))
        return active

    def _joint(self, values: list[torch.Tensor], raw_columns: list[torch.Tensor],
               weights: torch.Tensor | None = None) -> torch.Tensor:
        table = torch.stack(values, dim=-1)
        active = self._active(raw_columns)
        if active is None:
            active = torch.ones(table.shape, dtype=torch.bool, device=table.device)
        return core.linked_sum(table, active, weights)

    def split_raw(self, raw_action: torch.Tensor) -> list[torch.Tensor]:
        """A stored raw row ``[B, R]`` -> each part's raw columns ``[B, r_p]`` (float).

        Raises:
            ValueError: a raw action that is not ``[B, R]`` floating point.
        """
        if raw_action.dim() != 2 or raw_action.shape[1] != sum(self.raw_widths) \
                or not raw_action.dtype.is_floating_point:
            raise ValueError(f"raw_action of shape {list(raw_action.shape)} {raw_action.dtype} does not match the "
                             f"composite action's raw row [B, {sum(self.raw_widths)}] float")
        return list(raw_action.split(self.raw_widths, dim=-1))

    def _head_raw(self, head: nn.Module, column: torch.Tensor) -> torch.Tensor:
        """A part's raw columns (float) as its head stores them: float for a Box, long indices ``[B]`` for a
        Discrete, ``[B, K]`` or ``[B, n]`` long otherwise."""
        if isinstance(head, SquashedGaussianActor):
            return column
        column = column.long()
        return column[:, 0] if isinstance(head, CategoricalActor) and not head.multi else column

    def sample(self, features: torch.Tensor, deterministic: bool = False, generator: torch.Generator | None = None,
               with_log_prob: bool = True, action_mask: torch.Tensor | None = None):
        """Return ``(action [N, W] float, raw_action [N, R] float, log_prob [N] or None)``, drawing the parts in
        order (deterministic: each part's mode, the legal argmax of a masked part)."""
        masks = self._part_masks(action_mask, features.shape[0])
        actions, raws, log_probs = [], [], []
        for head, mask in zip(self.heads, masks, strict=True):
            kw = {} if mask is None else {"action_mask": mask}
            action, raw, log_prob = head.sample(features, deterministic, generator, with_log_prob, **kw)
            actions.append(_column(action, features.dtype))
            raws.append(_column(raw, features.dtype))
            log_probs.append(log_prob)
        joint = self._joint(log_probs, raws) if with_log_prob else None
        return torch.cat(actions, dim=-1), torch.cat(raws, dim=-1), joint

    def log_prob(self, features: torch.Tensor, raw_action: torch.Tensor,
                 action_mask: torch.Tensor | None = None) -> torch.Tensor:
        """``[B]`` joint log-probability of stored raw rows ``[B, R]`` (the linked parts counted where selected)."""
        columns = self.split_raw(raw_action)
        masks = self._part_masks(action_mask, features.shape[0])
        values = [head.log_prob(features, self._head_raw(head, column), **({} if m is None else {"action_mask": m}))
                  for head, column, m in zip(self.heads, columns, masks, strict=True)]
        return self._joint(values, columns)

    def draws(self, batch: int, generator: torch.Generator | None = None, rpo_alpha: float = 0.0,
              device: torch.device | None = None) -> tuple[Any, ...]:
        """The random draws :meth:`evaluate` makes for ``batch`` rows, part by part in its order (a Box part's:
        :meth:`SquashedGaussianActor.draws`; None for the others). Handed back as ``evaluate(..., draws=...)`` they
        give its result bit for bit (``run.compile`` draws them outside its graph)."""
        return tuple(head.draws(batch, generator, rpo_alpha, device) if isinstance(head, SquashedGaussianActor)
                     else None for head in self.heads)

    def evaluate(self, features: torch.Tensor, raw_action: torch.Tensor, generator: torch.Generator | None = None,
                 action_mask: torch.Tensor | None = None, draws: tuple[Any, ...] | None = None):
        """Return ``(log_prob [B], entropy [B])`` of stored raw rows ``[B, R]``: the joint log-prob and the
        weighted entropy ``sum_p active_p w_p H_p`` (module docstring), a Box part's entropy core.squashed_entropy's
        one-sample estimate from ``generator`` (parts in order), or from ``draws`` (:meth:`draws`).

        Raises:
            ValueError: a raw row or a mask of the wrong shape.
        """
        columns = self.split_raw(raw_action)
        masks = self._part_masks(action_mask, features.shape[0])
        log_probs, entropies = [], []
        weights = self.entropy_weights.to(features.dtype)
        for i, (head, column, mask) in enumerate(zip(self.heads, columns, masks, strict=True)):
            kw = {} if mask is None else {"action_mask": mask}
            if draws is not None and draws[i] is not None:
                kw["draws"] = draws[i]
            log_prob, entropy = head.evaluate(features, self._head_raw(head, column), generator, **kw)
            if mask is not None:  # w_p = 1 / ln n_legal(s): core.entropy_weight's per-state factor
                entropy = entropy * head.entropy_weight(mask)
            log_probs.append(log_prob)
            entropies.append(entropy)
        return self._joint(log_probs, columns), self._joint(entropies, columns, weights)

    def entropy_weight(self, action_mask: torch.Tensor) -> torch.Tensor:
        """``[B]`` ones: a composite's entropy (:meth:`evaluate`) already holds each part's per-state weight."""
        return torch.ones(action_mask.shape[0], dtype=torch.float32, device=action_mask.device)


def _raw_width(head: nn.Module) -> int:
    shape = head.raw_action_shape
    return int(shape[0]) if shape else 1


def _column(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """A part's action or raw action ``[N]`` or ``[N, k]`` as float columns ``[N, k]``."""
    return (x.unsqueeze(-1) if x.dim() == 1 else x).to(dtype)


def _entropy_weight(head: nn.Module) -> float:
    """``w_p``: ``1 / d`` for a Box part of ``d`` free dimensions, ``1 / sum_k ln n_k`` for a Categorical part,
    ``1 / (n ln 2)`` for ``n`` bits."""
    if isinstance(head, SquashedGaussianActor):
        return 1.0 / head.action_size
    return 1.0 / sum(math.log(n) for n in head.nvec if n >= 2)


def _links(parts: list[ActionPart], links: dict[Any, Any], space: spaces.Space
           ) -> tuple[list[int], list[torch.Tensor], list[torch.Tensor]]:
    """``policy.action_links`` -> for each link, in an order where a link comes after every link that governs its
    own part: the linking part's index, its ``selects [n, P]`` bool table (core.linked_active: row ``c`` False at
    the parts the link governs that choice ``c`` does not select, True elsewhere) and the ``[P]`` bool parts it
    governs.

    Names are strings (a Dict key, a Tuple index, nested names joined by dots); an int key, choice or target is
    read as its string. A target that names a Dict or Tuple part selects every part inside it.

    Raises:
        ConfigError: one line, for a key or a target that names no part, a key that is not a Discrete part, a
            choice that is not an integer in ``0 .. n - 1``, a part that selects itself, or links that form a
            cycle (a part that, through other parts, selects itself).
    """
    names = [part.name for part in parts]
    known = clipped(", ".join(names), 60)
    found: list[tuple[int, np.ndarray]] = []
    for key, choices in links.items():
        key = str(key)
        where = f"policy.action_links.{key}"
        if key not in names:
            raise ConfigError(f"{where}: the action space {space_text(space, 40)} has no part {clipped(key, 20)!r}; "
                              f"its parts are {known}")
        k = names.index(key)
        part = parts[k]
        if not isinstance(part.space, spaces.Discrete):
            raise ConfigError(f"{where}: a link goes from a Discrete part; {key!r} is {space_text(part.space, 60)}")
        n = int(part.space.n)
        chosen: dict[int, set[int]] = {}
        for choice, targets in choices.items():
            try:
                c = int(choice)
            except (TypeError, ValueError):
                c = -1
            if str(choice).strip() != str(c) or not 0 <= c < n:
                raise ConfigError(f"{where}: choice {clipped(choice, 20)!r} is not one of the choices 0..{n - 1} of "
                                  f"{key!r} (indices from 0, whatever the Discrete's start)")
            selected: set[int] = set()
            for target in map(str, targets):
                inside = [i for i, name in enumerate(names) if name == target or name.startswith(target + ".")]
                if not inside:
                    raise ConfigError(f"{where}.{c}: the action space has no part {clipped(target, 20)!r}; its "
                                      f"parts are {known}")
                if k in inside:
                    raise ConfigError(f"{where}.{c}: a part cannot select itself")
                selected.update(inside)
            chosen[c] = selected
        governed = np.zeros(len(parts), dtype=bool)
        governed[sorted(set().union(*chosen.values()))] = True
        table = np.ones((n, len(parts)), dtype=bool)
        for c in range(n):
            table[c, governed] = False
            table[c, sorted(chosen.get(c, set()))] = True
        found.append((k, table, governed))
    order = _governing_order([(k, governed) for k, _, governed in found], names)
    return ([found[i][0] for i in order], [torch.as_tensor(found[i][1]) for i in order],
            [torch.as_tensor(found[i][2]) for i in order])


def _governing_order(links: list[tuple[int, np.ndarray]], names: list[str]) -> list[int]:
    """The links in an order where each comes after every link that governs its linking part (a topological
    order); ConfigError (one line) for a cycle."""
    order: list[int] = []
    left = list(range(len(links)))
    while left:
        ready = [i for i in left if not any(links[j][1][links[i][0]] for j in left if j != i)]
        if not ready:
            cycle = ", ".join(repr(names[links[i][0]]) for i in left)
            raise ConfigError(f"policy.action_links: the links of {clipped(cycle, 60)} form a cycle (a part that "
                              "selects, through others, the part that selects it)")
        order.append(ready[0])
        left.remove(ready[0])
    return order
