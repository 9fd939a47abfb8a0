"""Property tests of core's masked maths (core/masks.py) against float64 reference loops.

References written from the definitions: the masked softmax ``p_a = exp(l_a) / sum_{j legal}
exp(l_j)`` (0 for an illegal ``a``), its entropy ``-sum_{a legal} p_a ln p_a``, the per-state
normalised bonus ``0.01 * sum_k H_k / sum_k ln n_legal,k`` (0 where no component has more than one
legal action), and independent Bernoulli bits with ``P(1) = sigmoid(l)`` (0 where forbidden).
"""

from __future__ import annotations

import math

import numpy as np
import torch
from hypothesis import example, given
from hypothesis import strategies as st
from property_helpers import arrays, as_tensor, call_pure, dtypes

import core


@st.composite
def masked_case(draw, max_rows: int = 6, max_n: int = 7):
    """logits [B, n] float32 values, a bool mask [B, n] with at least one legal action per row."""
    rows = draw(st.integers(1, max_rows))
    n = draw(st.integers(1, max_n))
    logits = draw(arrays((rows, n), 30.0))
    mask = np.array(draw(st.lists(st.lists(st.booleans(), min_size=n, max_size=n), min_size=rows, max_size=rows)),
                    dtype=bool).reshape(rows, n)
    for r in range(rows):
        if not mask[r].any():
            mask[r, draw(st.integers(0, n - 1))] = True
    return logits, mask


def ref_masked_softmax(logits_row, mask_row) -> list[float]:
    legal = [float(x) for x, m in zip(logits_row, mask_row, strict=True) if m]
    top = max(legal)
    z = sum(math.exp(x - top) for x in legal)
    return [math.exp(float(x) - top) / z if m else 0.0 for x, m in zip(logits_row, mask_row, strict=True)]


def ref_entropy(p: list[float]) -> float:
    return -sum(q * math.log(q) for q in p if q > 0)


def tol(dtype: torch.dtype, scale: float = 1.0) -> float:
    return 64 * torch.finfo(dtype).eps * max(1.0, scale)


@given(masked_case(), dtypes)
@example((np.array([[0.0, 0.0]], np.float32), np.array([[True, False]])), torch.float32)
def test_masked_log_prob_and_entropy_match_the_reference(case, dtype) -> None:
    logits, mask = case
    x, m = as_tensor(logits, dtype), torch.as_tensor(mask)
    entropy = call_pure(core.masked_entropy, x, m)
    assert entropy.dtype == dtype and tuple(entropy.shape) == (logits.shape[0],)
    probs = core.masked_categorical(x, m).probs
    for r in range(logits.shape[0]):
        p = ref_masked_softmax(logits[r], mask[r])
        for a in range(logits.shape[1]):
            if mask[r, a]:
                got = core.masked_log_prob(x[r:r + 1], m[r:r + 1], torch.tensor([a]))
                assert abs(float(got) - math.log(p[a])) <= tol(dtype, 60.0), (r, a, float(got), math.log(p[a]))
            else:
                assert float(probs[r, a]) == 0.0  # exactly zero
        assert abs(float(entropy[r]) - ref_entropy(p)) <= tol(dtype, 60.0)
        assert 0.0 <= float(entropy[r]) <= math.log(mask[r].sum()) + tol(dtype)


@given(masked_case(), dtypes)
def test_masked_maths_has_no_nan_and_the_probability_of_a_masked_action_is_exactly_zero(case, dtype) -> None:
    logits, mask = case
    x, m = as_tensor(logits, dtype), torch.as_tensor(mask)
    actions = torch.arange(logits.shape[1]).expand(logits.shape[0], -1)
    log_probs = torch.stack([core.masked_log_prob(x, m, actions[:, a]) for a in range(logits.shape[1])], -1)
    assert torch.isfinite(log_probs).all() and torch.isfinite(core.masked_entropy(x, m)).all()
    assert torch.all(log_probs.exp()[~m] == 0.0)
    assert torch.all(core.masked_logits(x, m)[m] == x[m])  # legal logits are untouched, bit for bit


