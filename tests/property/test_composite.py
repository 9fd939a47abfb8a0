"""Property tests of core.linked_active and core.linked_sum against a plain reference loop.

Reference written from the definition: ``active[b, p] = selects[choice[b], p]`` and
``sum_p active[b, p] * w_p * values[b, p]``, summed in Python floats over the active parts only.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from property_helpers import arrays, as_tensor, call_pure, dtypes

import core


@st.composite
def linked_case(draw):
    rows, parts = draw(st.integers(1, 12)), draw(st.integers(1, 6))
    values = draw(arrays((rows, parts), 50.0))
    active = draw(hnp.arrays(np.bool_, (rows, parts)))
    weights = draw(st.one_of(st.none(), arrays((parts,), 3.0, min_value=0.0)))
    return values, active, weights


def ref_linked_sum(values, active, weights) -> list[float]:
    out = []
    for r in range(values.shape[0]):
        total = 0.0
        for p in range(values.shape[1]):
            if active[r, p]:
                total += float(values[r, p]) * (1.0 if weights is None else float(weights[p]))
        out.append(total)
    return out


@given(linked_case(), dtypes)
def test_linked_sum_matches_the_reference(case, dtype) -> None:
    values, active, weights = case
    v, a = as_tensor(values, dtype), torch.as_tensor(active)
    w = None if weights is None else as_tensor(weights, dtype)
    out = call_pure(core.linked_sum, v, a, w)
    assert out.dtype == dtype and tuple(out.shape) == (values.shape[0],)
    for r, expected in enumerate(ref_linked_sum(values, active, weights)):
        size = sum(abs(float(x)) * 3.0 for x in values[r]) + 1.0
        assert abs(float(out[r]) - expected) <= 16 * torch.finfo(dtype).eps * size, (r, out[r], expected)


@given(linked_case(), st.sampled_from([-math.inf, math.inf, math.nan]))
def test_inactive_parts_add_nothing_and_get_exactly_zero_gradient_even_when_not_finite(case, poison) -> None:
    values, active, weights = case
    v = as_tensor(values, torch.float64).requires_grad_(True)
    a = torch.as_tensor(active)
    w = None if weights is None else as_tensor(weights, torch.float64)
    clean = core.linked_sum(v, a, w)
    poisoned = v.detach().clone()
    poisoned[~a] = poison
    poisoned.requires_grad_(True)
    out = core.linked_sum(poisoned, a, w)
    assert torch.equal(out, clean.detach())
    out.sum().backward()
    assert torch.equal(poisoned.grad[~a], torch.zeros_like(poisoned.grad[~a]))
    expected = torch.ones_like(v) if w is None else w.expand_as(v)
    assert torch.equal(poisoned.grad[a], expected[a])


@given(st.integers(1, 20), st.integers(1, 5), st.integers(1, 6), st.integers(0, 2**31 - 1))
def test_linked_active_is_the_chosen_rows_of_selects(rows, choices, parts, seed) -> None:
    g = torch.Generator().manual_seed(seed)
    selects = torch.rand(choices, parts, generator=g) < 0.5
    choice = torch.randint(0, choices, (rows,), generator=g)
    active = call_pure(core.linked_active, choice, selects)
    assert active.dtype == torch.bool and tuple(active.shape) == (rows, parts)
    for r in range(rows):
        for p in range(parts):
            assert bool(active[r, p]) == bool(selects[int(choice[r]), p])


def test_the_joint_log_prob_and_entropy_of_a_dict_action_are_the_sums_of_its_parts() -> None:
    """A kind (Categorical over 3) and one Normal parameter per kind: with every part active the joint log-prob is
    the sum of torch.distributions' log-probs; linked, the parameters of the kinds not taken drop out."""
    g = torch.Generator().manual_seed(0)
    kind = torch.distributions.Categorical(logits=torch.randn(64, 3, generator=g))
    params = [torch.distributions.Normal(torch.randn(64, generator=g), torch.rand(64, generator=g) + 0.1)
              for _ in range(3)]
    taken = kind.sample()
    drawn = [p.sample() for p in params]
    log_probs = torch.stack([kind.log_prob(taken), *(p.log_prob(x) for p, x in zip(params, drawn, strict=True))], 1)
    every = torch.ones(64, 4, dtype=torch.bool)
    joint = kind.log_prob(taken) + sum(p.log_prob(x) for p, x in zip(params, drawn, strict=True))
    torch.testing.assert_close(core.linked_sum(log_probs, every), joint, rtol=0, atol=1e-5)
    selects = torch.tensor([[True, True, False, False], [True, False, True, False], [True, False, False, True]])
    active = core.linked_active(taken, selects)
    linked = kind.log_prob(taken) + torch.stack([p.log_prob(x) for p, x in zip(params, drawn, strict=True)],
                                                1).gather(1, taken[:, None]).squeeze(1)
    torch.testing.assert_close(core.linked_sum(log_probs, active), linked, rtol=0, atol=1e-5)
    weights = torch.tensor([1 / math.log(3), 1.0, 1.0, 1.0])
    entropies = torch.stack([kind.entropy(), *(p.entropy() for p in params)], 1)
    expected = kind.entropy() / math.log(3) + entropies[:, 1:].gather(1, taken[:, None]).squeeze(1)
    torch.testing.assert_close(core.linked_sum(entropies, active, weights), expected, rtol=0, atol=1e-5)


@pytest.mark.parametrize(("call", "message"), [
    (lambda: core.linked_sum(torch.zeros(2, 3, dtype=torch.long), torch.ones(2, 3, dtype=torch.bool)), "float"),
    (lambda: core.linked_sum(torch.zeros(2, 3), torch.ones(2, 2, dtype=torch.bool)), r"active must be \[2, 3\] bool"),
    (lambda: core.linked_sum(torch.zeros(2, 3), torch.ones(2, 3, dtype=torch.bool), torch.ones(2)),
     r"weights must be \[3\]"),
    (lambda: core.linked_sum(torch.zeros(3), torch.ones(3, dtype=torch.bool)), r"values must be \[B, P\]"),
    (lambda: core.linked_active(torch.tensor([0, 3]), torch.ones(3, 2, dtype=torch.bool)), r"outside 0\.\.2"),
    (lambda: core.linked_active(torch.tensor([0.0]), torch.ones(3, 2, dtype=torch.bool)), "integer"),
    (lambda: core.linked_active(torch.tensor([0]), torch.ones(3, 2)), r"\[n, P\] bool"),
])
def test_bad_input_is_one_line(call, message) -> None:
    with pytest.raises(ValueError, match=message) as err:
        call()
    assert "\n" not in str(err.value)
