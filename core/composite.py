"""Composite actions: one joint distribution over the parts of a Dict or Tuple action, and parameterised actions.

A composite action is a tuple of parts, each with a distribution of its own (a Categorical over a Discrete part, a
tanh-squashed Gaussian over a Box part, ...), drawn independently given the state. Its joint log-prob is the sum of
the parts' log-probs, and its entropy the sum of the parts' entropies, each times a weight.

A parameterised (hybrid) action links a discrete part, the action's kind, to the parts that hold each kind's
parameters (Masson et al. 2016, "Reinforcement Learning with Parameterized Actions", AAAI; H-PPO, Fan et al. 2019,
arXiv:1903.01344; MP-DQN, Bester et al. 2019, arXiv:1905.04388). Only the chosen kind's parameters act on the
environment, so only they count: with ``active[b, p]`` true where part ``p`` counts in row ``b``::

    log pi(a | s) = sum_p active[b, p] * log pi_p(a_p | s)
    H(s)          = sum_p active[b, p] * w_p * H_p(s)

A parameter of a kind not taken then adds nothing to the ratio and gets exactly zero gradient from the loss:
counting it would add the noise of a draw that had no effect, and push its distribution with an advantage it did
not earn.
"""

from __future__ import annotations

import torch

from core._checks import check_floating


def linked_active(choice: torch.Tensor, selects: torch.Tensor) -> torch.Tensor:
    """Which parts count in each row, given the choice of one linking discrete part.

    Args:
        choice: ``[B]`` long, the linking part's choice in each row (``0 .. n - 1``, without a Discrete ``start``).
        selects: ``[n, P]`` bool: ``selects[c, p]`` is True where part ``p`` counts when choice ``c`` is taken.
            A part that no choice links (a part not governed by this link, such as the linking part itself) is
            True in every row of ``selects``.

    Returns:
        ``[B, P]`` bool, ``selects[choice]``. For several links, combine their results with ``&``.

    Raises:
        ValueError: ``choice`` not ``[B]`` integer, ``selects`` not ``[n, P]`` bool, or (on the CPU) a choice out of
            range; on an accelerator the indexing reports one, so that the check costs no device sync.
    """
    if choice.dim() != 1 or choice.dtype.is_floating_point or choice.dtype == torch.bool:
        raise ValueError(f"choice must be [B] integer, got {list(choice.shape)} {choice.dtype}")
    if selects.dim() != 2 or selects.dtype != torch.bool:
        raise ValueError(f"selects must be [n, P] bool, got {list(selects.shape)} {selects.dtype}")
    on_cpu = choice.device.type == "cpu" and choice.numel()
    if on_cpu and (int(choice.min()) < 0 or int(choice.max()) >= selects.shape[0]):
        raise ValueError(f"choice holds {int(choice.min())}..{int(choice.max())}, outside 0..{selects.shape[0] - 1}")
    return selects[choice]


def linked_sum(values: torch.Tensor, active: torch.Tensor, weights: torch.Tensor | None = None) -> torch.Tensor:
    """``sum_p active[b, p] * weights[p] * values[b, p]`` of each row: the joint log-prob (no weights) or the
    weighted entropy of a composite action, counting only the parts that act.

    An inactive entry contributes exactly 0 and gets exactly zero gradient, even where it is not finite (a
    log-prob of -inf or a NaN there never reaches the sum).

    Args:
        values: ``[B, P]`` float, each part's log-prob (or entropy) in each row.
        active: ``[B, P]`` bool, True where the part counts (:func:`linked_active`; all True for a plain Dict or
            Tuple action).
        weights: ``[P]`` float, each part's weight (the entropy's: ``1 / ln n`` for a Discrete part of ``n``
            choices, ``1 / d`` for a Box part of ``d`` dimensions), or None for 1.

    Returns:
        ``[B]`` float, in the dtype of ``values``.

    Raises:
        ValueError: non-float ``values`` or ``weights``, or shapes that do not match.
    """
    check_floating(values=values)
    if values.dim() != 2:
        raise ValueError(f"values must be [B, P], got {list(values.shape)}")
    if active.shape != values.shape or active.dtype != torch.bool:
        raise ValueError(f"active must be {list(values.shape)} bool, got {list(active.shape)} {active.dtype}")
    if weights is not None:
        check_floating(weights=weights)
        if weights.shape != values.shape[1:]:
            raise ValueError(f"weights must be [{values.shape[1]}], got {list(weights.shape)}")
        values = values * weights
    return torch.where(active, values, torch.zeros((), dtype=values.dtype, device=values.device)).sum(-1)
