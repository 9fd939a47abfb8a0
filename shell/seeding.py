"""Every random stream of a run, derived from ``run.seed`` (DESIGN.md, "Seeds").

``run.seed_scheme = "spawn"`` (the default) derives each stream with NumPy's ``SeedSequence``: the
sub-envs of each reset (per rank, and anew for a resume at update k), each evaluation episode, and each
rank's sampling generator get their own child sequence, keyed by what the stream is for, so no two
streams of one run, and no two runs of different seeds, share a stream (a 31-bit seed drawn from each
child; a backend that takes one base seed for its pool gets the first sub-env's).

``"offset"`` is the rule of runs written before it (their saved configs name no scheme): sub-env i of rank
r at update k gets ``seed + num_envs * (r + k * world_size) + i``, evaluation episode i gets
``seed + 1_000_000 + i`` and rank r samples from ``seed + r``. Runs of adjacent seeds share most of those
streams (seeds 0 and 1 share 15 of 16 training sub-envs), which is why it is no longer the default; an old
run resumes and evaluates with it exactly.

A reset seed is either an ``int`` (the offset rule: the env adds its sub-env index) or a ``list[int]`` with
one seed per sub-env (the spawn rule); every backend's ``reset`` takes both (:func:`per_copy`).
"""

from __future__ import annotations

import numpy as np

SCHEMES = ("spawn", "offset")
EVAL_SEED_OFFSET = 1_000_000  # "offset": evaluation episode i is seeded seed + EVAL_SEED_OFFSET + i

# what a spawned stream is for: the first entry of its SeedSequence spawn key
_TRAIN, _EVAL, _SAMPLING, _OPPONENT, _POOL, _RATING, _OPENING = 0, 1, 2, 3, 4, 5, 6

ResetSeed = int | list[int]


def _child(seed: int, *key: int) -> int:
    """One seed in ``[0, 2**31)`` (what every backend takes, ale-py's signed ints included) from the child of
    ``SeedSequence(seed)`` at spawn key ``key``."""
    return int(np.random.SeedSequence(seed, spawn_key=key).generate_state(1)[0]) >> 1


def train_seeds(seed: int, scheme: str, num_envs: int, rank: int = 0, world_size: int = 1,
                update: int = 0) -> ResetSeed:
    """The reset seed of rank ``rank``'s ``num_envs`` training sub-envs when a run starts (``update = 0``) or
    resumes at update ``update``.

    Raises:
        ValueError: an unknown scheme.
    """
    if scheme == "offset":
        return seed + num_envs * (rank + update * world_size)
    _check(scheme)
    return [_child(seed, _TRAIN, rank, update, i) for i in range(num_envs)]


def eval_seeds(seed: int, scheme: str, episodes: int, first: int = 0) -> ResetSeed:
    """The reset seed of evaluation episodes ``first .. first + episodes - 1`` (one env copy each): the same
    episode gets the same seed in every evaluation of a run (``eval --video`` replays episode i with
    ``first = i``).

    Raises:
        ValueError: an unknown scheme.
    """
    if scheme == "offset":
        return seed + EVAL_SEED_OFFSET + first
    _check(scheme)
    return [_child(seed, _EVAL, first + i) for i in range(episodes)]


def sampling_seed(seed: int, scheme: str, rank: int = 0) -> int:
    """The seed of rank ``rank``'s generator (action sampling and minibatch order).

    Raises:
        ValueError: an unknown scheme.
    """
    if scheme == "offset":
        return seed + rank
    _check(scheme)
    return _child(seed, _SAMPLING, rank)


def opponent_seed(seed: int, scheme: str) -> int:
    """The seed of an evaluation opponent's moves (a turn-based game's random player): the same in every
    evaluation of a run.

    Raises:
        ValueError: an unknown scheme.
    """
    return _evaluation_stream(seed, scheme, 2, _OPPONENT)


def opening_seed(seed: int, scheme: str) -> int:
    """The seed of the random opening moves of a turn-based game's evaluation games (``run.eval_opening_moves``):
    the same openings in every evaluation of a run, and against every opponent.

    Raises:
        ValueError: an unknown scheme.
    """
    return _evaluation_stream(seed, scheme, 3, _OPENING)


def _evaluation_stream(seed: int, scheme: str, offsets: int, key: int) -> int:
    """One stream of every evaluation of a run: ``seed + offsets * EVAL_SEED_OFFSET`` by the "offset" rule, else the
    spawned child ``key``."""
    if scheme == "offset":
        return seed + offsets * EVAL_SEED_OFFSET
    _check(scheme)
    return _child(seed, key)


def pool_seed(seed: int, scheme: str, rank: int = 0) -> int:
    """The seed of rank ``rank``'s self-play pool ([selfplay]: which opponent each game draws, and the snapshots'
    sampled moves).

    Raises:
        ValueError: an unknown scheme.
    """
    if scheme == "offset":
        return seed + 3 * EVAL_SEED_OFFSET + rank
    _check(scheme)
    return _child(seed, _POOL, rank)


def rating_seed(seed: int, scheme: str, *key: int) -> int:
    """The seed of one set of a turn-based game's evaluation games that a snapshot of the self-play pool plays
    (its sampled moves, or its opponent's): ``key`` names the set (:func:`shell.evaluation.evaluate`), so the
    same games give the same results in every evaluation of a run, in any order. Both schemes spawn it (no run of
    the ``"offset"`` rule played such games).

    Raises:
        ValueError: an unknown scheme.
    """
    _check(scheme)
    return _child(seed, _RATING, *key)


def per_copy(seed: ResetSeed | None, copies: int) -> list[int | None]:
    """Each of ``copies`` sub-envs' seed from a reset seed: ``seed + i`` for an int, the list itself for a list.

    Raises:
        ValueError: a list whose length is not ``copies``.
    """
    if seed is None:
        return [None] * copies
    if isinstance(seed, int):
        return [seed + i for i in range(copies)]
    if len(seed) != copies:
        raise ValueError(f"{len(seed)} reset seeds for {copies} sub-envs")
    return list(seed)


def base_seed(seed: ResetSeed | None) -> int | None:
    """The one seed of a backend that seeds its whole pool from one (sub-env i then gets it plus i): an int
    as it is, the first sub-env's of a list."""
    return seed if seed is None or isinstance(seed, int) else seed[0]


def _check(scheme: str) -> None:
    if scheme not in SCHEMES:
        raise ValueError(f"run.seed_scheme = {scheme!r}; choose one of {list(SCHEMES)}")
