"""Property tests of ``core.bootstrap_truncated`` and of the truncation path into ``core.gae``.

Reference: "Time Limits in Reinforcement Learning", Pardo et al., 2018
(arXiv:1712.00378), section 3: at a time-limit truncation the target
bootstraps from the value of the true final observation,
``r_t + gamma * V(final_obs_t)``; at a termination it is ``r_t`` alone.
Termination wins when both flags are set.
"""

from __future__ import annotations

import math

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
    unit_interval,
)

import core


def bootstrap_reference(rewards, terminated, truncated, final_values, gamma):
    """Element by element, in Python floats."""
    out = []
    for r, term, trunc, fv in zip(rewards, terminated, truncated, final_values, strict=True):
        out.append(float(r) + gamma * float(fv) if (trunc and not term) else float(r))
    return out


def gae_with_time_limits_reference(rewards, values, terminated, truncated, final_values, last_value, gamma, lam):
    """GAE for one env whose episodes end by termination or by a time limit, in Python floats.

    delta_t = r_t + gamma * V(final_obs_t) - V_t   if truncated (and not terminated) at t
            = r_t - V_t                            if terminated at t
            = r_t + gamma * V_{t+1} - V_t          otherwise (V_T = last_value)
    A_t     = sum_{l >= 0} (gamma * lam)^l delta_{t+l}, stopping after the step that ends the episode.
    """
    num_steps = len(rewards)
    deltas, ended = [], []
    for t in range(num_steps):
        if terminated[t]:
            target = float(rewards[t])
        elif truncated[t]:
            target = float(rewards[t]) + gamma * float(final_values[t])
        else:
            next_value = last_value if t == num_steps - 1 else values[t + 1]
            target = float(rewards[t]) + gamma * float(next_value)
        deltas.append(target - float(values[t]))
        ended.append(bool(terminated[t] or truncated[t]))
    advantages = []
    for t in range(num_steps):
        total, weight = 0.0, 1.0
        for k in range(t, num_steps):
            total += weight * deltas[k]
            if ended[k]:
                break
            weight *= gamma * lam
        advantages.append(total)
    return advantages


@st.composite
def truncation_cases(draw):
    num_steps = draw(st.integers(1, 32))
    num_envs = draw(st.integers(1, 8))
    shape = (num_steps, num_envs)
    return {
        "rewards": draw(arrays(shape, 100.0)),
        "values": draw(arrays(shape, 100.0)),
        "terminated": draw(hnp.arrays(np.bool_, shape)),
        "truncated": draw(hnp.arrays(np.bool_, shape)),
        "final_values": draw(arrays(shape, 100.0)),
        "last_value": draw(arrays(num_envs, 100.0)),
        "gamma": draw(unit_interval),
        "lam": draw(unit_interval),
        "dtype": draw(dtypes),
    }


@given(case=truncation_cases(), flag_dtype=st.sampled_from([torch.bool, torch.float32, torch.float64]))
def test_bootstrap_truncated_matches_reference(case, flag_dtype) -> None:
    dtype = case["dtype"]
    rewards = as_tensor(case["rewards"], dtype)
    out = call_pure(
        core.bootstrap_truncated,
        rewards,
        torch.as_tensor(case["terminated"]).to(flag_dtype),
        torch.as_tensor(case["truncated"]).to(flag_dtype),
        as_tensor(case["final_values"], dtype),
        case["gamma"],
    )
    assert_meta(out, rewards, rewards.shape)
    expected = bootstrap_reference(
        case["rewards"].ravel(),
        case["terminated"].ravel(),
        case["truncated"].ravel(),
        case["final_values"].ravel(),
        case["gamma"],
    )
    magnitude = np.abs(case["rewards"]) + np.abs(case["final_values"])
    assert_close(out, np.reshape(expected, rewards.shape), atol=4 * eps(dtype) * magnitude)


@given(case=truncation_cases())
def test_bootstrap_truncated_never_reads_final_values_without_truncation(case) -> None:
    """Entries of final_values where no bootstrap happens may hold NaN or inf; none leaks out."""
    dtype = case["dtype"]
    bootstrap = case["truncated"] & ~case["terminated"]
    final_values = as_tensor(case["final_values"], dtype)
    garbage = torch.full_like(final_values, math.nan)
    garbage.view(-1)[::2] = math.inf
    poisoned = torch.where(torch.as_tensor(bootstrap), final_values, garbage)
    args = (torch.as_tensor(case["terminated"]), torch.as_tensor(case["truncated"]))
    clean = core.bootstrap_truncated(as_tensor(case["rewards"], dtype), *args, final_values, case["gamma"])
    dirty = core.bootstrap_truncated(as_tensor(case["rewards"], dtype), *args, poisoned, case["gamma"])
    assert torch.isfinite(dirty).all()
    assert torch.equal(clean, dirty)


