"""Property tests of the statistics in ``core``: advantage normalisation, PPO diagnostics
(approx_kl, clip_fraction, explained_variance) and running moments for observation normalisation.

References: the k3 estimator ``(r - 1) - log r`` (John Schulman, "Approximating KL Divergence",
http://joschu.net/blog/kl-approx.html); Chan, Golub and LeVeque 1979 for merging moments, checked
here against numpy's mean/var of the concatenated data.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import assume, example, given
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

# ---------------------------------------------------------------- normalize_advantages


def normalize_reference(advantages, eps_abs: float = 1e-8, rtol: float = 1e-5):
    """(A - mean) / std with the population std; zeros when std <= eps + rtol * |mean|.
    Returns (normalised list, mean, std, threshold)."""
    values = [float(a) for a in advantages]
    mean = sum(values) / len(values)
    std = math.sqrt(sum((a - mean) ** 2 for a in values) / len(values))
    threshold = eps_abs + rtol * abs(mean)
    if std > threshold:
        return [(a - mean) / std for a in values], mean, std, threshold
    return [0.0] * len(values), mean, std, threshold


advantage_arrays = st.one_of(
    st.integers(1, 64).map(lambda b: (b,)), st.tuples(st.integers(1, 8), st.integers(1, 8))
).flatmap(lambda shape: arrays(shape, 1e3))


@given(adv=advantage_arrays, dtype=dtypes)
@example(adv=np.array([3.5], np.float32), dtype=torch.float32)  # a minibatch of one
def test_normalize_advantages_matches_reference(adv, dtype) -> None:
    shape = adv.shape
    adv_t = as_tensor(adv, dtype)
    out = call_pure(core.normalize_advantages, adv_t)
    assert_meta(out, adv_t, adv_t.shape)
    expected, mean, std, threshold = normalize_reference(adv.ravel())
    assume(std == 0.0 or not threshold / 2 <= std <= 2 * threshold)  # the float32 decision may flip there
    if std > threshold:
        # Centring costs eps * (|A| + |mean|), amplified by 1 / std.
        atol = 16 * eps(dtype) * (np.abs(adv).max() + abs(mean) + std) / std * 8
        assert_close(out, np.reshape(expected, shape), atol=atol)
        assert abs(out.double().mean().item()) < atol
        assert abs(out.double().pow(2).mean().sqrt().item() - 1.0) < atol
    else:
        assert torch.equal(out, torch.zeros_like(out))


@given(value=finite_floats(1e6), size=st.integers(1, 64), dtype=dtypes)
@example(value=0.1, size=7, dtype=torch.float32)  # float32 mean of 7 x 0.1 is not 0.1: tiny centred values
@example(value=3e5, size=1, dtype=torch.float32)
def test_normalize_advantages_zero_spread_gives_zeros(value, size, dtype) -> None:
    out = core.normalize_advantages(torch.full((size,), value, dtype=dtype))
    assert torch.isfinite(out).all()
    assert torch.equal(out, torch.zeros_like(out))


def test_normalize_advantages_hand_worked_example() -> None:
    # [1, 3]: mean 2, population std sqrt(((1-2)^2 + (3-2)^2) / 2) = 1 -> [-1, 1]
    # [5]: one sample, no spread -> [0]
    assert torch.equal(core.normalize_advantages(torch.tensor([1.0, 3.0])), torch.tensor([-1.0, 1.0]))
    assert torch.equal(core.normalize_advantages(torch.tensor([5.0])), torch.tensor([0.0]))


@pytest.mark.parametrize("bad", [torch.zeros(0), torch.ones(3, dtype=torch.long)])
def test_normalize_advantages_rejects_empty_and_integer_input(bad) -> None:
    with pytest.raises(ValueError):
        core.normalize_advantages(bad)


# ---------------------------------------------------------------- approx_kl and clip_fraction


@st.composite
def log_prob_pairs(draw, *, log_ratio_bound: float = 5.0):
    batch = draw(st.integers(1, 64))
    old = draw(arrays(batch, 20.0))
    log_ratio = draw(arrays(batch, log_ratio_bound))
    new = (old.astype(np.float64) + log_ratio.astype(np.float64)).astype(np.float32)
    return new, old, draw(dtypes)


def approx_kl_reference(new_log_prob, old_log_prob) -> tuple[float, float]:
    """mean((r - 1) - log r) with r = exp(new - old); also the scale of the terms."""
    total, scale = 0.0, 0.0
    for new, old in zip(new_log_prob, old_log_prob, strict=True):
        log_ratio = float(new) - float(old)
        ratio = math.exp(log_ratio)
        total += (ratio - 1.0) - log_ratio
        scale += (ratio + 1.0) * (abs(log_ratio) + 1.0)
    return total / len(new_log_prob), scale / len(new_log_prob)


@given(pair=log_prob_pairs())
def test_approx_kl_matches_k3_reference_and_is_never_negative(pair) -> None:
    new, old, dtype = pair
    new_t, old_t = as_tensor(new, dtype), as_tensor(old, dtype)
    kl = call_pure(core.approx_kl, new_t, old_t)
    assert_meta(kl, new_t, ())
    expected, scale = approx_kl_reference(new, old)
    assert_close(kl, expected, atol=16 * eps(dtype) * scale + 4 * 2.0**-52)
    assert kl.item() >= 0.0
    assert core.approx_kl(old_t, old_t).item() == 0.0


def test_approx_kl_hand_worked_example() -> None:
    # log-ratios (ln 2, 0): r = 2 gives (2 - 1) - ln 2 = 0.3068528194; r = 1 gives 0. Mean: 0.1534264097
    kl = core.approx_kl(torch.tensor([math.log(2.0), 0.0], dtype=torch.float64), torch.zeros(2, dtype=torch.float64))
    assert abs(kl.item() - 0.1534264097) < 1e-10


@given(pair=log_prob_pairs(log_ratio_bound=1.0), clip_coef=st.floats(0.01, 0.9))
def test_clip_fraction_matches_reference(pair, clip_coef) -> None:
    new, old, dtype = pair
    ratios = [math.exp(float(n) - float(o)) for n, o in zip(new, old, strict=True)]
    # Within rounding of a clip bound float32 and float64 may disagree; such draws say nothing.
    assume(all(abs(abs(r - 1.0) - clip_coef) > 1e-5 for r in ratios))
    new_t, old_t = as_tensor(new, dtype), as_tensor(old, dtype)
    fraction = call_pure(core.clip_fraction, new_t, old_t, clip_coef)
    assert_meta(fraction, new_t, ())
    expected = sum(abs(r - 1.0) > clip_coef for r in ratios) / len(ratios)
    assert_close(fraction, expected, atol=4 * eps(dtype))
    assert 0.0 <= fraction.item() <= 1.0


def test_clip_fraction_hand_worked_example() -> None:
    # ratios (2, 1, 0.5, 1.1), clip_coef 0.2: |r - 1| = (1, 0, 0.5, 0.1), two of four exceed 0.2 -> 0.5
    new = torch.log(torch.tensor([2.0, 1.0, 0.5, 1.1], dtype=torch.float64))
    assert core.clip_fraction(new, torch.zeros(4, dtype=torch.float64), 0.2).item() == 0.5


@pytest.mark.parametrize("fn", [core.approx_kl, lambda a, b: core.clip_fraction(a, b, 0.2)])
def test_diagnostics_reject_mismatched_shapes(fn) -> None:
    with pytest.raises(ValueError):
        fn(torch.zeros(4), torch.zeros(4, 1))


# ---------------------------------------------------------------- explained_variance


def explained_variance_reference(values, returns) -> tuple[float, float]:
    """1 - Var[R - V] / Var[R] with population variances, 0 when Var[R] = 0. Also an error scale."""
    n = len(returns)
    ret = [float(r) for r in returns]
    res = [float(r) - float(v) for r, v in zip(returns, values, strict=True)]
    mean_r, mean_res = sum(ret) / n, sum(res) / n
    var_r = sum((r - mean_r) ** 2 for r in ret) / n
    var_res = sum((x - mean_res) ** 2 for x in res) / n
    if var_r == 0.0:
        return 0.0, 0.0
    second_r, second_res = sum(r * r for r in ret) / n, sum(x * x for x in res) / n
    return 1.0 - var_res / var_r, (second_res + abs(var_res / var_r) * second_r) / var_r


@st.composite
def value_return_pairs(draw):
    batch = draw(st.integers(1, 64))
    return draw(arrays(batch, 100.0)), draw(arrays(batch, 100.0)), draw(dtypes)


@given(pair=value_return_pairs())
@example(  # shrunk: the final 1 - ratio rounds by eps / 2 on its own
    pair=(np.array([45.0, 43.0, 1.0], np.float32), np.array([46.0, 44.0, 1.0], np.float32), torch.float32)
)
def test_explained_variance_matches_reference(pair) -> None:
    values, returns, dtype = pair
    # Zero variance: the tests below. A spread tiny next to |R| leaves nothing float32 can
    # measure (and at 1e-38 its variance underflows to 0): draw well-conditioned returns here.
    assume(np.ptp(returns) > 1e-3 * (1.0 + np.abs(returns).max()))
    values_t, returns_t = as_tensor(values, dtype), as_tensor(returns, dtype)
    ev = call_pure(core.explained_variance, values_t, returns_t)
    assert_meta(ev, values_t, ())
    expected, scale = explained_variance_reference(values, returns)
    assert_close(ev, expected, atol=64 * eps(dtype) * scale + 2 * eps(dtype) * (1 + abs(expected)))
    assert ev.item() <= 1.0
    assert core.explained_variance(returns_t, returns_t).item() == 1.0  # a perfect critic


@given(pair=value_return_pairs(), offset=finite_floats(100.0))
def test_explained_variance_ignores_a_constant_offset(pair, offset) -> None:
    _, returns, dtype = pair
    assume(np.ptp(returns) > 1e-3 * (1.0 + np.abs(returns).max()))  # see above
    returns_t = as_tensor(returns, dtype)
    ev = core.explained_variance(returns_t + offset, returns_t)
    _, scale = explained_variance_reference(returns.astype(np.float64) + offset, returns)
    assert_close(ev, 1.0, atol=64 * eps(dtype) * (scale + 1))


@given(values=st.lists(finite_floats(100.0), min_size=1, max_size=64), constant=finite_floats(1e3), dtype=dtypes)
def test_explained_variance_zero_variance_returns_is_never_nan(values, constant, dtype) -> None:
    values_t = as_tensor(values, dtype)
    ev = core.explained_variance(values_t, torch.full_like(values_t, constant))
    assert not torch.isnan(ev)


@given(values=st.lists(finite_floats(100.0), min_size=1, max_size=64), constant=finite_floats(1e3), dtype=dtypes)
@example(values=[0.0, 1.0, 0.0, 1.0, 0.0, 1.0, 0.0], constant=0.1, dtype=torch.float32)
@example(values=[0.0, 1.0, 2.0], constant=0.1, dtype=torch.float64)
@example(values=[0.0, 0.0, 0.0, 0.0, 0.0, 1.0], constant=64.56004333496094, dtype=torch.float32)  # shrunk
def test_explained_variance_zero_variance_returns_gives_zero(values, constant, dtype) -> None:
    """Documented: "When the returns have zero variance ... this returns 0"."""
    values_t = as_tensor(values, dtype)
    ev = core.explained_variance(values_t, torch.full_like(values_t, constant))
    assert ev.item() == 0.0, f"explained_variance of constant returns {constant} is {ev.item()}, not 0"


def test_explained_variance_hand_worked_example() -> None:
    # R = (1, 2, 3), V = (1, 2, 4): Var[R] = 2/3; R - V = (0, 0, -1), Var = 1/3 - 1/9 = 2/9
    #   1 - (2/9) / (2/3) = 1 - 1/3 = 2/3
    ev = core.explained_variance(torch.tensor([1.0, 2.0, 4.0]), torch.tensor([1.0, 2.0, 3.0]))
    assert abs(ev.item() - 2.0 / 3.0) < 1e-6


# ---------------------------------------------------------------- batch_moments / merge_moments


@st.composite
def data_batches(draw, *, count: int = 2):
    features = draw(st.integers(1, 4))
    dtype = draw(dtypes)
    parts = [draw(arrays((draw(st.integers(1, 16)), features), 1e3)) for _ in range(count)]
    return parts, dtype


def moments_tolerance(data: np.ndarray, dtype: torch.dtype) -> np.ndarray:
    """Per-feature: a few eps times the data's second moment (what the variance's rounding scales with)."""
    return 64 * eps(dtype) * (np.square(data.astype(np.float64)).max(0) + 1.0)


def _moments(part: np.ndarray, dtype: torch.dtype):
    return core.batch_moments(as_tensor(part, dtype))


@given(batches=data_batches(count=1), extra_dims=st.booleans())
@example(batches=([np.array([[4.0, -2.5]], np.float32)], torch.float32), extra_dims=False)  # B = 1
def test_batch_moments_matches_numpy(batches, extra_dims) -> None:
    (part,), dtype = batches
    if extra_dims:
        part = part[:, :, None].repeat(2, axis=2)
    x = as_tensor(part, dtype)
    mean, var, count = call_pure(core.batch_moments, x)
    assert_meta(mean, x, x.shape[1:])
    assert_meta(var, x, x.shape[1:])
    assert count == part.shape[0]
    assert isinstance(count, int)
    data = part.astype(np.float64)
    tolerance = moments_tolerance(data, dtype)
    assert_close(mean, data.mean(0), atol=tolerance)
    assert_close(var, data.var(0), atol=tolerance)
    if part.shape[0] == 1:
        assert torch.equal(var, torch.zeros_like(var))


@given(batches=data_batches(count=2))
def test_merge_moments_equals_moments_of_concatenated_data(batches) -> None:
    (a, b), dtype = batches
    mean_a, var_a, n_a = _moments(a, dtype)
    mean_b, var_b, n_b = _moments(b, dtype)
    mean, var, count = call_pure(core.merge_moments, mean_a, var_a, n_a, mean_b, var_b, n_b)
    assert_meta(mean, mean_a, mean_a.shape)
    assert_meta(var, mean_a, mean_a.shape)
    whole = np.concatenate([a, b]).astype(np.float64)
    assert count == whole.shape[0]
    tolerance = moments_tolerance(whole, dtype)
    assert_close(mean, whole.mean(0), atol=tolerance)
    assert_close(var, whole.var(0), atol=tolerance)
    # 0-d tensor counts (as an all-reduce would give) agree with int counts.
    counts = (torch.tensor(float(n_a), dtype=torch.float64), torch.tensor(float(n_b), dtype=torch.float64))
    mean_t, var_t, count_t = core.merge_moments(mean_a, var_a, counts[0], mean_b, var_b, counts[1])
    assert count_t.item() == whole.shape[0]
    assert_close(mean_t, whole.mean(0), atol=tolerance)
    assert_close(var_t, whole.var(0), atol=tolerance)


@given(batches=data_batches(count=3))
def test_merge_moments_is_symmetric_and_associative(batches) -> None:
    parts, dtype = batches
    a, b, c = (_moments(p, dtype) for p in parts)
    tolerance = moments_tolerance(np.concatenate(parts), dtype)
    ab, ba = core.merge_moments(*a, *b), core.merge_moments(*b, *a)
    assert ab[2] == ba[2]
    assert_close(ab[0], ba[0].double().numpy(), atol=tolerance)
    assert_close(ab[1], ba[1].double().numpy(), atol=tolerance)
    left = core.merge_moments(*ab, *c)
    right = core.merge_moments(*a, *core.merge_moments(*b, *c))
    assert left[2] == right[2] == sum(p.shape[0] for p in parts)
    assert_close(left[0], right[0].double().numpy(), atol=tolerance)
    assert_close(left[1], right[1].double().numpy(), atol=tolerance)


@given(batches=data_batches(count=1), start=finite_floats(10.0))
def test_merge_moments_with_zero_count_returns_the_other_operand(batches, start) -> None:
    """A fresh running state (any mean/var, count 0) merged with a batch gives the batch's moments."""
    (part,), dtype = batches
    mean_b, var_b, n_b = _moments(part, dtype)
    fresh_mean, fresh_var = torch.full_like(mean_b, start), torch.full_like(var_b, abs(start))
    tolerance = moments_tolerance(part, dtype) + 8 * eps(dtype) * abs(start)
    for merged in (
        core.merge_moments(fresh_mean, fresh_var, 0, mean_b, var_b, n_b),
        core.merge_moments(mean_b, var_b, n_b, fresh_mean, fresh_var, 0),
    ):
        assert merged[2] == n_b
        assert_close(merged[0], mean_b.double().numpy(), atol=tolerance)
        assert_close(merged[1], var_b.double().numpy(), atol=tolerance)


