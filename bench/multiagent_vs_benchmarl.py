"""Several agents: configs/simple-spread.toml (or, with --task balance, configs/vmas-balance.toml) against
BenchMARL's MAPPO, side by side, and our learning curve.

    python bench/multiagent_vs_benchmarl.py race [--seeds 0 1 2] [--benchmarl-python .benchmarl-venv/bin/python]
        Alternating seed by seed (one torch thread on both sides), whole processes: ours (with --also-sync
        a second time with env.vectorization_mode = "sync", one core) trains
        configs/simple-spread.toml with a deterministic 100-episode evaluation every `--eval-every` updates
        and stops at the return bar (`--bar`, the team return summed over the three agents; -45 = -15 per
        agent) or at `--max-steps` joint env steps; BenchMARL runs bench/benchmarl_spread.py (its MAPPO
        defaults, max_cycles 25) for `--frames` frames. Writes bench/results/multiagent_race.json.
    python bench/multiagent_vs_benchmarl.py curve [--seeds 0] [--steps 1000000] [--set KEY=VALUE ...]
        One long run with a 100-episode evaluation every 25 updates; writes
        bench/results/multiagent_curve_s<seed>.json (env steps, training and evaluation returns).
    python bench/multiagent_vs_benchmarl.py plot [--seeds 0]
        Draws bench/results/multiagent_curve_s<seed>.json (and the race's BenchMARL points) as
        bench/results/multiagent_curve_s<seed>.png, with the return bar and reference policies.
    python bench/multiagent_vs_benchmarl.py profile [--steps 48000]
        Where the time of our run goes (cProfile of shell.train): the env's own step, our env layer, the
        policy in the rollout, the update, the evaluation.

Env steps are joint steps of the env copies, as BenchMARL counts frames.

--task balance: VMAS balance (4 agents, BenchMARL's task defaults) on env.backend = "vmas"; the bar is 186 for the
team (46.5 per agent) within 120,000 steps, evaluated on 100 episodes every 2 updates (6,400 steps); BenchMARL runs
bench/benchmarl_spread.py --task balance. Its results are written as bench/results/vmas_balance_*.json.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"

OURS = """
import json, sys, time
import torch
torch.set_num_threads(1)
import shell
seed, bar, max_steps, every = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
run_dir = sys.argv[5]
sets = json.loads(sys.argv[6])
config = sys.argv[7]
rows = []
def record(row):
    rows.append(row)
result = shell.train(config, seed=seed, total_timesteps=max_steps, run_dir=run_dir, progress=False,
                     overrides={"run.eval_every": every, "run.eval_episodes": 100, **sets},
                     callbacks=[record, shell.StopOnReward(bar)])
