"""Property tests of ``core.gae`` against Schulman et al. 2015, eq. (16).

Reference: "High-Dimensional Continuous Control Using Generalized Advantage
Estimation", arXiv:1506.02438. With ``dones[t] = 1`` meaning the episode ended
with the transition at step t, the TD error and the advantage of one env are::

    delta_t = r_t + gamma * (1 - d_t) * V_{t+1} - V_t          (V_T = last_value)
    A_t     = sum_{l >= 0} (gamma * lam)^l * delta_{t+l}       (the sum stops after the first done)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
import pytest
import torch
from hypothesis import example, given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from property_helpers import (
    arrays,
    as_tensor,
    assert_close,
    assert_meta,
    call_pure,
    dtypes,
    eps,
    finite_floats,
    unit_interval,
)

import core

# ---------------------------------------------------------------- reference


def gae_reference(rewards, values, dones, last_value, gamma, lam):
    """Eq. (16) written out per env and per step, in Python floats (float64).

    ``rewards``, ``values``, ``dones``: ``[T][N]`` nested sequences; ``last_value``: ``[N]``.
    Returns ``[T][N]`` advantages.
    """
    num_steps, num_envs = len(rewards), len(rewards[0])
    advantages = [[0.0] * num_envs for _ in range(num_steps)]
    for n in range(num_envs):
        deltas = []
        for t in range(num_steps):
            next_value = last_value[n] if t == num_steps - 1 else values[t + 1][n]
            bootstrap = 0.0 if dones[t][n] else gamma * float(next_value)
            deltas.append(float(rewards[t][n]) + bootstrap - float(values[t][n]))
        for t in range(num_steps):
            total, weight = 0.0, 1.0
            for k in range(t, num_steps):
                total += weight * deltas[k]
                if dones[k][n]:
                    break  # the episode ended at step k: nothing after k belongs to it
                weight *= gamma * lam
            advantages[t][n] = total
    return advantages


def error_bound(case: GaeCase, dtype: torch.dtype) -> np.ndarray:
    """A rounding-error bound per element: the scan adds up to T terms per env,
    each smaller than the sum of |r| and |V| along that env's row."""
    r = np.abs(case.rewards.astype(np.float64)).reshape(case.num_steps, -1)
    v = np.abs(case.values.astype(np.float64)).reshape(case.num_steps, -1)
    lv = np.abs(case.last_value.astype(np.float64)).reshape(-1)
    per_env = r.sum(0) + 2.0 * v.sum(0) + lv
    bound = 8.0 * (case.num_steps + 2) * eps(dtype) * per_env
    return np.broadcast_to(bound, r.shape).reshape(case.rewards.shape)


# ---------------------------------------------------------------- strategies


@dataclass(frozen=True)
class GaeCase:
    rewards: np.ndarray  # [T, N] or [T], float32 values
    values: np.ndarray
    dones: np.ndarray  # bool
    last_value: np.ndarray  # [N] or []
    gamma: float
    lam: float
    dtype: torch.dtype

    @property
    def num_steps(self) -> int:
        return self.rewards.shape[0]

    def tensors(self):
        return (
            as_tensor(self.rewards, self.dtype),
            as_tensor(self.values, self.dtype),
            torch.as_tensor(self.dones),
            as_tensor(self.last_value, self.dtype),
        )

    def run(self, **overrides):
        rewards, values, dones, last_value = self.tensors()
        args = {"rewards": rewards, "values": values, "dones": dones, "last_value": last_value}
        args.update(overrides)
        return call_pure(core.gae, **args, gamma=self.gamma, lam=self.lam)

    def reference(self):
        as2d = (lambda a: a.reshape(self.num_steps, -1)) if self.rewards.ndim == 1 else (lambda a: a)
        ref = gae_reference(
            as2d(self.rewards).tolist(),
            as2d(self.values).tolist(),
            as2d(self.dones).tolist(),
            self.last_value.reshape(-1).tolist(),
            self.gamma,
            self.lam,
        )
        return np.asarray(ref).reshape(self.rewards.shape)