def test_merge_moments_hand_worked_example() -> None:
    # a = [1, 3]: mean 2, var 1, n 2.  b = [5]: mean 5, var 0, n 1.  Together [1, 3, 5]: mean 3, var 8/3.
    #   delta = 3, mean = 2 + 3 * 1/3 = 3, M2 = 1*2 + 0*1 + 9 * 2*1/3 = 8, var = 8/3
    mean, var, count = core.merge_moments(
        torch.tensor([2.0], dtype=torch.float64),
        torch.tensor([1.0], dtype=torch.float64),
        2,
        torch.tensor([5.0], dtype=torch.float64),
        torch.tensor([0.0], dtype=torch.float64),
        1,
    )
    assert count == 3
    assert abs(mean.item() - 3.0) < 1e-12
    assert abs(var.item() - 8.0 / 3.0) < 1e-12
    # batch_moments of [[1, 10], [3, 10]]: mean [2, 10], var [1, 0], count 2
    bm = core.batch_moments(torch.tensor([[1.0, 10.0], [3.0, 10.0]]))
    assert torch.equal(bm[0], torch.tensor([2.0, 10.0]))
    assert torch.equal(bm[1], torch.tensor([1.0, 0.0]))
    assert bm[2] == 2


def _host(x: torch.Tensor):
    """A float64 tensor as the shell keeps host statistics: a NumPy array, or a NumPy scalar when 0-d."""
    return x.numpy() if x.dim() else np.float64(x.item())