evals = [(r["env_steps"], r["seconds"], r["eval_return"]) for r in rows if r["eval_return"] != ""]
reached = next((s for s, _, e in evals if e >= bar), None)
print(json.dumps({"summary": result.summary, "evals": evals, "reached_at": reached}))
"""


# what each task's race and curve run: our config, its agents, the team bar, our step budget and evaluation interval
# (updates), the prefix of its result files
TASKS = {
    "simple_spread": {"config": "simple-spread", "agents": 3, "bar": -45.0, "max_steps": 500_000, "eval_every": 10,
                      "results": "multiagent"},
    "balance": {"config": "vmas-balance", "agents": 4, "bar": 186.0, "max_steps": 120_000, "eval_every": 2,
                "results": "vmas_balance"},
}


def commit() -> str:
    out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    return out.stdout.strip() or "unknown"


def timed(cmd: list[str]) -> tuple[float, dict]:
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"{' '.join(cmd[:3])} ... failed:\n{proc.stderr[-2000:]}")
    return wall, json.loads(proc.stdout.strip().splitlines()[-1])


def ours(seed: int, bar: float, max_steps: int, every: int, sets: dict,
         config: str = "simple-spread") -> tuple[float, dict]:
    with tempfile.TemporaryDirectory() as tmp:
        return timed([sys.executable, "-c", OURS, str(seed), str(bar), str(max_steps), str(every),
                      str(Path(tmp) / "run"), json.dumps(sets), config])


def parse_sets(items: list[str]) -> dict:
    out = {}
    for item in items:
        key, _, value = item.partition("=")
        try:
            out[key] = json.loads(value)
        except json.JSONDecodeError:
            out[key] = value
    return out


def race(args: argparse.Namespace) -> dict:
    rows = []
    task = TASKS[args.task]
    for seed in args.seeds:
        wall, mine = ours(seed, args.bar, args.max_steps, args.eval_every, parse_sets(args.set), task["config"])
        one_core = None
        if args.also_sync:  # the same run with the copies stepped in turn in one process (one core)
            one_core, _ = ours(seed, args.bar, args.max_steps, args.eval_every,
                               {**parse_sets(args.set), "env.vectorization_mode": "sync"}, task["config"])
        theirs_wall, theirs = timed([args.benchmarl_python, str(ROOT / "bench" / "benchmarl_spread.py"),
                                     "--task", args.task, "--frames", str(args.frames), "--seed", str(seed)])
        summary = mine["summary"]
        # ours at BenchMARL's own final evaluation return (per agent, times the agents for the team): the first of
        # our evaluations at or above it, with its training seconds (evaluation time excluded) and env steps
        level = task["agents"] * theirs["eval_return_per_agent_last"]
        at_level = next(((s, sec) for s, sec, e in mine["evals"] if e >= level), None)
        row = {"seed": seed, "ours_wall_s": round(wall, 1), "ours_env_steps": summary["env_steps"],
               "ours_reached_bar_at": mine["reached_at"], "ours_eval_team": summary["eval_return_mean"],
               "ours_eval_per_agent": summary["eval_return_per_agent"], "ours_evals": mine["evals"],
               "benchmarl_wall_s": round(theirs_wall, 1), "benchmarl_frames": theirs["frames"],
               "benchmarl_eval_per_agent": theirs["eval_return_per_agent_last"],
               "benchmarl_train_per_agent_last": theirs["train_return_per_agent_last"],
               "ratio_benchmarl_over_ours": round(theirs_wall / wall, 2),
               "ours_sync_wall_s": None if one_core is None else round(one_core, 1),
               "benchmarl_final_level_team": round(level, 2),
               "ours_at_that_level_env_steps": None if at_level is None else at_level[0],
               "ours_at_that_level_train_s": None if at_level is None else at_level[1]}
        rows.append(row)
        print(json.dumps(row), flush=True)
    return {"commit": commit(), "date": time.strftime("%Y-%m-%d", time.gmtime()), "bar_team": args.bar,
            "rows": rows,
            "summary": {"ours_median_wall_s": statistics.median(r["ours_wall_s"] for r in rows),
                        "benchmarl_median_wall_s": statistics.median(r["benchmarl_wall_s"] for r in rows),
                        "seeds_reaching_bar": sum(r["ours_reached_bar_at"] is not None for r in rows),
                        "median_ratio": statistics.median(r["ratio_benchmarl_over_ours"] for r in rows)}}


def curve(args: argparse.Namespace) -> dict:
    out = {}
    for seed in args.seeds:
        with tempfile.TemporaryDirectory() as tmp:
            run = Path(tmp) / "run"
            cmd = [sys.executable, str(ROOT / "main.py"), "--config", TASKS[args.task]["config"], "--seed", str(seed),
                   "--total-timesteps", str(args.steps), "--run-dir", str(run),
                   "--set", f"run.eval_every={args.curve_every}",
                   "--set", "run.eval_episodes=100"]
            for item in args.set:
                cmd += ["--set", item]
            wall, summary = timed(cmd)
            import csv

            with open(run / "metrics.csv") as f:
                rows = [(int(r["env_steps"]), float(r["episodic_return"]) if r["episodic_return"] else None,
                         float(r["eval_return"]) if r["eval_return"] else None) for r in csv.DictReader(f)]
        out = {"commit": commit(), "date": time.strftime("%Y-%m-%d", time.gmtime()), "seed": seed, "sets": args.set,
               "wall_s": round(wall, 1), "summary": summary,
               "evals": [(s, e) for s, _, e in rows if e is not None],
               "train": [(s, t) for s, t, _ in rows if t is not None]}
        (RESULTS / f"{TASKS[args.task]['results']}_curve_s{seed}.json").write_text(json.dumps(out, indent=1) + "\n")
    return out


# Team returns of reference policies on 100 seeded episodes (seeds 1000-1099), 2026-12-02: each agent pushing toward
# a landmark every step (the bang-bang direction of the larger component of the relative position)
REFERENCES = {"no-op": -74.6, "each to its nearest landmark": -55.4, "agent i to landmark i": -45.2}


def plot(args: argparse.Namespace) -> dict:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    seed = args.seeds[0]
    data = json.loads((RESULTS / f"multiagent_curve_s{seed}.json").read_text())
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(*zip(*data["train"], strict=True), color="tab:blue", alpha=0.35, lw=1, label="training episodes")
    ax.plot(*zip(*data["evals"], strict=True), color="tab:blue", marker="o", ms=3, label="deterministic eval (100)")
    race = RESULTS / "multiagent_race.json"
    if race.exists():
        rows = json.loads(race.read_text())["rows"]
        ax.scatter([r["benchmarl_frames"] for r in rows], [3 * r["benchmarl_eval_per_agent"] for r in rows],
                   color="tab:red", zorder=3, label="BenchMARL MAPPO, 120k frames (x3 agents)")
    ax.axhline(-45, color="black", ls="--", lw=1, label="bar: -45 (-15 per agent)")
    for (name, value), style in zip(REFERENCES.items(), (":", "-.", (0, (1, 3))), strict=True):
        ax.axhline(value, color="gray", ls=style, lw=1, label=f"{name}: {value}")
    ax.set_xlabel("env steps (joint)")
    ax.set_ylabel("team return (sum over 3 agents)")
    ax.set_title(f"simple_spread, configs/simple-spread.toml, seed {seed}")
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    out = RESULTS / f"multiagent_curve_s{seed}.png"
    fig.savefig(out, dpi=110)
    return {"plot": str(out)}


def profile(args: argparse.Namespace) -> dict:
    import torch

    import shell

    torch.set_num_threads(1)
    profiler = cProfile.Profile()
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        profiler.enable()
        shell.train("simple-spread", total_timesteps=args.steps, run_dir=Path(tmp) / "run", progress=False,
                    overrides={"run.eval_episodes": 100})
        profiler.disable()
        total = time.perf_counter() - start
    stats = pstats.Stats(profiler)

    def cumulative(fragment: str, name: str) -> float:
        return sum(v[3] for k, v in stats.stats.items() if fragment in k[0] and k[2] == name)

    parts = {
        "total": total,
        "env_own_step (mpe2 ParallelEnv.step)": cumulative("mpe2", "step") or cumulative("pettingzoo", "step"),
        "env_layer_step (ParallelVecEnv.step)": cumulative("shell/envs/pettingzoo/vector.py", "step"),
        "rollout (Collector.steps, incl. env)": cumulative("shell/rollout.py", "collect"),
        "update (PPO.update)": cumulative("shell/ppo.py", "update"),
        "evaluation": cumulative("shell/evaluation.py", "evaluate"),
    }
    return {"commit": commit(), "date": time.strftime("%Y-%m-%d", time.gmtime()), "env_steps": args.steps,
            "seconds": {k: round(v, 2) for k, v in parts.items()}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bench", choices=("race", "curve", "plot", "profile"))
    parser.add_argument("--task", choices=sorted(TASKS), default="simple_spread")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--bar", type=float, default=None, help="the team's return bar (default: the task's)")
    parser.add_argument("--max-steps", type=int, default=None, help="our step budget (default: the task's)")
    parser.add_argument("--eval-every", type=int, default=None, help="updates between evaluations (the task's)")
    parser.add_argument("--curve-every", type=int, default=25, help="curve: updates between evaluations")
    parser.add_argument("--frames", type=int, default=120_000)
    parser.add_argument("--steps", type=int, default=1_000_000)
    parser.add_argument("--set", action="append", default=[], help="KEY=VALUE overrides of our config")
    parser.add_argument("--also-sync", action="store_true", help="race: time ours with vectorization_mode sync too")
    parser.add_argument("--benchmarl-python", default=str(ROOT / ".benchmarl-venv" / "bin" / "python"))
    args = parser.parse_args()
    task = TASKS[args.task]
    args.bar = task["bar"] if args.bar is None else args.bar
    args.max_steps = task["max_steps"] if args.max_steps is None else args.max_steps
    args.eval_every = task["eval_every"] if args.eval_every is None else args.eval_every
    if args.bench == "race":
        out = race(args)
        (RESULTS / f"{task['results']}_race.json").write_text(json.dumps(out, indent=1) + "\n")
    elif args.bench == "curve":
        args.seeds = args.seeds[:1] if args.seeds == [0, 1, 2] else args.seeds
        out = curve(args)
    elif args.bench == "plot":
        out = plot(args)
    else:
        args.steps = 48_000 if args.steps == 1_000_000 else args.steps
        out = profile(args)
        (RESULTS / "multiagent_profile.json").write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps(out.get("summary", out.get("seconds", {}))))


if __name__ == "__main__":
    main()
