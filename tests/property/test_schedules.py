"""Property tests of ``core.linear_schedule``.

Reference: linear interpolation ``(1 - f) * start + f * end`` with
``f = clamp(step, 0, num_steps) / num_steps``. CleanRL's learning-rate annealing is
``lr * (1 - update / num_updates)`` with ``update`` counted from 0.
"""

from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

import core

values = st.floats(-10.0, 10.0)
lengths = st.integers(1, 10_000)


def linear_reference(start: float, end: float, step: int, num_steps: int) -> float:
    fraction = min(max(step, 0), num_steps) / num_steps
    return (1.0 - fraction) * start + fraction * end


@given(start=values, end=values, step=st.integers(-100, 10_100), num_steps=lengths)
@example(start=1e-3, end=0.0, step=1, num_steps=1)  # the shortest schedule
@example(start=1.0, end=2.2250738585072014e-308, step=1, num_steps=1)  # shrunk: start + (end - start) rounds to 0
def test_linear_schedule_matches_interpolation(start, end, step, num_steps) -> None:
    value = core.linear_schedule(start, end, step, num_steps)
    assert isinstance(value, float)
    expected = linear_reference(start, end, step, num_steps)
    slack = 4 * 2.0**-52 * (abs(start) + abs(end))  # start + (end - start) * f rounds twice
    assert math.isclose(value, expected, rel_tol=1e-12, abs_tol=slack)
    assert min(start, end) - slack <= value <= max(start, end) + slack


@given(start=values, end=values, num_steps=lengths, steps=st.lists(st.integers(-50, 10_050), min_size=2))
def test_linear_schedule_is_monotone_and_clamped(start, end, num_steps, steps) -> None:
    steps = sorted(steps)
    out = [core.linear_schedule(start, end, s, num_steps) for s in steps]
    direction = 1.0 if end >= start else -1.0
    assert all(direction * (b - a) >= 0 for a, b in itertools.pairwise(out))
    assert core.linear_schedule(start, end, 0, num_steps) == start
    assert core.linear_schedule(start, end, -5, num_steps) == start
    slack = 4 * 2.0**-52 * (abs(start) + abs(end))
    assert math.isclose(core.linear_schedule(start, end, num_steps + 7, num_steps), end, rel_tol=1e-12, abs_tol=slack)


@given(lr=st.floats(1e-6, 1.0), num_updates=lengths, data=st.data())
def test_linear_schedule_is_cleanrl_annealing(lr, num_updates, data) -> None:
    update = data.draw(st.integers(0, num_updates))
    assert math.isclose(
        core.linear_schedule(lr, 0.0, update, num_updates),
        lr * (1.0 - update / num_updates),
        rel_tol=1e-12,
        abs_tol=1e-18,
    )
    assert core.linear_schedule(lr, 0.0, num_updates, num_updates) == 0.0


def test_linear_schedule_hand_worked_example() -> None:
    # 1e-3 -> 0 over 100 steps: step 25 is a quarter of the way, 1e-3 * 0.75 = 7.5e-4;
    # step -5 clamps to 0 (1e-3), step 200 to 100 (0).
    assert math.isclose(core.linear_schedule(1e-3, 0.0, 25, 100), 7.5e-4, rel_tol=1e-15)
    assert core.linear_schedule(1e-3, 0.0, -5, 100) == 1e-3
    assert core.linear_schedule(1e-3, 0.0, 200, 100) == 0.0
    # 2 -> 4 over 4 steps: step 1 gives 2 + 2 * 1/4 = 2.5
    assert core.linear_schedule(2.0, 4.0, 1, 4) == 2.5


@pytest.mark.parametrize("num_steps", [0, -1, -100])
def test_linear_schedule_rejects_non_positive_length(num_steps) -> None:
    with pytest.raises(ValueError):
        core.linear_schedule(1.0, 0.0, 0, num_steps)