@given(batches=data_batches(count=3), host_counts=st.booleans(), zero_dims=st.booleans())
def test_merge_moments_on_host_values_gives_the_bits_of_tensors(batches, host_counts, zero_dims) -> None:
    """NumPy arrays, NumPy scalars and Python floats go through the same arithmetic: every merge of a running chain
    gives the float64 tensors' bits, with tensor counts (the device's way) or Python-float counts."""
    parts, _ = batches
    if zero_dims:
        parts = [p[:, 0] for p in parts]
    stats = [core.batch_moments(torch.as_tensor(p, dtype=torch.float64)) for p in parts]
    tensors = [(m, v, torch.tensor(float(n), dtype=torch.float64)) for m, v, n in stats]
    host = [(_host(m), _host(v), float(n)) for m, v, n in stats]
    if not host_counts:  # the tensors' counts as the ints batch_moments gives
        tensors = [(m, v, n) for m, v, n in stats]
    running_t, running_h = tensors[0], host[0]
    for t, h in zip(tensors[1:], host[1:], strict=True):
        running_t, running_h = core.merge_moments(*running_t, *t), core.merge_moments(*running_h, *h)
        for tensor, value in zip(running_t, running_h, strict=True):
            as_float64 = (torch.as_tensor(x, dtype=torch.float64) for x in (tensor, value))
            assert torch.equal(*as_float64)


