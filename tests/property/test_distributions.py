"""Property tests of the tanh-squashed Gaussian and the entropy coefficients in ``core``.

References:
- "Soft Actor-Critic", Haarnoja et al., 2018 (arXiv:1801.01290), appendix C, eq. (21):
  for ``a = tanh(u) * scale + bias`` with ``u ~ N(mean, std)``,
  ``log p(a) = sum_i [ log N(u_i; mean_i, std_i) - log(scale_i * (1 - tanh(u_i)^2)) ]``.
- The entropy of a uniform Categorical over n actions is ln(n).

The float64 references use Python's ``math``. ``log(1 - tanh(u)^2)`` is taken as written for
moderate ``|u|`` (its own rounding error, ``eps / (1 - tanh(u)^2)``, is added to the tolerance),
and as the exact identity ``-2 log cosh(u)`` where ``|u|`` reaches 30.
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

LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)
# torch's softplus returns x itself above x = 20, dropping log1p(exp(-x)) <= e^-20; the stable
# log-Jacobian doubles it. Far below float32's resolution, but visible in float64 for u < -10.
SOFTPLUS_THRESHOLD_ERROR = 2.0 * math.exp(-20.0)
SOFTPLUS_THRESHOLD_GRAD_ERROR = 4.0 * math.exp(-20.0)  # the same in the derivative: 2 * 2 * sigmoid's tail
EPS64 = 2.0**-52

# ---------------------------------------------------------------- references


def log_normal_reference(x: float, mean: float, std: float) -> float:
    return -0.5 * ((x - mean) / std) ** 2 - math.log(std) - LOG_SQRT_2PI


def log_jacobian_naive(u: float, scale: float) -> float:
    """log|da/du| = log(scale * (1 - tanh(u)^2)), as written (moderate |u| only)."""
    return math.log(scale * (1.0 - math.tanh(u) ** 2))


def log_jacobian_cosh(u: float, scale: float) -> float:
    """The same quantity via 1 - tanh(u)^2 = 1 / cosh(u)^2, exact in float64 for |u| <= 700."""
    return math.log(scale) - 2.0 * math.log(math.cosh(u))


def naive_reference_error(u: float) -> float:
    """Rounding error of log(1 - tanh(u)^2) evaluated as written in float64."""
    return 4.0 * EPS64 / (1.0 - math.tanh(u) ** 2)


def squashed_log_prob_reference(u, mean, std, scale):
    """``[..., A]`` float64 arrays (already broadcast) -> (``[...]`` log-probs, ``[...]`` tolerances
    in units of eps: the sum of the terms' magnitudes, and the reference's own error)."""
    out = np.zeros(u.shape[:-1])
    magnitude = np.zeros(u.shape[:-1])
    own_error = np.zeros(u.shape[:-1])
    for idx in np.ndindex(*u.shape[:-1]):
        for i in range(u.shape[-1]):
            x, m, s, c = (float(a[(*idx, i)]) for a in (u, mean, std, scale))
            log_n, log_j = log_normal_reference(x, m, s), log_jacobian_naive(x, c)
            out[idx] += log_n - log_j
            magnitude[idx] += abs(log_n) + abs(log_j) + 0.5 * ((x - m) / s) ** 2 + abs(x) + 2.0
            own_error[idx] += naive_reference_error(x)
    return out, magnitude, own_error


def elementwise(fn, *arrays) -> np.ndarray:
    """Apply a scalar ``math`` function element by element (float64), with numpy broadcasting."""
    arrays = np.broadcast_arrays(*(np.asarray(a, np.float64) for a in arrays))
    flat = [fn(*(float(x) for x in xs)) for xs in zip(*(a.ravel() for a in arrays), strict=True)]
    return np.asarray(flat, dtype=np.float64).reshape(arrays[0].shape)


# ---------------------------------------------------------------- strategies


@st.composite
def squashed_cases(draw, *, u_bound: float = 6.0, dtype=None):
    """raw_action [..., A]; mean/std either full [..., A] or [A]; action_scale a float or an [A] tensor."""
    batch = tuple(draw(st.lists(st.integers(1, 4), max_size=2)))
    num_actions = draw(st.integers(1, 4))
    shape = (*batch, num_actions)
    dtype = draw(dtypes) if dtype is None else dtype
    mean = draw(arrays(draw(st.sampled_from([shape, (num_actions,)])), 3.0))
    std = draw(arrays(draw(st.sampled_from([shape, (num_actions,)])), 3.0, min_value=0.05))
    if draw(st.booleans()):
        scale = draw(finite_floats(5.0, min_value=0.1))
        scale_arg = scale
    else:
        scale = draw(arrays(num_actions, 5.0, min_value=0.1))
        scale_arg = as_tensor(scale, dtype)
    bias = draw(arrays(num_actions, 5.0))
    return {
        "u": draw(arrays(shape, u_bound)),
        "mean": mean,
        "std": std,
        "scale": scale,
        "scale_arg": scale_arg,
        "bias": bias,
        "dtype": dtype,
        "shape": shape,
    }


def _full(case, key) -> np.ndarray:
    return np.broadcast_to(np.asarray(case[key], np.float64), case["shape"])


# ---------------------------------------------------------------- squash / unsquash


@given(case=squashed_cases(u_bound=30.0))
def test_squash_matches_reference_and_stays_in_bounds(case) -> None:
    dtype = case["dtype"]
    u = as_tensor(case["u"], dtype)
    bias = as_tensor(case["bias"], dtype)
    action = call_pure(core.squash, u, case["scale_arg"], bias)
    assert_meta(action, u, u.shape)
    scale, b = _full(case, "scale"), _full(case, "bias")
    expected = elementwise(math.tanh, case["u"]) * scale + b
    assert_close(action, expected, atol=4 * eps(dtype) * (np.abs(scale) + np.abs(b)))
    # Rounding is monotone, so the float result never leaves [bias - scale, bias + scale].
    scale_t = torch.as_tensor(case["scale_arg"], dtype=dtype)
    assert (action <= bias + scale_t).all()
    assert (action >= bias - scale_t).all()


@given(case=squashed_cases(u_bound=30.0), width=arrays(4, 5.0, min_value=0.0))
@example(  # Box(-1, 0.2) in float32: tanh(30) * 0.6 - 0.4 = 0.20000002 without the clamp
    case={
        "u": np.full((1,), 30.0, np.float32),
        "mean": np.zeros(1, np.float32),
        "std": np.ones(1, np.float32),
        "scale": 0.6,
        "scale_arg": 0.6,
        "bias": np.full((1,), -0.4, np.float32),
        "dtype": torch.float32,
        "shape": (1,),
    },
    width=np.ones(4, np.float32),
)
def test_squash_with_bounds_stays_inside_them(case, width) -> None:
    """With ``low``/``high`` the action is clamped into them, and moved only where it was outside."""
    dtype = case["dtype"]
    num_actions = case["shape"][-1]
    u = as_tensor(case["u"], dtype)
    scale, bias = np.broadcast_to(case["scale"], (num_actions,)), case["bias"]
    # the Box's own bounds in the working dtype, and some narrower ones
    low = as_tensor(bias - scale * (1.0 - width[:num_actions] / 10.0), dtype)
    high = as_tensor(bias + scale, dtype)
    bias_t = as_tensor(bias, dtype)
    free = core.squash(u, case["scale_arg"], bias_t)
    action = call_pure(core.squash, u, case["scale_arg"], bias_t, low, high)
    assert_meta(action, u, u.shape)
    assert (action >= low).all() and (action <= high).all()
    inside = (free >= low) & (free <= high)
    assert torch.equal(action[inside], free[inside])
    # one-sided
    assert (call_pure(core.squash, u, case["scale_arg"], bias_t, None, high) <= high).all()
    assert (call_pure(core.squash, u, case["scale_arg"], bias_t, low) >= low).all()


@given(case=squashed_cases(), where=st.lists(finite_floats(3.0), min_size=1, max_size=16))
@example(
    case={
        "u": np.zeros(1, np.float32),
        "mean": np.zeros(1, np.float32),
        "std": np.ones(1, np.float32),
        "scale": 2.0,
        "scale_arg": 2.0,
        "bias": np.ones(1, np.float32),
        "dtype": torch.float32,
        "shape": (1,),
    },
    where=[1.0, -1.0, 1.5, -3.0, 3.0],  # exactly at both bounds and beyond them
)
def test_unsquash_is_finite_everywhere_and_inverts_squash_inside(case, where) -> None:
    """Actions at b + w * c for w in [-3, 3]: at or beyond the bounds (|w| >= 1) unsquash is finite
    and saturates to atanh(1 - eps); inside, squash(unsquash(a)) gives a back."""
    dtype = case["dtype"]
    num_actions = case["shape"][-1]
    scale, bias = np.broadcast_to(case["scale"], (num_actions,)), case["bias"]
    w = np.asarray(where, np.float64)[:, None]
    action = as_tensor((bias + w * scale).astype(np.float32), dtype)  # [K, A]
    raw = call_pure(core.unsquash, action, case["scale_arg"], as_tensor(bias, dtype))
    assert_meta(raw, action, action.shape)
    assert torch.isfinite(raw).all()
    limit = math.atanh(1.0 - eps(dtype))
    assert (raw.abs() <= limit * (1 + 4 * eps(dtype))).all()
    # The normalised action that unsquash really saw (the float32 rounding of b + w * c moves it).
    y = (np.asarray(action, np.float64) - bias) / scale
    outside = np.abs(y) >= 1.0
    assert_close(raw[torch.as_tensor(outside)], np.sign(y[outside]) * limit, atol=8 * eps(dtype) * limit)
    inside = ~outside
    # Inside: atanh of the normalised action; its rounding, eps * (|a| + |b|) / c, is amplified by
    # atanh's slope 1 / (1 - y^2).
    y_in = y[inside]
    tolerance = 8 * eps(dtype) * (np.abs(np.asarray(action, np.float64)) + np.abs(bias)) / scale
    assert_close(
        raw[torch.as_tensor(inside)],
        elementwise(math.atanh, y_in),
        atol=tolerance[inside] / (1 - y_in**2) + 8 * eps(dtype) * np.abs(elementwise(math.atanh, y_in)),
    )
    back = core.squash(raw, case["scale_arg"], as_tensor(bias, dtype))
    tolerance = 8 * eps(dtype) * (np.abs(scale) + np.abs(bias)) * np.ones_like(y)
    assert_close(back[torch.as_tensor(inside)], np.asarray(action, np.float64)[inside], atol=tolerance[inside])


@given(case=squashed_cases(u_bound=3.0))
def test_unsquash_inverts_squash(case) -> None:
    """unsquash(squash(u)) = u; the error grows as 1 / (scale * (1 - tanh(u)^2)) (atanh's condition)."""
    dtype = case["dtype"]
    u = as_tensor(case["u"], dtype)
    bias = as_tensor(case["bias"], dtype)
    back = core.unsquash(core.squash(u, case["scale_arg"], bias), case["scale_arg"], bias)
    scale, b = _full(case, "scale"), _full(case, "bias")
    slope = scale * (1.0 - np.tanh(case["u"].astype(np.float64)) ** 2)
    assert_close(back, case["u"], atol=16 * eps(dtype) * (np.abs(scale) + np.abs(b)) / slope)


def test_squash_unsquash_hand_worked_example() -> None:
    # scale = 2, bias = 1 (a Box [-1, 3]); u = atanh(0.5) = 0.5493061443340549:
    #   squash: tanh(u) * 2 + 1 = 0.5 * 2 + 1 = 2;  unsquash(2) = atanh((2 - 1) / 2) = atanh(0.5)
    # At the upper bound a = 3 the normalised action 1 is clamped to 1 - eps:
    #   float32: atanh(1 - 2^-23) = 0.5 * ln((2 - 2^-23) / 2^-23) = 0.5 * ln(2^24 - 1) = 8.3177661667
    u = torch.tensor([0.5493061443340549], dtype=torch.float64)
    assert torch.allclose(core.squash(u, 2.0, 1.0), torch.tensor([2.0], dtype=torch.float64), rtol=0, atol=1e-15)
    assert torch.allclose(core.unsquash(torch.tensor([2.0], dtype=torch.float64), 2.0, 1.0), u, rtol=0, atol=1e-15)
    at_bound = core.unsquash(torch.tensor([3.0, -1.0, 1e30]), 2.0, 1.0)
    assert torch.allclose(at_bound, torch.tensor([8.3177661667, -8.3177661667, 8.3177661667]), rtol=1e-6, atol=0)


@pytest.mark.parametrize("fn", [core.squash, core.unsquash])
@pytest.mark.parametrize(
    ("shape", "scale", "bias"),
    [
        ((2, 3), torch.ones(4), 0.0),
        ((2, 3), 1.0, torch.zeros(4)),
        ((3,), torch.ones(2, 3), 0.0),  # broadcasts, but would grow the result to [2, 3]
        ((2, 3), 1.0, torch.zeros(5, 3)),
    ],
)
def test_squash_unsquash_reject_scale_or_bias_that_do_not_broadcast(fn, shape, scale, bias) -> None:
    with pytest.raises(ValueError, match="broadcast"):
        fn(torch.zeros(shape), scale, bias)


# ---------------------------------------------------------------- log-Jacobian


@given(case=squashed_cases(u_bound=30.0))
@example(
    case={
        "u": np.array([30.0, -30.0, 0.0, -10.5], np.float32),
        "mean": np.zeros(4, np.float32),
        "std": np.ones(4, np.float32),
        "scale": 1.0,
        "scale_arg": 1.0,
        "bias": np.zeros(4, np.float32),
        "dtype": torch.float64,
        "shape": (4,),
    },  # -10.5: softplus's identity branch in float64
)
def test_tanh_log_abs_det_jacobian_matches_reference(case) -> None:
    dtype = case["dtype"]
    u = as_tensor(case["u"], dtype)
    out = call_pure(core.tanh_log_abs_det_jacobian, u, case["scale_arg"])
    assert_meta(out, u, u.shape)
    u64, scale = case["u"].astype(np.float64), _full(case, "scale")
    expected = elementwise(log_jacobian_cosh, u64, scale)
    atol = 16 * eps(dtype) * (np.abs(np.log(scale)) + 2 * np.abs(u64) + 2) + SOFTPLUS_THRESHOLD_ERROR
    assert_close(out, expected, atol=atol)
    moderate = np.abs(u64) <= 6.0
    naive = elementwise(log_jacobian_naive, u64[moderate], scale[moderate])
    assert_close(
        out[torch.as_tensor(moderate)],
        naive,
        atol=atol[moderate] + elementwise(naive_reference_error, u64[moderate]),
    )


# ---------------------------------------------------------------- log-probability


@given(case=squashed_cases())
def test_squashed_log_prob_matches_sac_eq21(case) -> None:
    dtype = case["dtype"]
    u = as_tensor(case["u"], dtype)
    mean, std = as_tensor(case["mean"], dtype), as_tensor(case["std"], dtype)
    log_prob = call_pure(core.squashed_log_prob, u, mean, std, case["scale_arg"])
    assert_meta(log_prob, u, u.shape[:-1])
    expected, magnitude, own_error = squashed_log_prob_reference(
        case["u"].astype(np.float64), _full(case, "mean"), _full(case, "std"), _full(case, "scale")
    )
    assert_close(log_prob, expected, atol=16 * eps(dtype) * magnitude + own_error)


@given(
    u=finite_floats(30.0),
    mean=finite_floats(3.0),
    std=finite_floats(3.0, min_value=0.05),
    scale=finite_floats(5.0, min_value=0.1),
    dtype=dtypes,
)
@example(u=30.0, mean=0.0, std=1.0, scale=1.0, dtype=torch.float32)
@example(u=-30.0, mean=0.0, std=1.0, scale=1.0, dtype=torch.float32)
@example(u=30.0, mean=-3.0, std=0.05, scale=0.1, dtype=torch.float32)
def test_squashed_log_prob_value_and_gradient_finite_when_tanh_saturates(u, mean, std, scale, dtype) -> None:
    """At |u| = 30 float32 tanh is exactly 1 and the naive log(1 - tanh^2) is -inf; the value and
    the gradients in u, mean and std must stay finite and correct:
        d/du    = -(u - mean) / std^2 + 2 tanh(u)
        d/dmean =  (u - mean) / std^2
        d/dstd  =  ((u - mean)^2 / std^2 - 1) / std
    """
    u_t = torch.tensor([[u]], dtype=dtype, requires_grad=True)
    mean_t = torch.tensor([mean], dtype=dtype, requires_grad=True)
    std_t = torch.tensor([std], dtype=dtype, requires_grad=True)
    log_prob = core.squashed_log_prob(u_t, mean_t, std_t, scale)
    log_prob.sum().backward()
    z = (u - mean) / std
    expected = log_normal_reference(u, mean, std) - log_jacobian_cosh(u, scale)
    magnitude = 0.5 * z * z + abs(math.log(std)) + abs(math.log(scale)) + 2 * abs(u) + 2
    assert_close(log_prob, [expected], atol=16 * eps(dtype) * magnitude + SOFTPLUS_THRESHOLD_ERROR)
    grad_scale = (abs(z) + 1) ** 2 / std + 2
    assert_close(
        u_t.grad,
        [[-z / std + 2 * math.tanh(u)]],
        atol=16 * eps(dtype) * grad_scale + SOFTPLUS_THRESHOLD_GRAD_ERROR,
    )
    assert_close(mean_t.grad, [z / std], atol=16 * eps(dtype) * grad_scale)
    assert_close(std_t.grad, [(z * z - 1) / std], atol=16 * eps(dtype) * grad_scale)


def test_squashed_log_prob_hand_worked_example() -> None:
    # u = (0, ln 2), mean = 0, std = 1, scale = (1, 2).
    #   dim 0: log N(0) = -0.5 ln(2 pi) = -0.9189385332;  tanh(0) = 0, log(1 * 1) = 0
    #          -> -0.9189385332
    #   dim 1: log N(ln 2) = -0.9189385332 - 0.5 * 0.4804530139 = -1.1591650402
    #          tanh(ln 2) = (2 - 1/2) / (2 + 1/2) = 0.6, 1 - 0.36 = 0.64, log(2 * 0.64) = 0.2468600779
    #          -> -1.1591650402 - 0.2468600779 = -1.4060251181
    #   sum: -2.3249636513
    log_prob = core.squashed_log_prob(
        torch.tensor([0.0, math.log(2.0)], dtype=torch.float64),
        torch.zeros(2, dtype=torch.float64),
        torch.ones(2, dtype=torch.float64),
        torch.tensor([1.0, 2.0], dtype=torch.float64),
    )
    assert log_prob.shape == ()
    assert abs(log_prob.item() - (-2.3249636513)) < 1e-9
    jac = core.tanh_log_abs_det_jacobian(torch.tensor([0.0, math.log(2.0)], dtype=torch.float64), 2.0)
    assert torch.allclose(jac, torch.tensor([math.log(2.0), 0.2468600779], dtype=torch.float64), atol=1e-9)


@pytest.mark.parametrize(
    ("raw", "mean", "std"),
    [
        (torch.zeros(4), torch.zeros(4, 1), torch.ones(4)),  # [B] against [B, 1]: would broadcast to [4, 4]
        (torch.zeros(4, 2), torch.zeros(3), torch.ones(2)),
        (torch.zeros(4, 2), torch.zeros(2), torch.ones(5, 4, 2)),
        (torch.zeros(()), torch.zeros(()), torch.ones(())),  # no action dimension
    ],
)
def test_squashed_log_prob_rejects_shapes_that_would_broadcast_silently(raw, mean, std) -> None:
    with pytest.raises(ValueError):
        core.squashed_log_prob(raw, mean, std, 1.0)


# ---------------------------------------------------------------- entropy estimate


@given(case=squashed_cases(u_bound=4.0))
def test_squashed_entropy_matches_reference(case) -> None:
    """sum_i [ 0.5 log(2 pi e std_i^2) + log(scale_i * (1 - tanh(mean_i + std_i * noise_i)^2)) ]."""
    dtype = case["dtype"]
    noise = as_tensor(case["u"], dtype)
    mean, std = as_tensor(case["mean"], dtype), as_tensor(case["std"], dtype)
    entropy = call_pure(core.squashed_entropy, mean, std, noise, case["scale_arg"])
    assert_meta(entropy, noise, noise.shape[:-1])
    m, s, c, n = _full(case, "mean"), _full(case, "std"), _full(case, "scale"), case["u"].astype(np.float64)
    raw = m + s * n
    per_dim = 0.5 * np.log(2 * math.pi * math.e * s**2) + elementwise(log_jacobian_cosh, raw, c)
    magnitude = (np.abs(np.log(s)) + np.abs(np.log(c)) + 2 * np.abs(raw) + 3).sum(-1)
    assert_close(entropy, per_dim.sum(-1), atol=16 * eps(dtype) * magnitude + SOFTPLUS_THRESHOLD_ERROR * n.shape[-1])


@given(mean=finite_floats(30.0), noise=finite_floats(4.0), dtype=dtypes)
@example(mean=30.0, noise=0.0, dtype=torch.float32)
@example(mean=-30.0, noise=0.0, dtype=torch.float32)
@example(mean=-7.0, noise=-4.0, dtype=torch.float64)  # shrunk: softplus's identity branch, in the gradient
def test_squashed_entropy_gradient_finite_when_tanh_saturates(mean, noise, dtype) -> None:
    mean_t = torch.tensor([[mean]], dtype=dtype, requires_grad=True)
    std_t = torch.tensor([1.0], dtype=dtype, requires_grad=True)
    entropy = core.squashed_entropy(mean_t, std_t, torch.tensor([[noise]], dtype=dtype), 1.0)
    entropy.sum().backward()
    assert torch.isfinite(entropy).all()
    # d/dmean = -2 tanh(u), d/dstd = 1 / std - 2 tanh(u) * noise at std = 1, u = mean + noise.
    t = math.tanh(mean + noise)
    assert_close(mean_t.grad, [[-2 * t]], atol=16 * eps(dtype) + SOFTPLUS_THRESHOLD_GRAD_ERROR)
    assert_close(
        std_t.grad,
        [1 - 2 * t * noise],
        atol=(16 * eps(dtype) + SOFTPLUS_THRESHOLD_GRAD_ERROR) * (1 + abs(noise)),
    )


def test_squashed_entropy_is_unbiased_for_standard_normal_noise() -> None:
    """The mean over many draws approaches H[a] = H[u] + E[log|da/du|], here integrated on a grid."""
    mean, std, scale = 0.3, 0.8, 2.0
    grid = np.linspace(mean - 12 * std, mean + 12 * std, 200_001)
    density = np.exp(-0.5 * ((grid - mean) / std) ** 2) / (std * math.sqrt(2 * math.pi))
    log_jac = math.log(scale) - 2 * np.log(np.cosh(grid))
    expected = 0.5 * math.log(2 * math.pi * math.e * std**2) + float(np.sum(density * log_jac) * (grid[1] - grid[0]))
    noise = torch.randn(400_000, 1, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    samples = core.squashed_entropy(
        torch.tensor([mean], dtype=torch.float64), torch.tensor([std], dtype=torch.float64), noise, scale
    )
    standard_error = samples.std().item() / math.sqrt(samples.numel())
    assert abs(samples.mean().item() - expected) < 5 * standard_error
    # Hand check of the noise = 0 case: 0.5 ln(2 pi e) + ln(1 * (1 - tanh(0)^2)) = 1.4189385332.
    at_zero = core.squashed_entropy(torch.zeros(1), torch.ones(1), torch.zeros(1), 1.0)
    assert abs(at_zero.item() - 1.4189385332) < 1e-6


# ---------------------------------------------------------------- entropy coefficients


def uniform_categorical_entropy(n: int) -> float:
    """-sum_a (1/n) log(1/n), by torch.distributions in float64."""
    return torch.distributions.Categorical(logits=torch.zeros(n, dtype=torch.float64)).entropy().item()


@given(num_actions=st.integers(2, 10_000), base_coef=st.floats(0.0, 1.0))
@example(num_actions=2, base_coef=0.01)
def test_normalized_entropy_coef_scales_the_maximum_entropy_to_base(num_actions, base_coef) -> None:
    coef = core.normalized_entropy_coef(num_actions, base_coef)
    assert isinstance(coef, float)
    assert math.isclose(coef, base_coef / math.log(num_actions), rel_tol=1e-15, abs_tol=0)
    assert math.isclose(coef * uniform_categorical_entropy(num_actions), base_coef, rel_tol=1e-12, abs_tol=1e-300)
    assert core.normalized_entropy_coef(num_actions) == core.normalized_entropy_coef(num_actions, 0.01)


@given(num_actions=st.integers(2, 10_000), np_type=st.sampled_from([np.int64, np.int32, np.uint8]))
@example(num_actions=2, np_type=np.int64)
def test_normalized_entropy_coef_accepts_numpy_integers(num_actions, np_type) -> None:
    """gymnasium's Discrete(n).n is a numpy.int64; the shell passes it straight through."""
    num_actions = min(num_actions, int(np.iinfo(np_type).max))
    coef = core.normalized_entropy_coef(np_type(num_actions))
    assert math.isclose(coef, 0.01 / math.log(num_actions), rel_tol=1e-15)


@pytest.mark.parametrize("bad", [1, 0, -3, True, False, 2.0, 2.5, "4", None])
def test_normalized_entropy_coef_rejects_fewer_than_two_actions_and_non_ints(bad) -> None:
    with pytest.raises(ValueError):
        core.normalized_entropy_coef(bad)


@given(nvec=st.lists(st.integers(1, 1000), min_size=1, max_size=6).filter(lambda v: max(v) >= 2))
@example(nvec=[1, 2])
def test_multi_discrete_entropy_coef_matches_sum_of_max_entropies(nvec) -> None:
    coef = core.multi_discrete_entropy_coef(nvec)
    max_entropy = sum(uniform_categorical_entropy(n) for n in nvec)
    assert isinstance(coef, float)
    assert math.isclose(coef * max_entropy, 0.01, rel_tol=1e-12)
    assert coef == core.multi_discrete_entropy_coef(tuple(nvec)) == core.multi_discrete_entropy_coef(np.asarray(nvec))
    assert math.isclose(coef, core.multi_discrete_entropy_coef([*nvec, 1]), rel_tol=1e-15)  # n = 1 adds nothing
    if len(nvec) == 1:
        assert math.isclose(coef, core.normalized_entropy_coef(nvec[0]), rel_tol=1e-15)


def test_entropy_coef_hand_worked_examples() -> None:
    # n = 2: 0.01 / ln 2 = 0.01 / 0.6931471806 = 0.0144269504
    # nvec = (2, 2) or (1, 4): 0.01 / (2 ln 2) = 0.01 / ln 4 = 0.0072134752
    assert abs(core.normalized_entropy_coef(2) - 0.0144269504) < 1e-10
    assert abs(core.normalized_entropy_coef(4, base_coef=0.02) - 0.0144269504) < 1e-10
    assert abs(core.multi_discrete_entropy_coef([2, 2]) - 0.0072134752) < 1e-10
    assert abs(core.multi_discrete_entropy_coef([1, 4]) - 0.0072134752) < 1e-10


@pytest.mark.parametrize("nvec", [[], [1], [1, 1], [0, 3], [-2, 3]])
def test_multi_discrete_entropy_coef_rejects_spaces_without_entropy(nvec) -> None:
    with pytest.raises(ValueError):
        core.multi_discrete_entropy_coef(nvec)
