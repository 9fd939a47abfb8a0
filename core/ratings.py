"""Ratings of players from the games they played: Elo by a Bradley-Terry fit."""

from __future__ import annotations

import math

import torch

from core._checks import check_floating, check_same_dtype, check_same_shape

ELO_SCALE = 400.0 / math.log(10.0)
"""Elo points per unit of log-strength: a gap of 400 points is odds of 10 to 1."""


def elo_ratings(
    wins: torch.Tensor,
    draws: torch.Tensor,
    anchor: int = 0,
    virtual_draws: float = 1.0,
    iterations: int = 2000,
) -> torch.Tensor:
    """Elo ratings of P players: the Bradley-Terry fit of their results, anchored at one player's 0.

    Player i beats player j with probability ``1 / (1 + 10 ** ((r_j - r_i) / 400))``, and a draw counts as half
    a win for each side (Elo's convention). With the log-strengths ``theta = r / ELO_SCALE``, the fit maximises
    the log-likelihood of the scores, ``sum_ij s_ij log sigmoid(theta_i - theta_j)``, where ``s_ij`` is the score
    of i against j (wins plus half the draws, plus half of ``virtual_draws``) and ``n_ij = s_ij + s_ji`` the games.
    It runs Zermelo's minorise-maximise iteration (Hunter's MM algorithm), every player at once::

        E_i     = sum_j n_ij * sigmoid(theta_i - theta_j)     # i's expected score
        theta_i = theta_i + log(S_i) - log(E_i)                # S_i = sum_j s_ij, i's actual score
        theta   = theta - theta[anchor]

    which increases the likelihood at every step and stops at the fit where every player's expected score equals
    its actual score. The fit depends only on the counts, not on the order in which the games were played (unlike
    sequential Elo updates).

    ``virtual_draws`` adds that many drawn games to every pair that met (BayesElo's prior, "Whole-History Rating"
    and BayesElo by Coulom): a player who never lost gets a finite rating, and two players who met once are not
    rated infinitely apart. With ``virtual_draws = 0`` this is the plain maximum-likelihood fit, which exists only
    when no group of players scored every point against the rest (Zermelo's condition); otherwise their ratings
    grow with ``iterations``. A player not connected to the anchor through games (directly or through others)
    has no rating: NaN.

    See "MM algorithms for generalized Bradley-Terry models", Hunter, 2004: Annals of Statistics 32(1), and
    "Die Berechnung der Turnier-Ergebnisse als ein Maximumproblem der Wahrscheinlichkeitsrechnung", Zermelo, 1929.

    Args:
        wins: ``[P, P]`` float, ``wins[i, j]`` the games player i won against player j (the diagonal is ignored).
        draws: ``[P, P]`` same dtype, the drawn games between i and j, each counted once, in ``[i, j]`` or
            ``[j, i]`` (the fit uses ``draws + draws.T``; the diagonal is ignored).
        anchor: the player whose rating is 0 (e.g. a uniform-random player).
        virtual_draws: drawn games added to each pair of players that met, >= 0.
        iterations: MM steps, >= 1 (the fit of a few players of ratings within ~1,500 points of each other
            settles to 1e-6 in well under the default 2,000).

    Returns:
        ``[P]`` the Elo ratings (``ELO_SCALE * theta``), same dtype and device as ``wins``; NaN where undefined.

    Raises:
        ValueError: non-square or mismatched shapes, non-float dtypes, ``anchor`` out of range, negative
            ``virtual_draws`` or ``iterations < 1``.
    """
    check_same_shape(wins=wins, draws=draws)
    check_floating(wins=wins, draws=draws)
    check_same_dtype(wins=wins, draws=draws)
    if wins.dim() != 2 or wins.shape[0] != wins.shape[1] or wins.shape[0] < 1:
        raise ValueError(f"wins and draws must be square [P, P] with P >= 1, got {list(wins.shape)}")
    players = wins.shape[0]
    if not 0 <= anchor < players:
        raise ValueError(f"anchor {anchor} is not a player index in [0, {players})")
    if virtual_draws < 0 or iterations < 1:
        raise ValueError(f"virtual_draws must be >= 0 and iterations >= 1, got {virtual_draws} and {iterations}")
    off = ~torch.eye(players, dtype=torch.bool, device=wins.device)
    drawn = torch.where(off, draws + draws.T, 0.0)
    won = torch.where(off, wins, 0.0)
    games = won + won.T + drawn
    met = games > 0
    score = won + 0.5 * (drawn + virtual_draws * met)  # s_ij
    games = score + score.T  # n_ij
    tiny = torch.finfo(wins.dtype).tiny
    # log S_i; a player without games has S_i = E_i = 0 and keeps theta_i (log tiny - log tiny); a score of 0
    # (virtual_draws = 0) makes the rating fall without bound
    log_actual = score.sum(dim=1).clamp_min(tiny).log()
    theta = torch.zeros(players, dtype=wins.dtype, device=wins.device)
    for _ in range(iterations):
        expected = (games * torch.sigmoid(theta[:, None] - theta[None, :])).sum(dim=1)  # E_i
        theta = theta + log_actual - expected.clamp_min(tiny).log()
        theta = theta - theta[anchor]
    # -- players connected to the anchor through games: the closure of "met" (log2 P squarings)
    reach = (met | ~off).to(wins.dtype)
    for _ in range(max(1, math.ceil(math.log2(players)))):
        reach = ((reach @ reach) > 0).to(wins.dtype)
    rated = reach[anchor] > 0
    return torch.where(rated, ELO_SCALE * theta, torch.full_like(theta, float("nan")))
