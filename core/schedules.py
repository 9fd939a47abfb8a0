"""Learning-rate schedules as pure functions of progress."""

from __future__ import annotations


def linear_schedule(start: float, end: float, step: int, num_steps: int) -> float:
    """Linear interpolation from ``start`` (at step 0) to ``end`` (at ``num_steps``).

    CleanRL's ``anneal_lr`` is ``linear_schedule(lr, 0.0, update, num_updates)``
    evaluated before each update (``update`` counted from 0).

    Args:
        start: value at step 0.
        end: value at ``num_steps``.
        step: current step, clamped into ``[0, num_steps]``.
        num_steps: positive length of the schedule.

    Returns:
        A Python float.

    Raises:
        ValueError: if ``num_steps`` is not positive.
    """
    if num_steps <= 0:
        raise ValueError(f"num_steps must be positive, got {num_steps}")
    frac = min(max(step, 0), num_steps) / num_steps
    if frac == 1.0:
        return end  # exact at the end; start + (end - start) can round
    return start + (end - start) * frac
