"""Pure functions for invalid-action masks: masked Categorical and Bernoulli maths, exact.

A mask is a bool tensor, ``True`` where an action is legal. A masked logit is replaced by the
most negative finite number of its dtype (``torch.finfo(dtype).min``), never by ``-inf``:

- its probability is exactly 0 (``exp(min - logsumexp)`` underflows to 0.0 in every float dtype),
  while every quantity stays finite, so ``0 * log p`` cannot become ``0 * -inf = NaN``;
- ``torch.where`` passes no gradient to the masked logits: gradients flow through legal logits only;
- with an all-true mask ``torch.where`` returns the logits unchanged, so every function here gives
  bit for bit what the unmasked ``torch.distributions.Categorical`` gives.

Sampling and the argmax choose among legal actions only, whatever the noise (a masked entry is
set to ``-inf`` after the Gumbel noise is added, where no NaN can arise).

Layouts. A Discrete(n) mask is ``[..., n]``. A MultiDiscrete(nvec) mask is the K per-component
masks concatenated, ``[..., sum(nvec)]``, in the layout of the logits the policy produces
(sb3-contrib's MaskablePPO uses the same layout). A MultiBinary(n) mask is ``[..., n]``: ``True``
where the bit may be set; a bit that may not be set is 0 with probability exactly 1.

The per-state entropy normalisation generalises ``normalized_entropy_coef``: the bonus of state
``s`` is ``base_coef * sum_k H_k(s) / sum_k ln n_legal,k(s)``, 0 where no component has more than
one legal action (:func:`normalized_entropy_bonus`, :func:`entropy_weight`).

See "A Closer Look at Invalid Action Masking in Policy Gradient Algorithms", Huang and
Ontañón, 2022: arXiv:2006.14171 (masking by replacing logits with a large negative number).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch.distributions import Bernoulli, Categorical

from core._checks import check_floating


def _check_mask(mask: torch.Tensor, logits: torch.Tensor, what: str = "logits") -> None:
    if mask.dtype != torch.bool:
        raise ValueError(f"action mask must be a bool tensor, got dtype {mask.dtype}")
    if tuple(mask.shape) != tuple(logits.shape):
        raise ValueError(f"action mask of shape {list(mask.shape)} does not match {what} of shape "
                         f"{list(logits.shape)}")


def _check_sizes(sizes: Sequence[int], last: int) -> list[int]:
    sizes = [int(n) for n in sizes]
    if not sizes or any(n < 1 for n in sizes) or sum(sizes) != last:
        raise ValueError(f"component sizes {sizes} must be ints >= 1 summing to the last dimension {last}")
    return sizes


def masked_logits(logits: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Logits with every illegal entry replaced by ``torch.finfo(logits.dtype).min``.

    Args:
        logits: ``[..., n]`` float, unnormalised log-probabilities.
        mask: ``[..., n]`` bool, True where the action is legal.

    Returns:
        ``[..., n]`` float, same dtype; equal to ``logits`` (bit for bit) where ``mask`` is True.
        No gradient reaches ``logits`` where ``mask`` is False.

    Raises:
        ValueError: ``logits`` not floating point, ``mask`` not bool, or the shapes differ.
    """
    check_floating(logits=logits)
    _check_mask(mask, logits)
    return torch.where(mask, logits, torch.finfo(logits.dtype).min)


def masked_categorical(logits: torch.Tensor, mask: torch.Tensor) -> Categorical:
    """``torch.distributions.Categorical`` over :func:`masked_logits`: masked actions have probability 0.

    Its ``log_prob`` is exact and finite for legal actions (bit for bit the unmasked one under an
    all-true mask); use :func:`masked_entropy` for the entropy (``Categorical.entropy`` is also
    finite here, but the masked form makes each masked term exactly 0).

    Args:
        logits: ``[..., n]`` float.
        mask: ``[..., n]`` bool, at least one True per row.

    Raises:
        ValueError: see :func:`masked_logits`.
    """
    return Categorical(logits=masked_logits(logits, mask), validate_args=False)