@given(masked_case(), dtypes)
@example((np.array([[0.0, 30.0, -30.0]], np.float32), np.array([[True, False, True]])), torch.float32)
def test_masked_probs_match_the_reference_softmax_and_are_exactly_zero_where_illegal(case, dtype) -> None:
    logits, mask = case
    x, m = as_tensor(logits, dtype), torch.as_tensor(mask)
    probs = call_pure(core.masked_probs, x, m)
    assert probs.dtype == dtype and probs.shape == x.shape
    for r in range(logits.shape[0]):
        p = ref_masked_softmax(logits[r], mask[r])
        for a in range(logits.shape[1]):
            if mask[r, a]:
                assert abs(float(probs[r, a]) - p[a]) <= tol(dtype), (r, a, float(probs[r, a]), p[a])
            else:
                assert float(probs[r, a]) == 0.0  # exactly zero
        assert abs(float(probs[r].sum()) - 1.0) <= tol(dtype, logits.shape[1])
    assert torch.equal(core.masked_probs(x, torch.ones_like(m)), torch.softmax(x, -1))  # all legal: bit for bit


@given(masked_case(), dtypes)
def test_gradients_flow_only_through_legal_logits(case, dtype) -> None:
    logits, mask = case
    x = as_tensor(logits, dtype).requires_grad_(True)
    m = torch.as_tensor(mask)
    action = torch.as_tensor([int(np.flatnonzero(row)[0]) for row in mask])
    loss = core.masked_log_prob(x, m, action).sum() + core.masked_entropy(x, m).sum()
    loss.backward()
    assert torch.isfinite(x.grad).all()
    assert torch.all(x.grad[~m] == 0.0)


@given(masked_case(), st.integers(0, 2**31 - 1), dtypes)
def test_sampling_and_argmax_choose_legal_actions_only(case, seed, dtype) -> None:
    logits, mask = case
    x, m = as_tensor(logits, dtype), torch.as_tensor(mask)
    noise = torch.empty_like(x).exponential_(generator=torch.Generator().manual_seed(seed))
    noise[:, 0] = 0.0  # -log(0) = +inf: still never an illegal action
    for out in (core.masked_categorical_sample(x, m, noise), core.masked_argmax(x, m)):
        assert out.dtype == torch.long
        assert torch.all(m.gather(1, out[:, None]))
    best = core.masked_argmax(x, m)
    for r in range(logits.shape[0]):
        legal = np.flatnonzero(mask[r])
        assert float(logits[r, int(best[r])]) == max(float(logits[r, a]) for a in legal)


@given(st.lists(st.floats(-4.0, 4.0, allow_nan=False, width=32), min_size=2, max_size=6), st.data())
def test_masked_sample_frequencies_match_the_masked_softmax(logits, data) -> None:
    n = len(logits)
    mask = data.draw(st.lists(st.booleans(), min_size=n, max_size=n))
    mask[data.draw(st.integers(0, n - 1))] = True
    draws = 40_000
    x = torch.tensor(logits, dtype=torch.float64).expand(draws, -1)
    m = torch.tensor(mask).expand(draws, -1)
    noise = torch.empty_like(x).exponential_(generator=torch.Generator().manual_seed(data.draw(st.integers(0, 99))))
    counts = torch.bincount(core.masked_categorical_sample(x, m, noise), minlength=n).double() / draws
    expected = torch.tensor(ref_masked_softmax(logits, mask), dtype=torch.float64)
    stderr = (expected * (1 - expected) / draws).sqrt()
    assert torch.all((counts - expected).abs() <= 6 * stderr + 1e-12), (counts, expected)


@given(masked_case(), dtypes)
def test_an_all_true_mask_is_bit_identical_to_the_unmasked_categorical(case, dtype) -> None:
    logits, _ = case
    x = as_tensor(logits, dtype).requires_grad_(True)
    y = x.detach().clone().requires_grad_(True)
    ones = torch.ones(x.shape, dtype=torch.bool)
    action = torch.zeros(x.shape[0], dtype=torch.long)
    dist = torch.distributions.Categorical(logits=y, validate_args=False)
    a = core.masked_log_prob_and_entropy(x, ones, action)
    b = dist.log_prob(action), dist.entropy()
    for u, v in zip(a, b, strict=True):
        assert torch.equal(u, v)
    assert torch.equal(core.masked_entropy(x, ones), b[1]) and torch.equal(core.masked_log_prob(x, ones, action), b[0])
    (a[0].sum() + a[1].sum()).backward()
    (b[0].sum() + b[1].sum()).backward()
    assert torch.equal(x.grad, y.grad)
    noise = torch.empty_like(x).exponential_(generator=torch.Generator().manual_seed(0))
    assert torch.equal(core.masked_categorical_sample(x.detach(), ones, noise),
                       core.categorical_sample(x.detach(), noise))


