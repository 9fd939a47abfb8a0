"""Property tests of ``core.elo_ratings``: the Bradley-Terry (Elo) fit of a win/draw/loss table.

The reference is Hunter's MM step written in strengths ``gamma = exp(theta)`` with plain floats, every player at
once: ``gamma_i <- W_i / sum_j n_ij / (gamma_i + gamma_j)``, then divided by the anchor's strength. Beside it: the
fit's defining property (every rated player's expected score equals its actual score), the closed form for two
players, independence of the players' order, and NaN for players that never met the anchor's group.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import example, given, settings
from hypothesis import strategies as st

import core


def elo_reference(wins, draws, anchor, virtual_draws, iterations):
    """``[P][P]`` nested lists in, ``[P]`` Elo ratings (None where not connected to the anchor) out."""
    P = len(wins)
    n = [[0.0] * P for _ in range(P)]
    s = [[0.0] * P for _ in range(P)]
    for i in range(P):
        for j in range(P):
            if i != j:
                drawn = draws[i][j] + draws[j][i]
                met = wins[i][j] + wins[j][i] + drawn > 0
                s[i][j] = wins[i][j] + 0.5 * drawn + (0.5 * virtual_draws if met else 0.0)
    for i in range(P):
        for j in range(P):
            n[i][j] = s[i][j] + s[j][i]
    score = [sum(row) for row in s]
    gamma = [1.0] * P
    for _ in range(iterations):
        new = []
        for i in range(P):
            denominator = sum(n[i][j] / (gamma[i] + gamma[j]) for j in range(P) if n[i][j] > 0)
            new.append(score[i] / denominator if denominator > 0 else gamma[i])
        gamma = [g / new[anchor] for g in new]
    connected = {anchor}
    for _ in range(P):
        connected |= {j for i in connected for j in range(P) if n[i][j] > 0}
    return [400 * math.log10(g) if i in connected else None for i, g in enumerate(gamma)]


@st.composite
def tables(draw, max_players=5):
    P = draw(st.integers(1, max_players))
    counts = st.integers(0, 12).map(float)
    wins = [[draw(counts) if i != j else 0.0 for j in range(P)] for i in range(P)]
    draws = [[draw(counts) if i < j else 0.0 for j in range(P)] for i in range(P)]
    return wins, draws, draw(st.integers(0, P - 1)), draw(st.sampled_from([0.5, 1.0, 2.0]))


def _call(wins, draws, anchor, virtual_draws, iterations=2000, dtype=torch.float64):
    return core.elo_ratings(torch.tensor(wins, dtype=dtype), torch.tensor(draws, dtype=dtype), anchor,
                            virtual_draws, iterations)


def _close(got, expected, tol=1e-6):
    for g, e in zip(got.tolist(), expected, strict=True):
        if e is None:
            assert math.isnan(g)
        else:
            assert g == pytest.approx(e, abs=tol, rel=tol)


@settings(max_examples=30)
@given(tables())
@example(([[0.0, 12.0], [0.0, 0.0]], [[0.0, 0.0], [0.0, 0.0]], 0, 1.0))  # one player never lost
@example(([[0.0, 0.0, 0.0], [0.0, 0.0, 3.0], [0.0, 1.0, 0.0]], [[0.0] * 3] * 3, 0, 1.0))  # the anchor alone
def test_elo_matches_the_reference(table):
    wins, draws, anchor, virtual = table
    _close(_call(wins, draws, anchor, virtual, iterations=60), elo_reference(wins, draws, anchor, virtual, 60))


@settings(max_examples=20)
@given(tables(max_players=4))
def test_expected_scores_equal_actual_scores_at_the_fit(table):
    """The maximum of the likelihood: for every rated player, sum_j n_ij P(i beats j) = its score."""
    wins, draws, anchor, virtual = table
    ratings = _call(wins, draws, anchor, virtual).numpy()
    w, d = np.array(wins), np.array(draws)
    np.fill_diagonal(w, 0.0)
    np.fill_diagonal(d, 0.0)
    drawn = d + d.T
    met = (w + w.T + drawn) > 0
    s = w + 0.5 * (drawn + virtual * met)
    n = s + s.T
    rated = ~np.isnan(ratings)
    r = np.where(rated, ratings, 0.0)
    p = 1 / (1 + 10 ** ((r[None, :] - r[:, None]) / 400))
    expected = (n * p * rated[None, :]).sum(axis=1)
    np.testing.assert_allclose(expected[rated], s.sum(axis=1)[rated], atol=1e-6 * max(1.0, n.sum()))
    assert ratings[anchor] == 0.0


@settings(max_examples=20)
@given(st.integers(1, 50), st.integers(1, 50))
def test_two_players_closed_form(won, lost):
    """Two players, no prior: the rating gap is 400 log10 of the odds (the fit settles within 50 steps)."""
    ratings = _call([[0.0, won], [lost, 0.0]], [[0.0, 0.0], [0.0, 0.0]], 0, 0.0, iterations=100)
    assert ratings[1].item() == pytest.approx(400 * math.log10(lost / won), abs=1e-9)


@settings(max_examples=20)
@given(tables(), st.randoms(use_true_random=False))
def test_order_of_the_players_does_not_matter(table, rng):
    wins, draws, anchor, virtual = table
    P = len(wins)
    order = list(range(P))
    rng.shuffle(order)
    permuted = ([[wins[i][j] for j in order] for i in order], [[draws[i][j] for j in order] for i in order])
    got = _call(*permuted, order.index(anchor), virtual, iterations=200)
    want = _call(wins, draws, anchor, virtual, iterations=200)
    np.testing.assert_allclose(got.numpy(), want.numpy()[order], atol=1e-9, equal_nan=True)


def test_draws_count_once_in_either_corner_and_float32_works():
    wins = [[0.0, 6.0, 0.0], [2.0, 0.0, 4.0], [0.0, 1.0, 0.0]]
    upper = [[0.0, 3.0, 0.0], [0.0, 0.0, 2.0], [0.0, 0.0, 0.0]]
    lower = [list(row) for row in zip(*upper, strict=True)]
    a, b = _call(wins, upper, 0, 1.0), _call(wins, lower, 0, 1.0)
    np.testing.assert_allclose(a.numpy(), b.numpy(), atol=1e-9)
    single = _call(wins, upper, 0, 1.0, dtype=torch.float32)
    assert single.dtype == torch.float32
    np.testing.assert_allclose(single.numpy(), a.numpy(), atol=1e-2)


def test_bad_inputs_raise():
    square = torch.zeros(3, 3)
    with pytest.raises(ValueError, match="square"):
        core.elo_ratings(torch.zeros(3, 2), torch.zeros(3, 2))
    with pytest.raises(ValueError, match="shape mismatch"):
        core.elo_ratings(square, torch.zeros(2, 2))
    with pytest.raises(ValueError, match="anchor"):
        core.elo_ratings(square, square, anchor=3)
    with pytest.raises(ValueError, match="virtual_draws"):
        core.elo_ratings(square, square, virtual_draws=-1.0)
    with pytest.raises(ValueError, match="floating"):
        core.elo_ratings(square.long(), square.long())
