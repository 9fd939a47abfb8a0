"""Draw the recorded wall-time ratios against Stable-Baselines3 as one bar chart (no new measurement).

    python bench/plot_speed.py [--out bench/results/speed_vs_sb3.png]

Reads the summaries of ``bench/results/<config>_vs_sb3*.json`` written by ``bench/vs_sb3.py``: the
median whole-process wall time of SB3 with one torch thread (its fastest setting on the benchmark
machine) over ours, on the same machine in the same run. Which file each bar comes from is listed
in ``SOURCES``, and the chart names them.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

RESULTS = Path(__file__).resolve().parent / "results"
# (label, file): the newest comparison of each config against SB3 (bench/BENCHMARKS.md)
SOURCES = [
    ("pendulum.toml", "pendulum_vs_sb3_a43e878.json"),
    ("cartpole.toml", "cartpole_vs_sb3_a43e878.json"),
    ("doorkey.toml (MiniGrid)", "doorkey_vs_sb3.json"),
    ("cartpole-lstm.toml (RecurrentPPO)", "cartpole-lstm_vs_sb3.json"),
    ("pendulum-lstm.toml (RecurrentPPO)", "pendulum-lstm_vs_sb3.json"),
    ("cartpole-envpool.toml", "cartpole-envpool_vs_sb3_a43e878.json"),
    ("pendulum-envpool.toml", "pendulum-envpool_vs_sb3_a43e878.json"),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(RESULTS / "speed_vs_sb3.png"))
    args = parser.parse_args()
    labels, ratios = [], []
    for label, name in SOURCES:
        summary = json.loads((RESULTS / name).read_text())["summary"]
        labels.append(label)
        ratios.append(summary["sb3_1thread_median_wall_s"] / summary["ours_median_wall_s"])
    # Drawn at the width the docs page shows it (about 750 px at 1280 px), so 10-11 pt text reads at 13-15 px.
    fig, ax = plt.subplots(figsize=(7.5, 3.9), dpi=100)
    bars = ax.barh(labels[::-1], ratios[::-1], color="#3f51b5")
    ax.bar_label(bars, labels=[f"{r:.1f}x" for r in ratios[::-1]], padding=3, fontsize=10)
    ax.tick_params(labelsize=10)
    ax.axvline(1.0, color="grey", lw=0.8)
    ax.set_xlabel("SB3 wall time / ppo-core wall time (medians of whole processes)", fontsize=10)
    ax.set_xlim(0, max(ratios) * 1.15)
    ax.set_title("Same task, same machine, same run: how many times faster", fontsize=11)
    fig.text(0.01, 0.01, "2 CPU cores, one torch thread each; data: bench/results/*_vs_sb3*.json "
             "(2026-11-30 to 2026-12-01)", fontsize=9, color="#555555")
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    fig.savefig(args.out)
    print(json.dumps({"plot": args.out, "ratios": dict(zip(labels, [round(r, 2) for r in ratios], strict=True))}))


if __name__ == "__main__":
    main()