@st.composite
def multi_discrete_case(draw):
    sizes = draw(st.lists(st.integers(1, 5), min_size=1, max_size=4))
    if all(n < 2 for n in sizes):
        sizes[0] = 2
    rows = draw(st.integers(1, 5))
    logits = draw(arrays((rows, sum(sizes)), 20.0))
    mask = np.array(draw(st.lists(st.booleans(), min_size=rows * sum(sizes), max_size=rows * sum(sizes))),
                    dtype=bool).reshape(rows, sum(sizes))
    for r in range(rows):
        start = 0
        for n in sizes:
            if not mask[r, start:start + n].any():
                mask[r, start + draw(st.integers(0, n - 1))] = True
            start += n
    return sizes, logits, mask


@given(multi_discrete_case(), dtypes)
@example(([3, 1], np.zeros((1, 4), np.float32), np.array([[True, False, False, True]])), torch.float32)
def test_per_state_entropy_normalisation_matches_the_reference(case, dtype) -> None:
    """``0.01 * sum_k H_k(s) / sum_k ln n_legal,k(s)``, 0 where no component has two legal actions; and the
    weight form ``c * w(s) * H(s)`` the update uses gives the same bonus, with w = 1 exactly when all are legal."""
    sizes, logits, mask = case
    x, m = as_tensor(logits, dtype), torch.as_tensor(mask)
    entropy = sum(core.masked_entropy(p, q) for p, q in zip(x.split(sizes, -1), m.split(sizes, -1), strict=True))
    bonus = call_pure(core.normalized_entropy_bonus, entropy, m, sizes)
    weight = call_pure(core.entropy_weight, m, sizes)
    coef = core.multi_discrete_entropy_coef(sizes)
    for r in range(logits.shape[0]):
        h, denom, start = 0.0, 0.0, 0
        for n in sizes:
            p = ref_masked_softmax(logits[r, start:start + n], mask[r, start:start + n])
            h += ref_entropy(p)
            denom += math.log(int(mask[r, start:start + n].sum()))
            start += n
        expected = 0.01 * h / denom if denom > 0 else 0.0
        assert abs(float(bonus[r]) - expected) <= 1e-5 * max(1.0, expected) + tol(dtype, 100.0) * 0.01
        assert abs(coef * float(weight[r]) * float(entropy[r]) - expected) <= 1e-5 * max(1.0, expected) + 1e-9
        if denom == 0:
            assert float(weight[r]) == 0.0 and float(bonus[r]) == 0.0
    assert torch.all(core.entropy_weight(torch.ones_like(m), sizes) == 1.0)  # exactly


@given(st.integers(2, 40))
def test_entropy_weight_of_an_all_true_mask_is_exactly_one_for_a_discrete_space(n) -> None:
    ones = torch.ones(3, n, dtype=torch.bool)
    assert torch.all(core.entropy_weight(ones, [n]) == 1.0)
    one_legal = torch.zeros(3, n, dtype=torch.bool)
    one_legal[:, 0] = True
    assert torch.all(core.entropy_weight(one_legal, [n]) == 0.0)


@st.composite
def bernoulli_case(draw):
    rows, n = draw(st.integers(1, 5)), draw(st.integers(1, 6))
    logits = draw(arrays((rows, n), 30.0))
    mask = np.array(draw(st.lists(st.booleans(), min_size=rows * n, max_size=rows * n)), dtype=bool).reshape(rows, n)
    bits = np.array(draw(st.lists(st.booleans(), min_size=rows * n, max_size=rows * n)), dtype=bool).reshape(rows, n)
    return logits, mask, bits & mask