@st.composite
def gae_cases(draw, *, flat: bool = False, bound: float = 100.0, dtype=None):
    num_steps = draw(st.integers(1, 32))
    shape = (num_steps,) if flat else (num_steps, draw(st.integers(1, 8)))
    return GaeCase(
        rewards=draw(arrays(shape, bound)),
        values=draw(arrays(shape, bound)),
        dones=draw(hnp.arrays(np.bool_, shape)),
        last_value=draw(arrays(shape[1:], bound)),
        gamma=draw(unit_interval),
        lam=draw(unit_interval),
        dtype=draw(dtypes) if dtype is None else dtype,
    )


def _case(rewards, values, dones, last_value, gamma, lam, dtype=torch.float32) -> GaeCase:
    return GaeCase(
        np.asarray(rewards, np.float32),
        np.asarray(values, np.float32),
        np.asarray(dones, np.bool_),
        np.asarray(last_value, np.float32),
        gamma,
        lam,
        dtype,
    )


_ROWS = np.linspace(-3.0, 5.0, 32 * 4, dtype=np.float32).reshape(32, 4)

# Edge cases checked on every run: T = 1, all dones, gamma = 0, lam in {0, 1}, a long rollout
# with gamma = lam = 1 and no dones (the longest sum), and a flat [T] call.
EDGE_CASES = [
    _case([[1.5]], [[-2.0]], [[False]], [4.0], 0.9, 0.95),
    _case([[1.5]], [[-2.0]], [[True]], [4.0], 0.9, 0.95, torch.float64),
    _case(_ROWS, -_ROWS[::-1], np.ones((32, 4), bool), [7.0, -7.0, 0.5, 1e3], 0.99, 0.95),
    _case(_ROWS, _ROWS[::-1], np.zeros((32, 4), bool), [1.0, 2.0, 3.0, 4.0], 0.0, 0.95),
    _case(_ROWS, _ROWS[::-1], np.eye(32, 4, dtype=bool), [1.0, 2.0, 3.0, 4.0], 0.99, 0.0),
    _case(_ROWS, _ROWS[::-1], np.zeros((32, 4), bool), [1.0, 2.0, 3.0, 4.0], 1.0, 1.0),
    _case(_ROWS[:, 0], _ROWS[:, 1], np.arange(32) % 5 == 4, 2.5, 0.9, 1.0, torch.float64),
]


# ---------------------------------------------------------------- against the reference


def _with_examples(test):
    for edge in EDGE_CASES:
        test = example(case=edge)(test)
    return test


@given(case=st.one_of(gae_cases(), gae_cases(flat=True)))
@_with_examples
def test_gae_matches_eq16_reference(case: GaeCase) -> None:
    values = case.tensors()[1]
    advantages = case.run()
    assert_meta(advantages, values, values.shape)
    assert_close(advantages, case.reference(), atol=error_bound(case, case.dtype))


@given(case=gae_cases(dtype=torch.float64), scale=finite_floats(10.0))
def test_gae_is_linear_in_rewards(case: GaeCase, scale: float) -> None:
    """A(r1 + c * r2; V) = A(r1; V) + c * A(r2; V = 0, last_value = 0)."""
    other = np.flip(case.rewards, axis=0).copy()
    rewards, values, _, last_value = case.tensors()
    other_t = as_tensor(other, case.dtype)
    combined = case.run(rewards=rewards + scale * other_t)
    base = case.run()
    alone = case.run(rewards=other_t, values=torch.zeros_like(values), last_value=torch.zeros_like(last_value))
    bound = error_bound(replace(case, rewards=np.abs(case.rewards) + abs(scale) * np.abs(other)), torch.float64)
    assert_close(combined, (base + scale * alone).numpy(), atol=4 * bound)


