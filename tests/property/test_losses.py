"""Property tests of ``core.clip_loss`` and ``core.value_loss``.

References:
- "Proximal Policy Optimization Algorithms", Schulman et al., 2017 (arXiv:1707.06347), eq. (7):
  ``L = E[ min(r A, clip(r, 1 - eps, 1 + eps) A) ]`` with ``r = exp(log pi - log pi_old)``;
  clip_loss returns ``-L`` over the minibatch.
- The clipped value loss of OpenAI baselines' ppo2 ("Implementation Matters in Deep Policy
  Gradients", Engstrom et al., 2020, arXiv:2005.12729):
  ``0.5 * mean(max((V - R)^2, (V_old + clip(V - V_old, -eps, eps) - R)^2))`` with the rollout-time V_old.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import example, given
from hypothesis import strategies as st
from property_helpers import (
    arrays,
    as_tensor,
    assert_close,
    assert_meta,
    call_pure,
    dtypes,
    eps,
    finite_floats,
)

import core

# ---------------------------------------------------------------- references


def clip_loss_reference(new_log_prob, old_log_prob, advantages, clip_coef) -> tuple[float, float]:
    """-(1/B) sum_i min(r_i A_i, clip(r_i, 1 - eps, 1 + eps) A_i), in Python floats.
    Also returns the sum of |terms| / B, the scale of the rounding error."""
    total, magnitude = 0.0, 0.0
    for new, old, adv in zip(new_log_prob, old_log_prob, advantages, strict=True):
        ratio = math.exp(float(new) - float(old))
        clipped = min(max(ratio, 1.0 - clip_coef), 1.0 + clip_coef)
        term = min(ratio * float(adv), clipped * float(adv))
        total += term
        magnitude += abs(ratio * float(adv)) + abs(float(adv))
    batch = len(advantages)
    return -total / batch, magnitude / batch


def value_loss_reference(new_values, returns, old_values=None, clip_coef=None) -> tuple[float, float]:
    total, magnitude = 0.0, 0.0
    for i, (v, ret) in enumerate(zip(new_values, returns, strict=True)):
        v, ret = float(v), float(ret)
        loss = (v - ret) ** 2
        size = (abs(v) + abs(ret)) ** 2
        if clip_coef is not None:
            old = float(old_values[i])
            v_clipped = old + min(max(v - old, -clip_coef), clip_coef)
            loss = max(loss, (v_clipped - ret) ** 2)
            size += (abs(old) + clip_coef + abs(ret)) ** 2
        total += loss
        magnitude += size
    return 0.5 * total / len(returns), magnitude / len(returns)


# ---------------------------------------------------------------- strategies

clip_coefs = st.one_of(st.sampled_from([0.1, 0.2, 0.3]), st.floats(0.01, 0.9))


@st.composite
def policy_batches(draw, *, log_ratio_bound: float = 3.0, min_size: int = 1):
    """old log-probs, log-ratios, advantages: [B] with B in 1..64."""
    batch = draw(st.integers(min_size, 64))
    old = draw(arrays(batch, 20.0))
    log_ratio = draw(arrays(batch, log_ratio_bound))
    new = (old.astype(np.float64) + log_ratio.astype(np.float64)).astype(np.float32)
    return {
        "new": new,
        "old": old,
        "adv": draw(arrays(batch, 10.0)),
        "dtype": draw(dtypes),
    }


def _tensors(batch, requires_grad: bool = False):
    dtype = batch["dtype"]
    new = as_tensor(batch["new"], dtype).requires_grad_(requires_grad)
    return new, as_tensor(batch["old"], dtype), as_tensor(batch["adv"], dtype)


# ---------------------------------------------------------------- clip_loss


@given(batch=policy_batches(), clip_coef=clip_coefs)
@example(  # a minibatch of one
    batch={
        "new": np.array([0.5], np.float32),
        "old": np.array([0.0], np.float32),
        "adv": np.array([-2.0], np.float32),
        "dtype": torch.float32,
    },
    clip_coef=0.2,
)
def test_clip_loss_matches_ppo_eq7(batch, clip_coef) -> None:
    new, old, adv = _tensors(batch)
    loss = call_pure(core.clip_loss, new, old, adv, clip_coef)
    assert_meta(loss, new, ())
    expected, magnitude = clip_loss_reference(batch["new"], batch["old"], batch["adv"], clip_coef)
    # The log-ratio's rounding (|log-ratio| <= 3) times r |A|, the exp and the mean: a few eps.
    assert_close(loss, expected, atol=16 * eps(batch["dtype"]) * magnitude)


@given(batch=policy_batches(), clip_coef=clip_coefs)
def test_clip_loss_at_ratio_one_is_minus_mean_advantage(batch, clip_coef) -> None:
    _, old, adv = _tensors(batch)
    loss = core.clip_loss(old.clone(), old, adv, clip_coef)
    assert torch.equal(loss, -adv.mean())


@given(batch=policy_batches(log_ratio_bound=1.0), clip_coef=clip_coefs)
@example(  # both sides of both clip bounds, with both signs of advantage
    batch={
        "new": np.log(np.array([2.0, 0.5, 2.0, 0.5, 1.1, 0.9, 1.0], np.float32)),
        "old": np.zeros(7, np.float32),
        "adv": np.array([1.0, -1.0, -1.0, 1.0, 3.0, -3.0, 0.0], np.float32),
        "dtype": torch.float32,
    },
    clip_coef=0.2,
)
@example(  # shrunk: a tiny advantage makes a subnormal gradient
    batch={
        "new": np.full(6, 0.25, np.float32),
        "old": np.zeros(6, np.float32),
        "adv": np.array([1.1754944e-38, 0.0, 0.0, 0.0, 0.0, 0.0], np.float32),
        "dtype": torch.float32,
    },
    clip_coef=0.5,
)
def test_clip_loss_gradient_is_zero_where_clipped_and_unclipped_elsewhere(batch, clip_coef) -> None:
    """d loss / d new_log_prob_i = 0 where r > 1 + eps with A > 0 or r < 1 - eps with A < 0, and
    -A_i r_i / B (the unclipped gradient) everywhere else."""
    new, old, adv = _tensors(batch, requires_grad=True)
    core.clip_loss(new, old, adv, clip_coef).backward()
    ratio = torch.exp(new.detach() - old)  # the same rounding as the loss sees
    clipped = ((adv > 0) & (ratio > 1.0 + clip_coef)) | ((adv < 0) & (ratio < 1.0 - clip_coef))
    assert torch.equal(new.grad[clipped], torch.zeros_like(new.grad[clipped]))
    unclipped = -(adv * ratio / adv.numel()).double()
    assert_close(
        new.grad[~clipped],
        unclipped[~clipped].numpy(),
        atol=4 * eps(batch["dtype"]) * unclipped[~clipped].abs().numpy(),
    )


@given(
    batch=policy_batches(log_ratio_bound=1.0),
    clip_coef=clip_coefs,
    huge=st.one_of(finite_floats(3e38, min_value=20.0), finite_floats(-20.0, min_value=-3e38)),
)
@example(
    batch={
        "new": np.zeros(1, np.float32),
        "old": np.zeros(1, np.float32),
        "adv": np.array([-10.0], np.float32),
        "dtype": torch.float32,
    },
    clip_coef=0.2,
    huge=1e4,
)
def test_clip_loss_finite_for_huge_log_ratio(batch, clip_coef, huge) -> None:
    """One sample with a huge log-ratio (either sign) and advantages of either sign: finite loss
    and finite gradients."""
    new, old, adv = _tensors(batch)
    new = new.clone()
    new[0] = old[0] + huge
    new.requires_grad_(True)
    loss = core.clip_loss(new, old, adv, clip_coef)
    loss.backward()
    assert torch.isfinite(loss)
    assert torch.isfinite(new.grad).all()


huge_log_ratios = finite_floats(3e38, min_value=float(core.MAX_LOG_RATIO))


@given(log_ratio=huge_log_ratios, adv=finite_floats(10.0, min_value=0.001), clip_coef=clip_coefs, dtype=dtypes)
@example(log_ratio=1e9, adv=1.0, clip_coef=0.2, dtype=torch.float32)  # the cap's rounding leaves r = 1
@example(log_ratio=536870976.0, adv=1.0, clip_coef=0.1, dtype=torch.float32)  # shrunk by Hypothesis
def test_clip_loss_huge_ratio_with_positive_advantage_is_clipped(log_ratio, adv, clip_coef, dtype) -> None:
    """r = exp(log_ratio) > 1 + eps and A > 0: the clipped term is the min, so the loss is exactly
    -(1 + eps) A and no gradient passes, however large the log-ratio."""
    new = torch.tensor([log_ratio], dtype=dtype, requires_grad=True)
    adv_t = torch.tensor([adv], dtype=dtype)
    loss = core.clip_loss(new, torch.zeros(1, dtype=dtype), adv_t, clip_coef)
    loss.backward()
    torch.testing.assert_close(loss, -(adv_t * (1.0 + clip_coef))[0], rtol=2 * eps(dtype), atol=0)
    assert new.grad.item() == 0.0


@given(log_ratio=huge_log_ratios, adv=finite_floats(-0.001, min_value=-10.0), clip_coef=clip_coefs, dtype=dtypes)
@example(log_ratio=1e9, adv=-1.0, clip_coef=0.2, dtype=torch.float32)  # r = 1 instead of e^20
@example(log_ratio=67108888.0, adv=-1.0, clip_coef=0.1, dtype=torch.float32)  # shrunk: r = e^24 instead of e^20
def test_clip_loss_caps_log_ratio_in_value_and_gradient(log_ratio, adv, clip_coef, dtype) -> None:
    """A < 0 keeps the unclipped r A for any large r. Documented: log-ratios above MAX_LOG_RATIO count
    as MAX_LOG_RATIO in value and gradient (loss -e^20 A, gradient -e^20 A for B = 1). Allowed slack:
    1%, far more than rounding needs."""

    def loss_and_grad(x: float):
        new = torch.tensor([x], dtype=dtype, requires_grad=True)
        loss = core.clip_loss(new, torch.zeros(1, dtype=dtype), torch.tensor([adv], dtype=dtype), clip_coef)
        loss.backward()
        return loss.detach(), new.grad[0]

    loss, grad = loss_and_grad(log_ratio)
    capped_loss, capped_grad = loss_and_grad(core.MAX_LOG_RATIO)
    assert math.isclose(capped_loss.item(), -math.exp(core.MAX_LOG_RATIO) * adv, rel_tol=1e-6)
    torch.testing.assert_close(loss, capped_loss, rtol=1e-2, atol=0)
    torch.testing.assert_close(grad, capped_grad, rtol=1e-2, atol=0)


def test_clip_loss_hand_worked_example() -> None:
    # old log-probs 0, new log-probs (ln 2, ln 0.5): r = (2, 0.5); clip_coef = 0.2.
    # advantages (1, -1): min(2 * 1, 1.2 * 1) = 1.2 (clipped), min(0.5 * -1, 0.8 * -1) = -0.8 (clipped)
    #   loss = -(1.2 - 0.8) / 2 = -0.2, and no gradient reaches either sample.
    # advantages (-1, 1): min(-2, -1.2) = -2 (unclipped), min(0.5, 0.8) = 0.5 (unclipped)
    #   loss = -(-2 + 0.5) / 2 = 0.75
    #   d loss / d new = -A r / B = (-(-1) * 2 / 2, -(1) * 0.5 / 2) = (1, -0.25)
    old = torch.zeros(2, dtype=torch.float64)
    for adv, loss_value, grad in [((1.0, -1.0), -0.2, (0.0, 0.0)), ((-1.0, 1.0), 0.75, (1.0, -0.25))]:
        new = torch.tensor([math.log(2.0), math.log(0.5)], dtype=torch.float64, requires_grad=True)
        loss = core.clip_loss(new, old, torch.tensor(adv, dtype=torch.float64), 0.2)
        loss.backward()
        assert abs(loss.item() - loss_value) < 1e-12
        assert torch.allclose(new.grad, torch.tensor(grad, dtype=torch.float64), atol=1e-12)


@pytest.mark.parametrize(
    ("new", "old", "adv", "clip_coef"),
    [
        (torch.zeros(4), torch.zeros(4), torch.zeros(4, 1), 0.2),  # [B] against [B, 1]
        (torch.zeros(4, 1), torch.zeros(4), torch.zeros(4), 0.2),
        (torch.zeros(4), torch.zeros(3), torch.zeros(4), 0.2),
        (torch.zeros(0), torch.zeros(0), torch.zeros(0), 0.2),  # empty batch
        (torch.zeros(4), torch.zeros(4), torch.zeros(4), 0.0),
        (torch.zeros(4), torch.zeros(4), torch.zeros(4), -0.2),
        (torch.zeros(4), torch.zeros(4), torch.zeros(4, dtype=torch.long), 0.2),
    ],
)
def test_clip_loss_rejects_bad_inputs(new, old, adv, clip_coef) -> None:
    with pytest.raises(ValueError):
        core.clip_loss(new, old, adv, clip_coef)


# ---------------------------------------------------------------- value_loss


@st.composite
def value_batches(draw):
    batch = draw(st.integers(1, 64))
    return {
        "new": draw(arrays(batch, 100.0)),
        "returns": draw(arrays(batch, 100.0)),
        "old": draw(arrays(batch, 100.0)),
        "dtype": draw(dtypes),
    }


@given(batch=value_batches(), clip_coef=st.one_of(st.none(), st.floats(0.01, 10.0)))
@example(
    batch={
        "new": np.array([1.0], np.float32),
        "returns": np.array([2.0], np.float32),
        "old": np.array([0.0], np.float32),
        "dtype": torch.float32,
    },
    clip_coef=0.5,
)
def test_value_loss_matches_max_formula_with_rollout_values(batch, clip_coef) -> None:
    dtype = batch["dtype"]
    new, returns, old = (as_tensor(batch[k], dtype) for k in ("new", "returns", "old"))
    loss = call_pure(core.value_loss, new, returns, old, clip_coef)
    assert_meta(loss, new, ())
    expected, magnitude = value_loss_reference(batch["new"], batch["returns"], batch["old"], clip_coef)
    assert_close(loss, expected, atol=16 * eps(dtype) * magnitude)


@given(batch=value_batches(), clip_coef=st.floats(0.01, 10.0))
def test_value_loss_clipping_is_relative_to_old_values(batch, clip_coef) -> None:
    """When every new value is within clip_coef of its old value the clipped loss is the plain loss;
    when new values equal the old ones, too. Moving old_values changes the loss as the formula says."""
    dtype = batch["dtype"]
    new, returns = as_tensor(batch["new"], dtype), as_tensor(batch["returns"], dtype)
    plain = core.value_loss(new, returns)
    scale = ((new.abs() + returns.abs() + clip_coef) ** 2).mean().item()
    assert torch.equal(core.value_loss(new, returns, new.clone(), clip_coef), plain)
    near = new - 0.5 * clip_coef  # |V - V_old| < clip_coef: V_clip = V
    torch.testing.assert_close(
        core.value_loss(new, returns, near, clip_coef), plain, rtol=0, atol=16 * eps(dtype) * scale
    )
    # V_old = V + 1000: V_clip = V + 1000 - clip_coef is the farther from R (|V - R| <= 200), so the
    # loss is 0.5 * mean((V_old - clip_coef - R)^2), larger than the plain loss.
    far = new + 1000.0
    expected, magnitude = value_loss_reference(new.tolist(), returns.tolist(), far.tolist(), clip_coef)
    direct = 0.5 * np.mean((np.asarray(far.tolist()) - clip_coef - np.asarray(returns.tolist())) ** 2)
    assert math.isclose(expected, direct, rel_tol=1e-12)
    assert expected > plain.item()
    assert_close(core.value_loss(new, returns, far, clip_coef), expected, atol=16 * eps(dtype) * magnitude)


def test_value_loss_hand_worked_example() -> None:
    # V = (1, 3), R = (2, 0), V_old = (0, 2), clip_coef = 0.5
    #   sample 0: (1 - 2)^2 = 1;  V_clip = 0 + clip(1, -0.5, 0.5) = 0.5, (0.5 - 2)^2 = 2.25 -> max 2.25
    #   sample 1: (3 - 0)^2 = 9;  V_clip = 2 + 0.5 = 2.5, (2.5 - 0)^2 = 6.25             -> max 9
    #   clipped loss = 0.5 * (2.25 + 9) / 2 = 2.8125;  plain loss = 0.5 * (1 + 9) / 2 = 2.5
    new, returns, old = torch.tensor([1.0, 3.0]), torch.tensor([2.0, 0.0]), torch.tensor([0.0, 2.0])
    assert core.value_loss(new, returns, old, 0.5).item() == 2.8125
    assert core.value_loss(new, returns).item() == 2.5


@pytest.mark.parametrize(
    ("new", "returns", "old", "clip_coef"),
    [
        (torch.zeros(4), torch.zeros(4, 1), None, None),  # [B] against [B, 1]
        (torch.zeros(4), torch.zeros(4), torch.zeros(4, 1), 0.2),
        (torch.zeros(4), torch.zeros(4), None, 0.2),  # clipping needs the rollout-time values
        (torch.zeros(4), torch.zeros(4), torch.zeros(4), 0.0),
        (torch.zeros(0), torch.zeros(0), None, None),
    ],
)
def test_value_loss_rejects_bad_inputs(new, returns, old, clip_coef) -> None:
    with pytest.raises(ValueError):
        core.value_loss(new, returns, old, clip_coef)
