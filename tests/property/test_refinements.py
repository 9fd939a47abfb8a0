"""Property tests of the refinements' pure parts: ``core.rpo_mean``, ``core.adaptive_learning_rate``,
``core.normalize_value`` and ``core.denormalize_value``.

References, written from their sources in plain Python floats:

- RPO (Rahman and Xue 2022; CleanRL's ``ppo_continuous_action_rpo.py``): ``z = uniform_(-alpha, alpha)``
  added to each component of the action mean; the squashed log-density of a raw action ``u`` is then
  ``sum_i log N(u_i; mean_i + z_i, std_i) - log|d tanh(u_i) * scale_i / du_i|``.
- rsl_rl's adaptive schedule (``rsl_rl/algorithms/ppo.py``), verbatim as a loop over minibatches.
- Value normalisation (MAPPO's ``ValueNorm``): ``(x - mean) / sqrt(var + eps)`` and back.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import example, given
from hypothesis import strategies as st
from property_helpers import arrays, as_tensor, call_pure, dtypes, eps, finite_floats

import core


# ---------------------------------------------------------------- RPO
def rpo_reference(mean: list[float], uniform: list[float], alpha: float) -> list[float]:
    return [m + (-alpha + 2.0 * alpha * u) for m, u in zip(mean, uniform, strict=True)]


@st.composite
def rpo_cases(draw):
    shape = draw(st.tuples(st.integers(1, 6), st.integers(1, 4)))
    mean = draw(arrays(shape, 5.0))
    uniform = draw(arrays(shape, 1.0, min_value=0.0))
    alpha = draw(st.one_of(st.just(0.0), finite_floats(2.0, min_value=0.0)))
    return mean, uniform, alpha


@given(case=rpo_cases(), dtype=dtypes)
@example(case=(np.zeros((1, 1), np.float32), np.zeros((1, 1), np.float32), 0.5), dtype=torch.float32)  # z = -alpha
def test_rpo_mean_matches_reference(case, dtype) -> None:
    mean, uniform, alpha = case
    m, u = as_tensor(mean, dtype), as_tensor(uniform, dtype)
    out = call_pure(core.rpo_mean, m, u, alpha)
    assert out.dtype == dtype and out.shape == m.shape
    expected = [rpo_reference(row_m, row_u, alpha) for row_m, row_u in zip(mean.astype(float).tolist(),
                                                                           uniform.astype(float).tolist(), strict=True)]
    tol = 4 * eps(dtype) * (np.abs(mean).astype(float) + 3 * alpha)
    assert np.all(np.abs(out.double().numpy() - np.asarray(expected)) <= tol + 1e-30)
    # the noise stays within [-alpha, alpha] (up to rounding)
    assert np.all(np.abs(out.double().numpy() - mean.astype(float)) <= alpha + tol + 1e-30)
    if alpha == 0.0:
        assert out is m


@given(case=rpo_cases(), scale=finite_floats(3.0, min_value=0.1), dtype=dtypes)
def test_rpo_squashed_log_prob_is_the_perturbed_gaussian(case, scale, dtype) -> None:
    """Noise on the pre-squash mean: the log-Jacobian is unchanged, the Gaussian term moves with the mean."""
    mean, uniform, alpha = case
    rng = np.random.default_rng(0)
    raw = rng.normal(size=mean.shape).astype(np.float32)
    std = np.full(mean.shape[1:], 0.7, np.float32)
    perturbed = core.rpo_mean(as_tensor(mean, dtype), as_tensor(uniform, dtype), alpha)
    got = core.squashed_log_prob(as_tensor(raw, dtype), perturbed, as_tensor(std, dtype), scale).double().numpy()
    for row in range(mean.shape[0]):
        centre = rpo_reference(mean[row].astype(float).tolist(), uniform[row].astype(float).tolist(), alpha)
        total, size = 0.0, 0.0
        for x, c, s in zip(raw[row].astype(float), centre, std.astype(float), strict=True):
            gauss = -0.5 * ((x - c) / s) ** 2 - math.log(s) - 0.5 * math.log(2 * math.pi)
            jacobian = math.log(scale) + 2 * (math.log(2) - x - math.log1p(math.exp(-2 * x)))
            total += gauss - jacobian
            size += abs(gauss) + abs(jacobian) + ((abs(x) + abs(c)) / s) ** 2
        assert abs(got[row] - total) <= 64 * eps(dtype) * (size + 1.0)


def test_rpo_mean_passes_the_gradient_and_checks_its_inputs() -> None:
    mean = torch.zeros(3, 2, requires_grad=True)
    core.rpo_mean(mean, torch.rand(3, 2), 0.5).sum().backward()
    assert torch.equal(mean.grad, torch.ones(3, 2))
    with pytest.raises(ValueError, match="alpha"):
        core.rpo_mean(torch.zeros(2), torch.zeros(2), -0.1)
    with pytest.raises(ValueError, match="shape"):
        core.rpo_mean(torch.zeros(2, 1), torch.zeros(2), 0.1)


# ---------------------------------------------------------------- KL-adaptive learning rate
def rsl_rl_reference(lr: float, kls: list[float], desired_kl: float) -> list[float]:
    """rsl_rl's ``PPO.update`` with ``schedule == "adaptive"``, one step per minibatch."""
    out = []
    for kl_mean in kls:
        if kl_mean > desired_kl * 2.0:
            lr = max(1e-5, lr / 1.5)
        elif kl_mean < desired_kl / 2.0 and kl_mean > 0.0:
            lr = min(1e-2, lr * 1.5)
        out.append(lr)
    return out