@given(case=truncation_cases())
@example(
    case={
        "rewards": np.ones((3, 2), np.float32),
        "values": np.full((3, 2), 2.0, np.float32),
        "terminated": np.array([[True, False], [False, False], [True, False]]),
        "truncated": np.array([[True, True], [False, False], [False, True]]),  # both set at [0, 0]
        "final_values": np.full((3, 2), 50.0, np.float32),
        "last_value": np.array([-3.0, 4.0], np.float32),
        "gamma": 0.9,
        "lam": 0.95,
        "dtype": torch.float32,
    }
)
def test_fold_then_gae_bootstraps_from_final_observation(case) -> None:
    """The shell's recipe: fold with bootstrap_truncated, pass dones = terminated | truncated to gae."""
    dtype = case["dtype"]
    terminated, truncated = torch.as_tensor(case["terminated"]), torch.as_tensor(case["truncated"])
    rewards = core.bootstrap_truncated(
        as_tensor(case["rewards"], dtype),
        terminated,
        truncated,
        as_tensor(case["final_values"], dtype),
        case["gamma"],
    )
    advantages = core.gae(
        rewards,
        as_tensor(case["values"], dtype),
        terminated | truncated,
        as_tensor(case["last_value"], dtype),
        case["gamma"],
        case["lam"],
    )
    num_steps, num_envs = case["rewards"].shape
    expected = np.zeros((num_steps, num_envs))
    for n in range(num_envs):
        expected[:, n] = gae_with_time_limits_reference(
            case["rewards"][:, n],
            case["values"][:, n],
            case["terminated"][:, n],
            case["truncated"][:, n],
            case["final_values"][:, n],
            case["last_value"][n],
            case["gamma"],
            case["lam"],
        )
    per_env = (
        np.abs(case["rewards"]).sum(0)
        + 2 * np.abs(case["values"]).sum(0)
        + np.abs(case["final_values"]).sum(0)
        + np.abs(case["last_value"])
    ).astype(np.float64)
    assert_close(
        advantages,
        expected,
        atol=np.broadcast_to(8.0 * (num_steps + 2) * eps(dtype) * per_env, expected.shape),
    )


def test_truncation_hand_worked_example() -> None:
    # One env, T = 2, gamma = 0.5, lam = 1. Step 0 is cut by the time limit with V(final_obs) = 10,
    # step 1 runs on in a new episode and the rollout ends with last_value = 5.
    #   folded rewards: [1 + 0.5 * 10, 1] = [6, 1]
    #   t=1: delta = 1 + 0.5 * 5 - 3 = 0.5               A_1 = 0.5
    #   t=0: delta = 6 - 2 = 4 (done: no V_1, no A_1)    A_0 = 4
    # A NaN in final_values at step 1 (no truncation there) is never read.
    rewards = core.bootstrap_truncated(
        torch.tensor([1.0, 1.0]),
        torch.tensor([False, False]),
        torch.tensor([True, False]),
        torch.tensor([10.0, math.nan]),
        gamma=0.5,
    )
    assert torch.equal(rewards, torch.tensor([6.0, 1.0]))
    advantages = core.gae(
        rewards, torch.tensor([2.0, 3.0]), torch.tensor([True, False]), torch.tensor(5.0), gamma=0.5, lam=1.0
    )
    assert torch.equal(advantages, torch.tensor([4.0, 0.5]))
    # Terminated and truncated together: termination wins, no bootstrap.
    both = core.bootstrap_truncated(
        torch.tensor([1.0]), torch.tensor([1.0]), torch.tensor([1.0]), torch.tensor([10.0]), gamma=0.5
    )
    assert torch.equal(both, torch.tensor([1.0]))


@pytest.mark.parametrize(
    ("override", "match"),
    [
        ({"terminated": torch.zeros(4, 2, 1, dtype=torch.bool)}, r"terminated \[4, 2, 1\]"),
        ({"final_values": torch.zeros(4)}, r"final_values \[4\]"),
        ({"final_values": torch.zeros(4, 2, dtype=torch.float64)}, "dtype"),
        ({"truncated": torch.zeros(4, 2, dtype=torch.int64)}, "truncated"),
        ({"gamma": 1.5}, "gamma"),
        ({"gamma": -0.1}, "gamma"),
    ],
)
def test_bootstrap_truncated_rejects_bad_inputs(override, match) -> None:
    inputs = {
        "rewards": torch.zeros(4, 2),
        "terminated": torch.zeros(4, 2, dtype=torch.bool),
        "truncated": torch.zeros(4, 2, dtype=torch.bool),
        "final_values": torch.zeros(4, 2),
        "gamma": 0.9,
    }
    inputs.update(override)
    with pytest.raises(ValueError, match=match):
        core.bootstrap_truncated(**inputs)