@given(values=arrays(st.integers(1, 64).map(lambda n: (n,)), 1e18), dtype=dtypes)
def test_torch_pow_2_is_the_product_merge_moments_writes(values, dtype) -> None:
    """merge_moments squares as ``delta * delta``, which is torch's own ``pow(2)`` (bit for bit)."""
    x = torch.as_tensor(values, dtype=torch.float64).to(dtype)
    assert torch.equal(x.pow(2), x * x)


def test_merge_moments_refuses_mixed_or_non_float_statistics() -> None:
    t, a = torch.zeros(3, dtype=torch.float64), np.zeros(3)
    with pytest.raises(ValueError, match="all tensors or all host values"):
        core.merge_moments(t, t, 1.0, a, a, 1.0)
    with pytest.raises(ValueError, match="batch_var must be a float array or number, got ndarray int64"):
        core.merge_moments(a, a, 1.0, a, np.zeros(3, dtype=np.int64), 1.0)
    with pytest.raises(ValueError, match="shape mismatch"):
        core.merge_moments(a, a, 1.0, np.zeros(4), np.zeros(4), 1.0)
    with pytest.raises(ValueError, match="batch_count is a tensor but the statistics are host values"):
        core.merge_moments(a, a, 1.0, a, a, torch.tensor(1.0))
    with pytest.raises(ValueError, match=r"count must be a floating-point tensor, got dtype torch\.int64"):
        core.merge_moments(t, t, torch.tensor(3), t, t, torch.tensor(1.0))
    with pytest.raises(ValueError, match="count must be >= 0, got -1"):
        core.merge_moments(t, t, -1, t, t, 2)
    mean, var, count = core.merge_moments(2.0, 1.0, 2.0, 5.0, 0.0, 1.0)  # Python floats: the hand-worked example
    assert (mean, var, count) == (3.0, 8.0 / 3.0, 3.0)


