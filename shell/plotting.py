"""Learning curves from runs' metrics.csv, drawn with matplotlib."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from shell.errors import ConfigError


def read_curve(run_dir: Path) -> tuple[np.ndarray, np.ndarray]:
    """``(env_steps, episodic_return)`` of the updates in which episodes ended.

    Raises:
        ConfigError: no metrics.csv, or no finished episode in it.
    """
    path = Path(run_dir) / "metrics.csv"
    if not path.is_file():
        raise ConfigError(f"{run_dir}: no metrics.csv (is it a run dir?)")
    with open(path, newline="") as f:
        rows = [r for r in csv.DictReader(f) if r.get("episodic_return")]
    if not rows:
        raise ConfigError(f"{path}: no finished episode to plot")
    return (np.array([float(r["env_steps"]) for r in rows]), np.array([float(r["episodic_return"]) for r in rows]))


def read_ratings(run_dir: Path) -> tuple[np.ndarray, np.ndarray] | None:
    """``(env_steps, elo)`` of the updates with an evaluation in a turn-based game's metrics.csv (its ``elo``
    column: the policy's Elo rating, random = 0); None for a run without ratings."""
    with open(Path(run_dir) / "metrics.csv", newline="") as f:
        rows = [r for r in csv.DictReader(f) if r.get("elo")]
    if not rows:
        return None
    return np.array([float(r["env_steps"]) for r in rows]), np.array([float(r["elo"]) for r in rows])


def _env_id(run_dir: Path) -> str:
    import tomllib

    try:
        return tomllib.loads((run_dir / "config.toml").read_text())["env"]["id"]
    except (OSError, KeyError, tomllib.TOMLDecodeError):
        raise ConfigError(f"{run_dir}: no readable config.toml (is it a run dir?)") from None


def plot_runs(run_dirs: list[str | Path], out: str | Path | None = None) -> Path:
    """Write a PNG of episodic return against env steps: the mean over runs and its min-max spread.

    Curves are interpolated onto a common grid up to the shortest run's last step. Runs of a turn-based game with
    periodic evaluations (``run.eval_every``) get a second panel below: each run's Elo rating (random = 0) at its
    evaluations, which says more than a self-play return.
    Returns the PNG's path (default ``learning_curve.png`` in the first run dir).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    env_ids = {_env_id(Path(d)) for d in run_dirs}
    if len(env_ids) > 1:
        raise ConfigError(f"plot averages runs of one env; these runs are of {sorted(env_ids)}")
    curves = [read_curve(Path(d)) for d in run_dirs]
    end = min(steps[-1] for steps, _ in curves)
    start = max(steps[0] for steps, _ in curves)
    grid = np.linspace(start, end, 200) if end > start else np.array([end])
    ys = np.stack([np.interp(grid, steps, returns) for steps, returns in curves])
    ratings = [(Path(d), read_ratings(Path(d))) for d in run_dirs]
    ratings = [(d, r) for d, r in ratings if r is not None]
    if ratings:
        fig, (ax, elo_ax) = plt.subplots(2, 1, figsize=(7, 6.6), dpi=120, sharex=True)
        for run_dir, (steps, elo) in ratings:
            elo_ax.plot(steps, elo, marker="o", markersize=3, label=run_dir.name)
        elo_ax.set(xlabel="env steps", ylabel="Elo of the policy (random = 0)")
        elo_ax.grid(alpha=0.3)
        elo_ax.legend(loc="lower right", fontsize="small")
    else:
        fig, ax = plt.subplots(figsize=(7, 4.2), dpi=120)
    ax.plot(grid, ys.mean(axis=0), label=f"mean of {len(curves)} run(s)")
    if len(curves) > 1:
        ax.fill_between(grid, ys.min(axis=0), ys.max(axis=0), alpha=0.25, label="min-max over runs")
    ax.set(xlabel="" if ratings else "env steps", ylabel="episodic return (training)", title=env_ids.pop())
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right")
    fig.tight_layout()
    path = Path(out) if out else Path(run_dirs[0]) / "learning_curve.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path
