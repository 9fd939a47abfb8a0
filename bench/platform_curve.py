"""Platform's learning curves: the linked config against the same config with every parameter in the ratio.

    python bench/sweep.py platform --seeds 0-5 --jobs 1 --bar 0.987 --keep runs/platform_linked
    python bench/sweep.py platform --seeds 0-5 --jobs 1 --bar 0.987 --keep runs/platform_unlinked \\
        --set 'policy.action_links={}'
    python bench/platform_curve.py runs/platform_linked runs/platform_unlinked --out platform_curve.png

Each folder holds the run dirs ``s<seed>`` that ``bench/sweep.py --keep`` wrote. The plot shows, against env
steps, the mean training-episode return of each update (``episodic_return`` of metrics.csv) averaged over the
seeds, with the band from the lowest to the highest seed, one line per folder; a dashed line marks MP-DQN's
published 0.987 (Bester et al. 2019). The script also prints, per folder, the steps at which each seed's
training return first reached 0.95.
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

MP_DQN = 0.987


def curves(folder: Path) -> tuple[np.ndarray, np.ndarray]:
    """``(env_steps [U], returns [S, U])``: each seed's training-episode return per update (carried forward
    over an update without a finished episode), on the steps of the shortest run."""
    runs = sorted(folder.glob("s*/metrics.csv"))
    if not runs:
        raise SystemExit(f"{folder}: no s<seed>/metrics.csv (bench/sweep.py --keep writes them)")
    rows = []
    for path in runs:
        with path.open() as f:
            table = [(int(r["env_steps"]), float(r["episodic_return"]) if r["episodic_return"] else np.nan)
                     for r in csv.DictReader(f)]
        steps = np.array([s for s, _ in table])
        values = np.array([v for _, v in table])
        for i in range(1, len(values)):  # carry the last finished episode's return forward
            if np.isnan(values[i]):
                values[i] = values[i - 1]
        rows.append((steps, values))
    length = min(len(s) for s, _ in rows)
    return rows[0][0][:length], np.stack([v[:length] for _, v in rows])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="+", type=Path)
    parser.add_argument("--labels", nargs="+", help="one per folder (default: the folder names)")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    labels = args.labels or [f.name for f in args.folders]
    fig, ax = plt.subplots(figsize=(7, 4))
    for folder, label in zip(args.folders, labels, strict=True):
        steps, returns = curves(folder)
        mean = np.nanmean(returns, axis=0)
        ax.plot(steps, mean, label=f"{label} ({len(returns)} seeds)")
        ax.fill_between(steps, np.nanmin(returns, axis=0), np.nanmax(returns, axis=0), alpha=0.2)
        first = [int(steps[np.argmax(r >= 0.95)]) if (r >= 0.95).any() else None for r in returns]
        print(f"{label}: steps to a training return of 0.95, per seed: {first}")
    ax.axhline(MP_DQN, color="grey", linestyle="--", linewidth=1, label="MP-DQN, published (0.987)")
    ax.set_xlabel("env steps")
    ax.set_ylabel("training episode return")
    ax.set_title("Platform-v0 (configs/platform.toml)")
    ax.set_ylim(0, 1.05)
    ax.legend(loc="lower right")
    fig.tight_layout()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out, dpi=110)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