def test_merge_moments_rejects_a_zero_total_count() -> None:
    z = torch.zeros(3)
    with pytest.raises(ValueError):
        core.merge_moments(z, z, 0, z, z, 0)
    with pytest.raises(ValueError):
        core.merge_moments(z, z, 0, z, torch.zeros(4), 1)


def test_merge_moments_zero_total_tensor_count_is_finite() -> None:
    """Documented: tensor counts are not checked on the host; a zero total gives finite values, count 0."""
    z = torch.zeros(3)
    mean, var, count = core.merge_moments(z + 1, z + 2, torch.tensor(0.0), z, z, torch.tensor(0.0))
    assert torch.isfinite(mean).all() and torch.isfinite(var).all() and float(count) == 0.0


@pytest.mark.parametrize("bad", [torch.zeros(()), torch.zeros(0, 3), torch.zeros(2, 3, dtype=torch.long)])
def test_batch_moments_rejects_scalars_empty_and_integer_batches(bad) -> None:
    with pytest.raises(ValueError):
        core.batch_moments(bad)


# ---------------------------------------------------------------- normalize_obs


@st.composite
def obs_cases(draw):
    features = draw(st.integers(1, 4))
    batch = tuple(draw(st.lists(st.integers(1, 6), max_size=2)))
    var = draw(arrays(features, 1e3, min_value=0.0))
    return {
        "obs": draw(arrays((*batch, features), 1e3)),
        "mean": draw(arrays(features, 1e3)),
        "var": var,
        "clip": draw(st.one_of(st.just(10.0), st.floats(0.1, 20.0))),
        "dtype": draw(dtypes),
    }