@given(case=gae_cases())
def test_gae_batch_equals_per_env_calls(case: GaeCase) -> None:
    """A [T, N] call equals N [T, 1] calls and N [T] calls with a 0-d last_value."""
    rewards, values, dones, last_value = case.tensors()
    batched = case.run()
    for n in range(rewards.shape[1]):
        column = core.gae(
            rewards[:, n : n + 1],
            values[:, n : n + 1],
            dones[:, n : n + 1],
            last_value[n : n + 1],
            case.gamma,
            case.lam,
        )
        flat = core.gae(rewards[:, n], values[:, n], dones[:, n], last_value[n], case.gamma, case.lam)
        assert column.shape == (rewards.shape[0], 1)
        assert flat.shape == (rewards.shape[0],)
        assert torch.equal(column[:, 0], batched[:, n])
        assert torch.equal(flat, batched[:, n])


@given(case=gae_cases(), data=st.data())
def test_gae_done_at_t_ignores_everything_after_t(case: GaeCase, data: st.DataObject) -> None:
    """With dones[t, n] set, perturbing rewards/values after t and last_value leaves A[:t+1, n]
    bit-for-bit unchanged (the mask multiplies the future by exactly 0)."""
    num_steps, num_envs = case.rewards.shape
    n = data.draw(st.integers(0, num_envs - 1), label="env")
    t = data.draw(st.integers(0, num_steps - 1), label="done step")
    dones = case.dones.copy()
    dones[t, n] = True
    case = replace(case, dones=dones)
    later = num_steps - t - 1
    new_rewards, new_values = case.rewards.copy(), case.values.copy()
    new_rewards[t + 1 :, n] = data.draw(arrays(later, 1e3), label="later rewards")
    new_values[t + 1 :, n] = data.draw(arrays(later, 1e3), label="later values")
    new_last_value = case.last_value.copy()
    new_last_value[n] = data.draw(finite_floats(1e3), label="last value")
    perturbed = replace(case, rewards=new_rewards, values=new_values, last_value=new_last_value)

    before, after = case.run(), perturbed.run()
    assert torch.equal(before[: t + 1, n], after[: t + 1, n])
    others = [m for m in range(num_envs) if m != n]
    assert torch.equal(before[:, others], after[:, others])


@given(case=st.one_of(gae_cases(), gae_cases(flat=True)))
def test_gae_lambda_zero_is_one_step_td_error(case: GaeCase) -> None:
    case = replace(case, lam=0.0)
    advantages = case.run()
    r, v = case.rewards.astype(np.float64), case.values.astype(np.float64)
    next_v = np.concatenate([v[1:], case.last_value.astype(np.float64)[None]], axis=0)
    td_error = r + case.gamma * (1.0 - case.dones) * next_v - v
    assert_close(advantages, td_error, atol=error_bound(case, case.dtype))


@given(case=st.one_of(gae_cases(), gae_cases(flat=True)))
def test_gae_gamma_zero_is_reward_minus_value(case: GaeCase) -> None:
    case = replace(case, gamma=0.0)
    advantages = case.run()
    expected = case.rewards.astype(np.float64) - case.values.astype(np.float64)
    assert_close(advantages, expected, atol=error_bound(case, case.dtype))


@given(case=gae_cases(dtype=torch.float64))
def test_gae_lambda_one_is_monte_carlo_return_minus_value(case: GaeCase) -> None:
    """lam = 1 with no dones: A_t = sum_{k >= t} gamma^(k-t) r_k + gamma^(T-t) V_T - V_t."""
    case = replace(case, lam=1.0, dones=np.zeros_like(case.dones))
    advantages = case.run()
    r, v = case.rewards.astype(np.float64), case.values.astype(np.float64)
    lv = case.last_value.astype(np.float64)
    num_steps = case.num_steps
    expected = np.zeros_like(r)
    for t in range(num_steps):
        ret = sum(case.gamma ** (k - t) * r[k] for k in range(t, num_steps))
        expected[t] = ret + case.gamma ** (num_steps - t) * lv - v[t]
    assert_close(advantages, expected, atol=error_bound(case, torch.float64))


@given(case=st.one_of(gae_cases(), gae_cases(flat=True)), float_dtype=dtypes)
def test_gae_bool_and_float_dones_agree(case: GaeCase, float_dtype: torch.dtype) -> None:
    as_bool = case.run()
    as_float = case.run(dones=torch.as_tensor(case.dones).to(float_dtype))
    assert torch.equal(as_bool, as_float)