kl_values = st.one_of(st.sampled_from([0.0, 0.005, 0.01, 0.02, 0.04]), st.floats(0.0, 0.2))


@given(lr=st.floats(1e-6, 5e-2), kls=st.lists(kl_values, min_size=1, max_size=40),
       desired_kl=st.sampled_from([0.01, 0.02, 0.008]))
@example(lr=1e-3, kls=[0.0], desired_kl=0.01)  # kl = 0 (a policy that did not move) leaves lr as it is
@example(lr=1e-3, kls=[0.02, 0.005], desired_kl=0.01)  # exactly at 2x and at half: no change
@example(lr=5e-2, kls=[0.001], desired_kl=0.01)  # above the ceiling: an increase clamps it down to 1e-2
def test_adaptive_learning_rate_matches_rsl_rl(lr, kls, desired_kl) -> None:
    expected = rsl_rl_reference(lr, kls, desired_kl)
    value = torch.tensor(lr, dtype=torch.float64)
    for kl, want in zip(kls, expected, strict=True):
        value = call_pure(core.adaptive_learning_rate, value, torch.tensor(kl, dtype=torch.float64), desired_kl)
        assert value.dtype == torch.float64 and value.dim() == 0
        assert math.isclose(float(value), want, rel_tol=1e-12)


@given(lr=st.floats(1e-5, 1e-2), kl=st.floats(0.0, 1.0), dtype=dtypes)
def test_adaptive_learning_rate_stays_in_its_clamp(lr, kl, dtype) -> None:
    out = core.adaptive_learning_rate(torch.tensor(lr, dtype=dtype), torch.tensor(kl, dtype=torch.float64), 0.01)
    assert out.dtype == dtype
    assert 1e-5 * (1 - eps(dtype)) <= float(out) <= 1e-2 * (1 + eps(dtype))


def test_adaptive_learning_rate_ignores_a_non_finite_kl_and_checks_arguments() -> None:
    lr = torch.tensor(1e-3)
    assert float(core.adaptive_learning_rate(lr, torch.tensor(float("nan")), 0.01)) == float(lr)
    with pytest.raises(ValueError, match="0-d"):
        core.adaptive_learning_rate(torch.ones(2), torch.tensor(0.0), 0.01)
    with pytest.raises(ValueError, match="desired_kl"):
        core.adaptive_learning_rate(lr, torch.tensor(0.0), 0.0)


# ---------------------------------------------------------------- value normalisation
@st.composite
def value_cases(draw):
    values = draw(arrays(draw(st.integers(1, 32)), 1000.0))
    mean = draw(finite_floats(500.0))
    var = draw(st.one_of(st.just(0.0), finite_floats(1e5, min_value=0.0)))
    return values, mean, var


@given(case=value_cases(), dtype=dtypes)
@example(case=(np.array([3.0], np.float32), 3.0, 0.0), dtype=torch.float32)  # zero variance: eps keeps it finite
def test_normalize_value_matches_reference_and_inverts(case, dtype) -> None:
    values, mean, var = case
    x = as_tensor(values, dtype)
    m, v = torch.tensor(mean, dtype=torch.float64), torch.tensor(var, dtype=torch.float64)
    out = call_pure(core.normalize_value, x, m, v)
    assert out.dtype == dtype and out.shape == x.shape
    scale = math.sqrt(float(np.float64(var) if dtype == torch.float64 else np.float32(var)) + 1e-5)
    expected = [(value - mean) / scale for value in values.astype(float).tolist()]
    tol = 8 * eps(dtype) * (np.abs(values).astype(float) + abs(mean)) / scale
    assert np.all(np.abs(out.double().numpy() - np.asarray(expected)) <= tol + 8 * eps(dtype) * np.abs(expected))
    back = core.denormalize_value(out, m, v)
    assert np.all(np.abs(back.double().numpy() - values.astype(float))
                  <= 32 * eps(dtype) * (np.abs(values).astype(float) + abs(mean) + 1.0))


@given(values=arrays(st.integers(2, 64), 100.0))
def test_normalized_returns_are_standardised_by_their_own_moments(values) -> None:
    x = torch.as_tensor(values.astype(np.float64))
    mean, var, _ = core.batch_moments(x)
    out = core.normalize_value(x, mean, var)
    assert abs(float(out.mean())) <= 1e-9 * (1 + float(x.abs().max()))
    assert float(out.var(correction=0)) <= 1.0 + 1e-9
    torch.testing.assert_close(core.denormalize_value(out, mean, var), x)


def test_normalize_value_checks_its_statistics() -> None:
    with pytest.raises(ValueError, match="0-d"):
        core.normalize_value(torch.zeros(3), torch.zeros(3), torch.ones(()))
    with pytest.raises(ValueError, match="eps"):
        core.denormalize_value(torch.zeros(3), torch.zeros(()), torch.ones(()), eps=0.0)