@given(case=obs_cases())
@example(
    case={
        "obs": np.array([[3.0, 5.0]], np.float32),
        "mean": np.array([3.0, 0.0], np.float32),
        "var": np.zeros(2, np.float32),
        "clip": 10.0,
        "dtype": torch.float32,
    }
)  # never-varying features
def test_normalize_obs_matches_reference(case) -> None:
    dtype, clip = case["dtype"], case["clip"]
    obs, mean, var = (as_tensor(case[k], dtype) for k in ("obs", "mean", "var"))
    out = call_pure(core.normalize_obs, obs, mean, var, clip=clip)
    assert_meta(out, obs, obs.shape)
    o = case["obs"].astype(np.float64)
    expected = np.zeros_like(o)
    for idx in np.ndindex(*o.shape):
        s = idx[-1]
        z = (o[idx] - float(case["mean"][s])) / math.sqrt(float(case["var"][s]) + 1e-8)
        expected[idx] = min(max(z, -clip), clip)
    assert_close(out, expected, atol=8 * eps(dtype) * (np.abs(expected) + 1e-30))
    assert (out.abs() <= clip).all()


def test_normalize_obs_hand_worked_example() -> None:
    # obs (3, -100), mean (1, 0), var (4, 1), eps 0: (3 - 1) / 2 = 1, -100 / 1 = -100 -> clipped to -10
    out = core.normalize_obs(torch.tensor([3.0, -100.0]), torch.tensor([1.0, 0.0]), torch.tensor([4.0, 1.0]), eps=0.0)
    assert torch.equal(out, torch.tensor([1.0, -10.0]))