def ref_log_sigmoid(x: float) -> float:
    return -math.log1p(math.exp(-x)) if x >= 0 else x - math.log1p(math.exp(x))


def ref_sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x)) if x >= 0 else math.exp(x) / (1.0 + math.exp(x))


@given(bernoulli_case(), dtypes)
def test_bernoulli_log_prob_entropy_and_the_bit_that_may_not_be_set(case, dtype) -> None:
    logits, mask, bits = case
    x, m = as_tensor(logits, dtype).requires_grad_(True), torch.as_tensor(mask)
    b = torch.as_tensor(bits).long()
    log_prob = call_pure(core.bernoulli_log_prob, x, b, m)
    entropy = call_pure(core.bernoulli_entropy, x, m)
    (log_prob.sum() + entropy.sum()).backward()
    log_prob, entropy = log_prob.detach(), entropy.detach()
    assert torch.isfinite(x.grad).all() and torch.all(x.grad[~m] == 0.0)
    for r in range(logits.shape[0]):
        lp, h = 0.0, 0.0
        for i in range(logits.shape[1]):
            if not mask[r, i]:
                continue  # forced 0 with probability 1: log 1 = 0, entropy 0
            p1 = ref_sigmoid(float(logits[r, i]))
            lp += ref_log_sigmoid(float(logits[r, i]) if bits[r, i] else -float(logits[r, i]))
            h += -sum(q * math.log(q) for q in (p1, 1 - p1) if q > 0)
        assert abs(float(log_prob[r]) - lp) <= tol(dtype, 200.0)
        assert abs(float(entropy[r]) - h) <= tol(dtype, 10.0)
        assert float(entropy[r]) <= mask[r].sum() * math.log(2) + tol(dtype)
    # a forbidden bit set to 1 has probability exactly zero
    if (~mask).any():
        forced = b.clone()
        forced[torch.as_tensor(~mask)] = 1
        assert torch.all(core.bernoulli_log_prob(x.detach(), forced, m).exp()[torch.as_tensor(~mask).any(-1)] == 0.0)
    # the summed rule with ln 2 per free bit
    n = logits.shape[1]
    as_cat = core.bernoulli_mask_as_categorical(m)
    expected = torch.tensor([0.01 * float(entropy[r]) / (mask[r].sum() * math.log(2)) if mask[r].any() else 0.0
                             for r in range(len(mask))])
    got = core.normalized_entropy_bonus(entropy.detach().double(), as_cat, [2] * n)
    assert torch.allclose(got, expected.double(), rtol=1e-5, atol=1e-9)


@given(bernoulli_case(), st.integers(0, 2**31 - 1))
def test_bernoulli_sample_and_mode_never_set_a_forbidden_bit(case, seed) -> None:
    logits, mask, _ = case
    x, m = torch.as_tensor(logits), torch.as_tensor(mask)
    uniform = torch.rand(x.shape, generator=torch.Generator().manual_seed(seed))
    uniform[:, 0] = 0.0
    for bits in (core.bernoulli_sample(x, uniform, m), core.bernoulli_mode(x, m)):
        assert bits.dtype == torch.long and torch.all(bits[~m] == 0)
    assert torch.equal(core.bernoulli_mode(x), (x > 0).long())


def test_masks_refuse_bad_input_with_one_line() -> None:
    x = torch.zeros(2, 3)
    for bad, needle in ((torch.ones(2, 3), "bool"), (torch.ones(2, 4, dtype=torch.bool), "shape")):
        try:
            core.masked_logits(x, bad)
        except ValueError as exc:
            assert needle in str(exc) and "\n" not in str(exc)
        else:
            raise AssertionError("no ValueError")
    for call in (lambda: core.legal_log_count(torch.ones(2, 3, dtype=torch.bool), [2, 2]),
                 lambda: core.entropy_weight(torch.ones(2, 2, dtype=torch.bool), [1, 1]),
                 lambda: core.masked_log_prob(x, torch.ones(2, 3, dtype=torch.bool), torch.zeros(2, 1).long())):
        try:
            call()
        except ValueError:
            pass
        else:
            raise AssertionError("no ValueError")