def masked_probs(logits: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The masked Categorical's probabilities: a softmax over the legal logits, exactly 0 on illegal actions.

    ``p_a = exp(l_a) / sum_{j legal} exp(l_j)`` for a legal ``a``, ``p_a = 0.0`` (exactly) for an illegal one.
    Under an all-true mask this is bit for bit ``torch.softmax(logits, -1)``.

    Args:
        logits: ``[..., n]`` float.
        mask: ``[..., n]`` bool, True where legal; at least one True per row (a row without one is all zeros).

    Returns:
        ``[..., n]`` probabilities, dtype of ``logits``; each row with a legal action sums to 1 (up to rounding).

    Raises:
        ValueError: see :func:`masked_logits`.
    """
    return torch.where(mask, torch.softmax(masked_logits(logits, mask), dim=-1), 0.0)


def masked_log_prob(logits: torch.Tensor, mask: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
    """``log pi(action)`` of the masked Categorical: ``log_softmax`` over the legal logits.

    ``log pi(a) = l_a - log sum_{j legal} exp(l_j)`` for a legal ``a``; for an illegal ``a`` the
    result is about ``finfo.min`` (finite; its probability ``exp`` is exactly 0).

    Args:
        logits: ``[..., n]`` float.
        mask: ``[..., n]`` bool, True where legal; at least one True per row.
        action: ``[...]`` integer indices in ``[0, n)``.

    Returns:
        ``[...]`` log-probabilities, dtype of ``logits``.

    Raises:
        ValueError: the shapes do not match, or dtypes are wrong.
    """
    if tuple(action.shape) != tuple(logits.shape[:-1]):
        raise ValueError(f"action of shape {list(action.shape)} does not match logits {list(logits.shape)} "
                         "without their last dimension")
    if action.is_floating_point() or action.dtype == torch.bool:
        raise ValueError(f"action must be integer indices, got dtype {action.dtype}")
    return masked_categorical(logits, mask).log_prob(action)


def masked_entropy(logits: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Entropy of the masked Categorical: ``-sum_{a legal} p_a log p_a`` (masked terms exactly 0).

    Under an all-true mask this is bit for bit ``Categorical(logits=logits).entropy()``.

    Args:
        logits: ``[..., n]`` float.
        mask: ``[..., n]`` bool, True where legal; at least one True per row.

    Returns:
        ``[...]`` entropy in nats, in ``[0, ln(number of legal actions)]``.

    Raises:
        ValueError: see :func:`masked_logits`.
    """
    dist = masked_categorical(logits, mask)
    p_log_p = dist.logits * dist.probs
    return -torch.where(mask, p_log_p, 0.0).sum(-1)


def masked_log_prob_and_entropy(logits: torch.Tensor, mask: torch.Tensor,
                                action: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`masked_log_prob` and :func:`masked_entropy` from one distribution (what the update needs).

    Under an all-true mask, values and gradients are bit for bit those of one
    ``Categorical(logits=logits)``'s ``log_prob(action)`` and ``entropy()``.

    Args:
        logits: ``[..., n]`` float.
        mask: ``[..., n]`` bool, at least one True per row.
        action: ``[...]`` integer indices.

    Returns:
        ``(log_prob [...], entropy [...])``.

    Raises:
        ValueError: see :func:`masked_log_prob`.
    """
    if tuple(action.shape) != tuple(logits.shape[:-1]):
        raise ValueError(f"action of shape {list(action.shape)} does not match logits {list(logits.shape)} "
                         "without their last dimension")
    dist = masked_categorical(logits, mask)
    return dist.log_prob(action), -torch.where(mask, dist.logits * dist.probs, 0.0).sum(-1)


def masked_categorical_sample(logits: torch.Tensor, mask: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
    """Draw one legal index per row with the Gumbel-max trick over the legal actions.

    ``argmax_{a legal}(l_a - log(noise_a))`` with ``noise`` i.i.d. Exponential(1) is distributed as
    the masked softmax (see :func:`core.categorical_sample`). Illegal entries are set to ``-inf``
    after the noise is added, so no draw of ``noise`` (not even 0, whose ``-log`` is ``+inf``) can
    choose an illegal action. Under an all-true mask this equals ``core.categorical_sample``.

    Args:
        logits: ``[..., n]`` float.
        mask: ``[..., n]`` bool, at least one True per row.
        noise: ``[..., n]`` float, positive, Exponential(1) draws (the caller draws them).

    Returns:
        ``[...]`` long indices of legal actions.

    Raises:
        ValueError: shapes differ or dtypes are wrong.
    """
    check_floating(logits=logits, noise=noise)
    _check_mask(mask, logits)
    _check_mask(mask, noise, "noise")
    scores = torch.where(mask, logits - noise.log(), -torch.inf)
    return scores.argmax(dim=-1)


def masked_argmax(logits: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The most probable legal action per row (the deterministic policy): ``[..., n] -> [...]`` long.

    Raises:
        ValueError: shapes differ or dtypes are wrong.
    """
    check_floating(logits=logits)
    _check_mask(mask, logits)
    return torch.where(mask, logits, -torch.inf).argmax(dim=-1)


def legal_log_count(mask: torch.Tensor, sizes: Sequence[int]) -> torch.Tensor:
    """``sum_k ln(n_legal,k)`` per row: the largest entropy the masked distribution can have.

    Args:
        mask: ``[..., sum(sizes)]`` bool, the K component masks concatenated.
        sizes: ``[n_1, ..., n_K]`` the number of actions of each component (``[n]`` for Discrete).

    Returns:
        ``[...]`` float32, where a component with one legal action (or none) adds 0.

    Raises:
        ValueError: ``mask`` not bool, or ``sizes`` does not sum to its last dimension.
    """
    if mask.dtype != torch.bool:
        raise ValueError(f"action mask must be a bool tensor, got dtype {mask.dtype}")
    sizes = _check_sizes(sizes, mask.shape[-1])
    counts = torch.stack([part.sum(-1) for part in mask.split(sizes, dim=-1)], dim=-1)
    return torch.log(counts.clamp(min=1).to(torch.float32)).sum(-1)


def entropy_weight(mask: torch.Tensor, sizes: Sequence[int]) -> torch.Tensor:
    """Per-state weight ``w(s) = sum_k ln n_k / sum_k ln n_legal,k(s)`` of the summed entropy.

    With ``c = base_coef / sum_k ln n_k`` (:func:`core.multi_discrete_entropy_coef`, or
    :func:`core.normalized_entropy_coef` for one component), ``c * w(s) * H(s)`` is the per-state
    normalised bonus ``base_coef * H(s) / sum_k ln n_legal,k(s)`` of :func:`normalized_entropy_bonus`.
    Written this way, an all-true mask gives ``w = 1.0`` exactly (the same float32 sum divided by
    itself), so ``c * mean(w * H)`` is bit for bit today's unmasked ``c * mean(H)``. ``w = 0`` where
    no component has more than one legal action (there the entropy is 0 as well).

    Args:
        mask: ``[..., sum(sizes)]`` bool.
        sizes: the component sizes ``[n_1, ..., n_K]``; some ``n_k >= 2``.

    Returns:
        ``[...]`` float32 weights, ``>= 1`` or 0.

    Raises:
        ValueError: see :func:`legal_log_count`; or every component has fewer than 2 actions.
    """
    if not any(int(n) >= 2 for n in sizes):
        raise ValueError(f"component sizes {list(sizes)} need an entry >= 2")
    legal = legal_log_count(mask, sizes)
    full = legal_log_count(torch.ones(mask.shape[-1:], dtype=torch.bool, device=mask.device), sizes)
    return torch.where(legal > 0, full / legal.clamp(min=torch.finfo(torch.float32).tiny), 0.0)


def normalized_entropy_bonus(entropy: torch.Tensor, mask: torch.Tensor, sizes: Sequence[int],
                             base_coef: float = 0.01) -> torch.Tensor:
    """The per-state normalised entropy bonus ``base_coef * H(s) / sum_k ln n_legal,k(s)``.

    0 where no component of ``s`` has more than one legal action. With every action legal this is
    ``normalized_entropy_coef(n, base_coef) * H(s)`` (one component) or
    ``multi_discrete_entropy_coef(nvec, base_coef) * H(s)``. MultiBinary(n) is ``sizes = [2] * n``
    with each bit's mask ``[True, may_set]``: ``ln 2`` for each free bit.

    Args:
        entropy: ``[...]`` float, the summed entropy ``sum_k H_k(s)``.
        mask: ``[..., sum(sizes)]`` bool.
        sizes: the component sizes.
        base_coef: the coefficient of a normalised entropy in [0, 1].

    Returns:
        ``[...]`` the bonus, dtype of ``entropy``.

    Raises:
        ValueError: shapes disagree, or see :func:`legal_log_count`.
    """
    check_floating(entropy=entropy)
    legal = legal_log_count(mask, sizes).to(entropy.dtype)
    if tuple(legal.shape) != tuple(entropy.shape):
        raise ValueError(f"entropy of shape {list(entropy.shape)} does not match the mask's rows "
                         f"{list(legal.shape)}")
    return torch.where(legal > 0, base_coef * entropy / legal.clamp(min=torch.finfo(legal.dtype).tiny), 0.0)


def bernoulli_logits(logits: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """Bit logits with each bit that may not be set replaced by ``finfo.min`` (P(bit = 1) exactly 0).

    Args:
        logits: ``[..., n]`` float, log-odds of each bit being 1.
        mask: ``[..., n]`` bool (True: the bit may be set), or None (every bit free).

    Raises:
        ValueError: dtypes or shapes are wrong.
    """
    check_floating(logits=logits)
    if mask is None:
        return logits
    _check_mask(mask, logits)
    return torch.where(mask, logits, torch.finfo(logits.dtype).min)


def bernoulli_log_prob(logits: torch.Tensor, bits: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """``sum_i log p(bit_i)`` of independent Bernoulli bits (MultiBinary actions).

    ``log p(1) = -softplus(-l)``, ``log p(0) = -softplus(l)`` (``torch.distributions.Bernoulli``).
    A bit that may not be set contributes exactly 0 when it is 0 (``softplus(finfo.min) = 0``).

    Args:
        logits: ``[..., n]`` float.
        bits: ``[..., n]`` 0/1 values (any dtype).
        mask: ``[..., n]`` bool or None.

    Returns:
        ``[...]`` log-probabilities, dtype of ``logits``.

    Raises:
        ValueError: shapes differ.
    """
    if tuple(bits.shape) != tuple(logits.shape):
        raise ValueError(f"bits of shape {list(bits.shape)} do not match logits of shape {list(logits.shape)}")
    dist = Bernoulli(logits=bernoulli_logits(logits, mask), validate_args=False)
    return dist.log_prob(bits.to(logits.dtype)).sum(-1)


def bernoulli_entropy(logits: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """Summed entropy of independent Bernoulli bits; a bit that may not be set adds exactly 0.

    ``H_i = softplus(l_i) - l_i * sigmoid(l_i)``, at most ``ln 2`` per free bit.

    Args:
        logits: ``[..., n]`` float.
        mask: ``[..., n]`` bool or None.

    Returns:
        ``[...]`` entropy in nats.

    Raises:
        ValueError: shapes or dtypes are wrong.
    """
    per_bit = Bernoulli(logits=bernoulli_logits(logits, mask), validate_args=False).entropy()
    if mask is not None:
        per_bit = torch.where(mask, per_bit, 0.0)
    return per_bit.sum(-1)


def bernoulli_sample(logits: torch.Tensor, uniform: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """Bits ``uniform < sigmoid(l)``: 1 with probability ``sigmoid(l)``; never 1 where the mask forbids it.

    Args:
        logits: ``[..., n]`` float.
        uniform: ``[..., n]`` Uniform[0, 1) draws (the caller draws them).
        mask: ``[..., n]`` bool or None.

    Returns:
        ``[..., n]`` long bits.

    Raises:
        ValueError: shapes or dtypes are wrong.
    """
    check_floating(logits=logits, uniform=uniform)
    if tuple(uniform.shape) != tuple(logits.shape):
        raise ValueError(f"uniform of shape {list(uniform.shape)} does not match logits {list(logits.shape)}")
    bits = uniform < torch.sigmoid(logits)
    if mask is not None:
        _check_mask(mask, logits)
        bits = bits & mask
    return bits.long()


def bernoulli_mode(logits: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """The most probable bits (``l > 0``), 0 where the mask forbids a bit: ``[..., n]`` long."""
    check_floating(logits=logits)
    bits = logits > 0
    if mask is not None:
        _check_mask(mask, logits)
        bits = bits & mask
    return bits.long()


def bernoulli_mask_as_categorical(mask: torch.Tensor) -> torch.Tensor:
    """A MultiBinary mask ``[..., n]`` as K = n two-way component masks ``[..., 2n]`` (``[True, may_set]``
    per bit), for :func:`entropy_weight` and :func:`normalized_entropy_bonus` with ``sizes = [2] * n``."""
    if mask.dtype != torch.bool:
        raise ValueError(f"action mask must be a bool tensor, got dtype {mask.dtype}")
    return torch.stack((torch.ones_like(mask), mask), dim=-1).flatten(-2)