def test_gae_hand_worked_example() -> None:
    # T = 3, N = 1, gamma = lam = 0.5, the episode ends at t = 1:
    #   rewards = [1, 0, 2], values = [0.5, 1, -1], dones = [0, 1, 0], last_value = 4
    #   t=2: delta = 2 + 0.5 * 4 - (-1)       = 5      A_2 = 5
    #   t=1: delta = 0 + 0 (done) - 1          = -1     A_1 = -1 + 0 (done)        = -1
    #   t=0: delta = 1 + 0.5 * 1 - 0.5         = 1      A_0 = 1 + 0.25 * (-1)      = 0.75
    for dtype in (torch.float32, torch.float64):
        advantages = core.gae(
            torch.tensor([[1.0], [0.0], [2.0]], dtype=dtype),
            torch.tensor([[0.5], [1.0], [-1.0]], dtype=dtype),
            torch.tensor([[False], [True], [False]]),
            torch.tensor([4.0], dtype=dtype),
            gamma=0.5,
            lam=0.5,
        )
        assert torch.equal(advantages, torch.tensor([[0.75], [-1.0], [5.0]], dtype=dtype))
    assert gae_reference([[1.0], [0.0], [2.0]], [[0.5], [1.0], [-1.0]], [[0], [1], [0]], [4.0], 0.5, 0.5) == [
        [0.75],
        [-1.0],
        [5.0],
    ]


# ---------------------------------------------------------------- errors


def _inputs(shape=(4, 2), dtype=torch.float32):
    values = torch.zeros(shape, dtype=dtype)
    return {
        "rewards": torch.zeros(shape, dtype=dtype),
        "values": values,
        "dones": torch.zeros(shape, dtype=torch.bool),
        "last_value": torch.zeros(shape[1:], dtype=dtype),
    }


@pytest.mark.parametrize(
    ("override", "match"),
    [
        ({"dones": torch.zeros(4, 2, 1, dtype=torch.bool)}, r"dones \[4, 2, 1\]"),
        ({"rewards": torch.zeros(4, 2, 1)}, r"rewards \[4, 2, 1\]"),
        ({"values": torch.zeros(4, 1)}, r"values \[4, 1\]"),
        ({"last_value": torch.zeros(2, 1)}, "last_value"),
        ({"last_value": torch.zeros(())}, "last_value"),
        ({"last_value": torch.zeros(3)}, "last_value"),
        ({"values": torch.zeros(4, 2, dtype=torch.float64)}, "dtype"),
        ({"rewards": torch.zeros(4, 2, dtype=torch.long)}, "floating"),
        ({"dones": torch.zeros(4, 2, dtype=torch.long)}, "dones"),
    ],
)
def test_gae_rejects_bad_shapes_and_dtypes(override, match) -> None:
    inputs = _inputs()
    inputs.update(override)
    with pytest.raises(ValueError, match=match):
        core.gae(**inputs, gamma=0.9, lam=0.95)


@pytest.mark.parametrize(
    "inputs",
    [
        {**_inputs((4,)), "last_value": torch.zeros(1)},  # [T] needs a 0-d last_value
        _inputs((0, 2)),  # empty time axis
        _inputs((0,)),
        _inputs((4, 2, 3)),  # not [T] or [T, N]
    ],
)
def test_gae_rejects_bad_layouts(inputs) -> None:
    with pytest.raises(ValueError):
        core.gae(**inputs, gamma=0.9, lam=0.95)


outside_unit_interval = st.one_of(
    st.floats(max_value=0.0, exclude_max=True),
    st.floats(min_value=1.0, exclude_min=True),
    st.just(math.nan),
)


@given(bad=outside_unit_interval, good=unit_interval, which=st.sampled_from(["gamma", "lam"]))
def test_gae_rejects_gamma_or_lam_outside_unit_interval(bad: float, good: float, which: str) -> None:
    kwargs = {"gamma": good, "lam": good, which: bad}
    with pytest.raises(ValueError, match=which):
        core.gae(**_inputs(), **kwargs)
