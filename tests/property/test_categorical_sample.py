"""Property tests of ``core.categorical_sample`` (the Gumbel-max trick).

Reference: Gumbel (1954); Maddison, Tarlow and Minka, "A* Sampling", NeurIPS 2014, section 2:
``argmax_i(logits_i + G_i)`` with ``G_i`` i.i.d. standard Gumbel is distributed as
``softmax(logits)``; ``-log(E)`` with ``E ~ Exponential(1)`` is standard Gumbel.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from property_helpers import arrays, as_tensor, call_pure, dtypes, eps

import core

shapes = st.tuples(st.integers(1, 6), st.integers(1, 7))


@st.composite
def logits_and_noise(draw):
    rows, n = draw(shapes)
    logits = draw(arrays((rows, n), 20.0))
    noise = draw(arrays((rows, n), 50.0, min_value=1e-6))
    return logits, noise


@given(logits_and_noise(), dtypes)
def test_categorical_sample_is_the_argmax_of_the_perturbed_logits(case, dtype) -> None:
    """Against a float64 reference loop: the chosen index scores within rounding of the best one."""
    logits, noise = case
    out = call_pure(core.categorical_sample, as_tensor(logits, dtype), as_tensor(noise, dtype))
    assert out.dtype == torch.long and tuple(out.shape) == (logits.shape[0],)
    for row in range(logits.shape[0]):
        scores = [float(logits[row, i]) - math.log(float(noise[row, i])) for i in range(logits.shape[1])]
        chosen = int(out[row])
        assert 0 <= chosen < logits.shape[1]
        # log and subtraction each round once in dtype; scores are at most about 20 + 14 in size
        assert scores[chosen] >= max(scores) - 8 * eps(dtype) * 40.0, (row, scores, chosen)


@given(st.lists(st.floats(-4.0, 4.0, allow_nan=False, width=32), min_size=2, max_size=6),
       st.integers(0, 2**31 - 1))
def test_categorical_sample_frequencies_match_softmax(logits, seed) -> None:
    """With Exponential(1) noise the empirical frequencies match softmax(logits) within 6 standard errors."""
    draws = 40_000
    x = torch.tensor(logits, dtype=torch.float64).expand(draws, -1)
    noise = torch.empty_like(x).exponential_(generator=torch.Generator().manual_seed(seed))
    counts = torch.bincount(core.categorical_sample(x, noise), minlength=len(logits)).double() / draws
    expected = torch.softmax(torch.tensor(logits, dtype=torch.float64), dim=0)
    stderr = (expected * (1 - expected) / draws).sqrt()
    assert torch.all((counts - expected).abs() <= 6 * stderr + 1e-12), (counts, expected)


@given(st.integers(2, 6), st.integers(0, 2**31 - 1), dtypes)
def test_categorical_sample_never_draws_minus_infinity(n, seed, dtype) -> None:
    gen = torch.Generator().manual_seed(seed)
    logits = torch.randn(64, n, generator=gen, dtype=dtype)
    banned = torch.rand(64, n, generator=gen) < 0.5
    banned[:, 0] = False  # one allowed action per row
    logits = logits.masked_fill(banned, -math.inf)
    noise = torch.empty_like(logits).exponential_(generator=gen)
    out = core.categorical_sample(logits, noise)
    assert not banned.gather(1, out[:, None]).any()


def test_categorical_sample_hand_worked_example() -> None:
    # scores: [0 - log 1, 1 - log e^2, -1 - log e^-3] = [0, -1, 2] -> index 2
    logits = torch.tensor([[0.0, 1.0, -1.0]])
    noise = torch.tensor([[1.0, math.e**2, math.e**-3]])
    assert core.categorical_sample(logits, noise).tolist() == [2]
    # a batch of envs never mixes: each row takes its own argmax
    logits = torch.tensor([[5.0, 0.0], [0.0, 5.0]])
    assert core.categorical_sample(logits, torch.ones(2, 2)).tolist() == [0, 1]


@pytest.mark.parametrize(("logits", "noise", "match"), [
    (torch.zeros(4, 2), torch.ones(4, 1), "shape mismatch"),
    (torch.zeros(4, 2), torch.ones(2, 4), "shape mismatch"),
    (torch.zeros(4, 2, dtype=torch.long), torch.ones(4, 2), "floating-point"),
    (torch.zeros(()), torch.ones(()), "last"),
    (torch.zeros(3, 0), torch.ones(3, 0), "last"),
])
def test_categorical_sample_rejects_bad_inputs(logits, noise, match) -> None:
    with pytest.raises(ValueError, match=match):
        core.categorical_sample(logits, noise)


def test_categorical_sample_accepts_any_leading_shape() -> None:
    """[T, N, n] -> [T, N]."""
    logits = torch.as_tensor(np.zeros((3, 4, 5), dtype=np.float32))
    assert core.categorical_sample(logits, torch.ones(3, 4, 5)).shape == (3, 4)