@pytest.mark.parametrize(
    ("obs", "mean", "var"),
    [
        (torch.zeros(5, 3), torch.zeros(4), torch.ones(4)),
        (torch.zeros(5, 3), torch.zeros(3), torch.ones(4)),
        (torch.zeros(3), torch.zeros(2, 3), torch.ones(2, 3)),
    ],
)
def test_normalize_obs_rejects_mismatched_statistics(obs, mean, var) -> None:
    with pytest.raises(ValueError):
        core.normalize_obs(obs, mean, var)



@given(values=st.lists(st.floats(-1e3, 1e3, allow_nan=False), min_size=1, max_size=50),
       split=st.integers(0, 50))
def test_mean_std_from_sums_matches_numpy_and_merges(values, split) -> None:
    x = torch.tensor(values, dtype=torch.float64)
    a, b = x[:split], x[split:]
    sums = [torch.stack((p.sum(), p.square().sum(), torch.tensor(float(p.numel()), dtype=torch.float64)))
            for p in (a, b)]
    total = sums[0] + sums[1]  # what an all_reduce over two processes gives
    mean, std = core.mean_std_from_sums(total[0], total[1], total[2])
    ref = np.asarray(values, dtype=np.float64)
    np.testing.assert_allclose(float(mean), ref.mean(), rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(float(std), ref.std(), rtol=1e-6, atol=1e-4)


def test_scale_rewards_hand_example() -> None:
    # Var[R] = 4 - 1e-8 -> divide by 2 (eps restores 4); 30 / 2 = 15 clips to 10.
    out = core.scale_rewards(torch.tensor([1.0, -3.0, 30.0]), torch.tensor(4.0 - 1e-8, dtype=torch.float64), clip=10.0)
    assert out.dtype == torch.float32
    assert torch.allclose(out, torch.tensor([0.5, -1.5, 10.0]))


# ---------------------------------------------------------------- discounted_return_step


@given(st.integers(1, 12), st.integers(1, 4), st.floats(0.0, 1.0), st.data(), dtypes)
def test_discounted_return_step_matches_a_per_env_loop(T, N, gamma, data, dtype) -> None:
    """Stepping through [T, N] rewards equals R_t = gamma R_{t-1} + r_t restarted after each done."""
    rewards = data.draw(arrays((T, N), 10.0))
    dones = data.draw(st.lists(st.lists(st.booleans(), min_size=N, max_size=N), min_size=T, max_size=T))
    running = torch.zeros(N, dtype=dtype)
    for t in range(T):
        r_t = as_tensor(rewards[t], dtype)
        done_t = torch.tensor(dones[t])
        returns, running = call_pure(core.discounted_return_step, running, r_t, done_t, gamma)
        assert_meta(returns, r_t, (N,))
        for i in range(N):  # the reference: a plain loop over this env's history since its last done
            start = max((k + 1 for k in range(t) if dones[k][i]), default=0)
            expected = 0.0
            for k in range(start, t + 1):
                expected = gamma * expected + float(rewards[k, i])
            tol = 8 * eps(dtype) * sum(abs(float(rewards[k, i])) for k in range(start, t + 1)) + 1e-30
            assert abs(float(returns[i]) - expected) <= tol, (t, i)
            assert float(running[i]) == (0.0 if dones[t][i] else float(returns[i]))


def test_discounted_return_step_rejects_bad_inputs() -> None:
    z = torch.zeros(3)
    with pytest.raises(ValueError, match="shape"):
        core.discounted_return_step(z, torch.zeros(3, 1), torch.zeros(3, dtype=torch.bool), 0.9)
    with pytest.raises(ValueError, match="dtype"):
        core.discounted_return_step(z.double(), z, torch.zeros(3, dtype=torch.bool), 0.9)
    with pytest.raises(ValueError, match="gamma"):
        core.discounted_return_step(z, z, torch.zeros(3, dtype=torch.bool), 1.5)
    with pytest.raises(ValueError, match="done"):
        core.discounted_return_step(z, z, torch.zeros(3, dtype=torch.long), 0.9)
