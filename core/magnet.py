"""The magnet of magnetic mirror descent: the KL from the policy to a magnet policy, per state.

See "A Unified Approach to Reinforcement Learning, Quantal Response Equilibria, and Two-Player Zero-Sum Games",
Sokota et al., ICLR 2023: arXiv:2206.05825, eq. (1) (MMD's update ``argmax_pi <pi, q> - alpha KL(pi, rho) -
(1/eta) KL(pi, pi_t)``) and section 4.2 (a magnet refreshed to the current policy, whose last iterate then
converges to a Nash equilibrium rather than to the regularised game's quantal response equilibrium).
"""

from __future__ import annotations

import torch

from core._checks import check_floating
from core.masks import _check_mask, masked_logits


def magnet_kl(logits: torch.Tensor, magnet_logits: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """``KL(pi(.|s) || rho(.|s))`` of each row, over its legal actions: the reverse KL from the policy to the magnet.

    With ``pi = softmax(logits)`` and ``rho = softmax(magnet_logits)``, each over the legal actions of the row::

        KL(pi || rho) = sum_{a legal} pi_a (log pi_a - log rho_a)

    Illegal terms are exactly 0 (their ``pi_a`` is 0). A uniform magnet (``magnet_logits`` all zeros) gives
    ``ln(number of legal actions) - H(pi)``: MMD's magnet term is then an entropy bonus. Gradients reach
    ``logits`` only; the magnet is a constant (detach it or not, its gradient is not taken here).

    Args:
        logits: ``[B, n]`` float, the policy's logits (with grad).
        magnet_logits: ``[B, n]`` float, the magnet policy's logits at the same states.
        mask: ``[B, n]`` bool, True where legal (at least one per row), or None (every action legal).

    Returns:
        ``[B]`` float, each row's KL in nats, ``>= 0`` (up to rounding), 0 where the two agree on the legal actions.

    Raises:
        ValueError: non-float logits, logits of different shapes, or a mask that is not ``[B, n]`` bool.
    """
    check_floating(logits=logits, magnet_logits=magnet_logits)
    if logits.shape != magnet_logits.shape:
        raise ValueError(f"logits {list(logits.shape)} and magnet_logits {list(magnet_logits.shape)} differ in shape")
    magnet_logits = magnet_logits.detach()
    if mask is not None:
        _check_mask(mask, logits)
        logits, magnet_logits = masked_logits(logits, mask), masked_logits(magnet_logits, mask)
    log_pi = torch.log_softmax(logits, dim=-1)
    log_rho = torch.log_softmax(magnet_logits, dim=-1)
    terms = log_pi.exp() * (log_pi - log_rho)
    return (terms if mask is None else torch.where(mask, terms, 0.0)).sum(-1)
