"""Property tests of ``core.turn_gae``: GAE over each row's own turns (turn-based games).

The reference compacts each row to its own turns (the steps where it acts), gives each turn the rewards and the
done of the steps up to its next turn (rewards after a done in between belong to no turn), drops a last turn whose
next turn lies beyond the rollout, and runs the eq. (16) reference of test_gae.py on that sequence.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import example, given, settings
from hypothesis import strategies as st
from test_gae import gae_reference

import core


def turn_gae_reference(rewards, values, dones, valid, last_value, last_valid, gamma, lam):
    """``[T][N]`` nested float lists in, ``([T][N]`` advantages, ``[T][N]`` complete) out."""
    T, N = len(rewards), len(rewards[0])
    advantages = [[0.0] * N for _ in range(T)]
    complete = [[False] * N for _ in range(T)]
    for n in range(N):
        turns = [t for t in range(T) if valid[t][n]]
        r, d, v = [], [], []
        for k, t in enumerate(turns):
            end = turns[k + 1] if k + 1 < len(turns) else T
            reward, done = float(rewards[t][n]), bool(dones[t][n])
            for u in range(t + 1, end):
                if done:
                    break  # the episode ended: later steps belong to the next one
                reward += float(rewards[u][n])
                done = bool(dones[u][n])
            r.append(reward)
            d.append(done)
            v.append(float(values[t][n]))
        kept = len(turns)
        if turns and not last_valid[n] and not d[-1]:
            kept -= 1  # its next turn lies beyond the rollout: no target
            last = v[-1]
        else:
            last = float(last_value[n])
        if kept == 0:
            continue
        adv = gae_reference([[x] for x in r[:kept]], [[x] for x in v[:kept]], [[x] for x in d[:kept]], [last],
                            gamma, lam)
        for k in range(kept):
            advantages[turns[k]][n] = adv[k][0]
            complete[turns[k]][n] = True
    return advantages, complete


@st.composite
def turn_inputs(draw):
    T, N = draw(st.integers(1, 16)), draw(st.integers(1, 4))
    floats = st.floats(-10, 10, allow_nan=False, width=32)
    grid = lambda elements: [[draw(elements) for _ in range(N)] for _ in range(T)]  # noqa: E731
    return (grid(floats), grid(floats), grid(st.booleans()), grid(st.booleans()),
            [draw(floats) for _ in range(N)], [draw(st.booleans()) for _ in range(N)],
            draw(st.floats(0, 1)), draw(st.floats(0, 1)))


def _call(rewards, values, dones, valid, last_value, last_valid, gamma, lam, dtype=torch.float64):
    f = lambda x, dt=dtype: torch.tensor(x, dtype=dt)  # noqa: E731
    return core.turn_gae(f(rewards), f(values), f(dones, torch.bool), f(valid, torch.bool), f(last_value),
                         f(last_valid, torch.bool), gamma, lam)


@settings(deadline=None)
@given(turn_inputs())
@example(([[0.0], [-1.0]], [[0.5], [0.0]], [[False], [True]], [[True], [False]], [0.0], [False], 0.9, 0.95))
@example(([[0.0], [0.0]], [[0.5], [0.2]], [[False], [False]], [[True], [False]], [0.3], [False], 0.9, 0.95))
def test_turn_gae_matches_the_reference(inputs):
    advantages, complete = _call(*inputs)
    expected, expected_complete = turn_gae_reference(*inputs)
    assert complete.tolist() == expected_complete
    np.testing.assert_allclose(advantages.numpy(), np.array(expected), rtol=1e-9, atol=1e-9)


@settings(deadline=None)
@given(turn_inputs())
def test_every_step_valid_is_gae(inputs):
    rewards, values, dones, _, last_value, _, gamma, lam = inputs
    T, N = len(rewards), len(rewards[0])
    advantages, complete = _call(rewards, values, dones, [[True] * N] * T, last_value, [True] * N, gamma, lam,
                                 torch.float32)
    f = lambda x: torch.tensor(x, dtype=torch.float32)  # noqa: E731
    assert complete.all()
    assert torch.equal(advantages, core.gae(f(rewards), f(values), torch.tensor(dones), f(last_value), gamma, lam))


def test_the_loser_of_a_game_gets_the_final_reward_at_its_last_move():
    # two seats, one row each: seat 0 moves at 0 and 2 (and wins at 2), seat 1 moves at 1; the game ends at 2
    valid = [[True, False], [False, True], [True, False]]
    rewards = [[0.0, 0.0], [0.0, 0.0], [1.0, -1.0]]
    dones = [[False, False], [False, False], [True, True]]
    advantages, complete = _call(rewards, [[0.0, 0.0]] * 3, dones, valid, [5.0, 5.0], [True, False], 0.9, 1.0)
    assert complete.tolist() == [[True, False], [False, True], [True, False]]
    assert advantages[:, 1].tolist() == [0.0, -1.0, 0.0]  # the loser's move at 1 gets -1, no bootstrap
    assert advantages[:, 0].tolist() == pytest.approx([0.9, 0.0, 1.0])  # gamma per own turn, not per step


def test_shapes_are_checked():
    x = torch.zeros(3, 2)
    with pytest.raises(ValueError, match="valid"):
        core.turn_gae(x, x, x.bool(), torch.zeros(3, 1, dtype=torch.bool), torch.zeros(2), torch.ones(2).bool(),
                      0.9, 0.9)
    with pytest.raises(ValueError, match="last_valid"):
        core.turn_gae(x, x, x.bool(), x.bool(), torch.zeros(2), torch.ones(3).bool(), 0.9, 0.9)
