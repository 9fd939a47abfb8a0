"""Property tests of core.magnet_kl against a float64 reference loop.

Reference written from the definition: with ``pi`` and ``rho`` the softmax of each row's logits over its legal
actions, ``KL(pi || rho) = sum_{a legal} pi_a (ln pi_a - ln rho_a)``; its gradient is taken for the policy's logits
only.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from property_helpers import arrays, as_tensor, call_pure, dtypes
from test_masks import masked_case, ref_masked_softmax

import core


def ref_kl(logits_row, magnet_row, mask_row) -> float:
    pi = ref_masked_softmax(logits_row, mask_row)
    rho = ref_masked_softmax(magnet_row, mask_row)
    return sum(p * (math.log(p) - math.log(r)) for p, r in zip(pi, rho, strict=True) if p > 0)


@st.composite
def kl_case(draw):
    logits, mask = draw(masked_case())
    magnet = draw(arrays(logits.shape, 30.0))
    masked = draw(st.booleans())
    return logits, magnet, mask if masked else np.ones_like(mask)


@given(kl_case(), dtypes)
def test_magnet_kl_matches_the_reference(case, dtype) -> None:
    logits, magnet, mask = case
    x, y, m = as_tensor(logits, dtype), as_tensor(magnet, dtype), torch.as_tensor(mask)
    kl = call_pure(core.magnet_kl, x, y, m)
    assert kl.dtype == dtype and tuple(kl.shape) == (logits.shape[0],)
    for r in range(logits.shape[0]):
        expected = ref_kl(logits[r], magnet[r], mask[r])
        spread = max(abs(float(v)) for v in np.concatenate((logits[r], magnet[r])))
        assert abs(float(kl[r]) - expected) <= 256 * torch.finfo(dtype).eps * max(1.0, spread), (r, kl[r], expected)
        assert float(kl[r]) >= -256 * torch.finfo(dtype).eps * max(1.0, spread)


@given(kl_case())
def test_an_all_legal_mask_is_no_mask(case) -> None:
    logits, magnet, _ = case
    x, y = as_tensor(logits, torch.float64), as_tensor(magnet, torch.float64)
    assert torch.equal(core.magnet_kl(x, y, torch.ones(x.shape, dtype=torch.bool)), core.magnet_kl(x, y))


@given(masked_case(), dtypes)
def test_a_uniform_magnet_is_log_legal_count_minus_the_entropy(case, dtype) -> None:
    logits, mask = case
    x, m = as_tensor(logits, dtype), torch.as_tensor(mask)
    kl = core.magnet_kl(x, torch.zeros_like(x), m)
    expected = torch.log(m.sum(-1).to(dtype)) - core.masked_entropy(x, m)
    torch.testing.assert_close(kl, expected, atol=256 * torch.finfo(dtype).eps * 30, rtol=0)


@given(masked_case())
def test_the_gradient_reaches_the_policy_and_matches_the_reference(case) -> None:
    logits, mask = case
    magnet = logits.astype(np.float64) * 0.5 + 1.0  # in float64, as the tensor: no float32 rounding of its own
    x = as_tensor(logits, torch.float64).requires_grad_(True)
    y = torch.as_tensor(magnet).requires_grad_(True)
    m = torch.as_tensor(mask)
    core.magnet_kl(x, y, m).sum().backward()
    assert y.grad is None  # the magnet is a constant
    # d KL / d l_a = pi_a (log pi_a - log rho_a - KL) for a legal a, 0 for an illegal one
    for r in range(logits.shape[0]):
        pi = ref_masked_softmax(logits[r], mask[r])
        rho = ref_masked_softmax(magnet[r], mask[r])
        kl = ref_kl(logits[r], magnet[r], mask[r])
        for a in range(logits.shape[1]):
            want = pi[a] * (math.log(pi[a]) - math.log(rho[a]) - kl) if pi[a] > 0 else 0.0
            assert abs(float(x.grad[r, a]) - want) <= 1e-9 * max(1.0, float(np.abs(logits[r]).max())), (r, a)


def test_bad_input_is_refused_in_one_line() -> None:
    with pytest.raises(ValueError, match="differ in shape"):
        core.magnet_kl(torch.zeros(2, 3), torch.zeros(2, 4))
    with pytest.raises(ValueError):
        core.magnet_kl(torch.zeros(2, 3), torch.zeros(2, 3), torch.ones(2, 3))  # a float mask
