"""Invalid-action masks: ``main.py`` against sb3-contrib's MaskablePPO, side by side, and two checks of our own.

Times whole processes (start to exit: imports, training and the final evaluation), alternating the two
libraries seed by seed so that machine noise hits both alike, one torch thread on both sides. Needs the
bench extra (``pip install -e ".[bench]"``).

    python bench/masks_vs_sb3.py invalid-action [--seeds 0 1 2 3 4]
        configs/invalid-action.toml against sb3-contrib's documented example: MaskablePPO("MlpPolicy",
        InvalidActionEnvDiscrete(dim=80, n_invalid_actions=60), gamma=0.4).learn(5_000), then
        evaluate_policy over 20 episodes (deterministic, masked).
    python bench/masks_vs_sb3.py taxi [--seeds 0 1 2] [--sb3-steps 200000] [--set KEY=VALUE ...]
        configs/taxi.toml against MaskablePPO on 8 envs (n_steps 256, batch 256, ent_coef 0.01, masks through
        ActionMasker from Taxi's own action_mask), 100 deterministic evaluation episodes on both sides; our
        envs count the actions they receive against their own masks (bench/illegal_counter.py).
    python bench/masks_vs_sb3.py entropy [--seeds 0 1 2 3 4]
        configs/taxi.toml with the per-state normalised entropy bonus (ppo.ent_coef left out) against the fixed
        coefficient it equals where every action is legal (0.01 / ln 6).
    python bench/masks_vs_sb3.py memory [--seeds 0 1 2]
        The CueChoice task of tests/integration/mask_envs.py (a cue shown once, a masked choice 3 steps later)
        with LSTM, GRU and feed-forward masked policies.

Each writes bench/results/masks_<name>.json: the rows and a summary (medians, ratios).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

SB3_INVALID = """
import json, sys, time
import torch
torch.set_num_threads(1)
from sb3_contrib import MaskablePPO
from sb3_contrib.common.envs import InvalidActionEnvDiscrete
from sb3_contrib.common.maskable.evaluation import evaluate_policy
seed = int(sys.argv[1])
env = InvalidActionEnvDiscrete(dim=80, n_invalid_actions=60)
model = MaskablePPO("MlpPolicy", env, gamma=0.4, seed=seed, verbose=0)
start = time.perf_counter()
model.learn(5_000)
learn = time.perf_counter() - start
returns, _ = evaluate_policy(model, env, n_eval_episodes=20, warn=False, return_episode_rewards=True)
print(json.dumps({"eval_return_mean": sum(returns) / len(returns), "learn_seconds": learn}))
"""

SB3_TAXI = """
import json, sys, time
import torch
torch.set_num_threads(1)
import gymnasium as gym
from sb3_contrib import MaskablePPO
from sb3_contrib.common.wrappers import ActionMasker
from sb3_contrib.common.maskable.evaluation import evaluate_policy
from stable_baselines3.common.env_util import make_vec_env
seed, steps = int(sys.argv[1]), int(sys.argv[2])
taxi = "Taxi-v3" if "Taxi-v3" in gym.registry else "Taxi-v4"
def make():
    return ActionMasker(gym.make(taxi), lambda e: e.unwrapped.action_mask(e.unwrapped.s))
env = make_vec_env(make, n_envs=8, seed=seed)
model = MaskablePPO("MlpPolicy", env, n_steps=256, batch_size=256, ent_coef=0.01, seed=seed, verbose=0)
start = time.perf_counter()
model.learn(steps)
learn = time.perf_counter() - start
eval_env = make_vec_env(make, n_envs=1, seed=seed + 1_000_000)
returns, _ = evaluate_policy(model, eval_env, n_eval_episodes=100, warn=False, return_episode_rewards=True)
print(json.dumps({"eval_return_mean": sum(returns) / len(returns), "learn_seconds": learn}))
"""


def timed(cmd: list[str], env: dict | None = None) -> tuple[float, dict]:
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False,
                          env={**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'bench'}", **(env or {})})
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{proc.stderr[-2000:]}")
    return wall, json.loads(proc.stdout.strip().splitlines()[-1])


def ours(config: str, seed: int, *sets: str, env: dict | None = None) -> tuple[float, dict]:
    with tempfile.TemporaryDirectory() as tmp:
        args = [sys.executable, str(ROOT / "main.py"), "--config", config, "--seed", str(seed),
                "--run-dir", str(Path(tmp) / "run")]
        for item in sets:
            args += ["--set", item]
        return timed(args, env)


def commit() -> str:
    out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    return out.stdout.strip() or "unknown"


def side_by_side(args: argparse.Namespace, config: str, sb3_script: str, sb3_args: list[str],
                 sets: tuple[str, ...] = ()) -> dict:
    rows = []
    for seed in args.seeds:
        with tempfile.TemporaryDirectory() as tmp:
            counts = Path(tmp) / "illegal.txt"
            wall, summary = ours(config, seed, *sets, env={"ILLEGAL_ACTIONS_FILE": str(counts)})
            lines = [line.split() for line in counts.read_text().splitlines()] if counts.exists() else []
        sb3_wall, sb3 = timed([sys.executable, "-c", sb3_script, str(seed), *sb3_args])
        row = {"seed": seed, "ours_wall_s": round(wall, 2), "ours_train_s": summary["train_seconds"],
               "ours_env_steps": summary["env_steps"], "ours_eval": summary["eval_return_mean"],
               "sb3_wall_s": round(sb3_wall, 2), "sb3_learn_s": round(sb3["learn_seconds"], 2),
               "sb3_eval": sb3["eval_return_mean"], "ratio": round(sb3_wall / wall, 2)}
        if lines:
            row["env_steps_counted"] = sum(int(s) for s, _ in lines)
            row["illegal_actions"] = sum(int(i) for _, i in lines)
        rows.append(row)
        print(json.dumps(row), flush=True)
    ours_median = statistics.median(r["ours_wall_s"] for r in rows)
    sb3_median = statistics.median(r["sb3_wall_s"] for r in rows)
    return {"commit": commit(), "date": time.strftime("%Y-%m-%d", time.gmtime()), "rows": rows,
            "summary": {"ours_median_wall_s": ours_median, "sb3_median_wall_s": sb3_median,
                        "median_ratio": round(sb3_median / ours_median, 2),
                        "ours_min_eval": min(r["ours_eval"] for r in rows),
                        "sb3_min_eval": min(r["sb3_eval"] for r in rows),
                        # counted only where the env wrapper ran (taxi)
                        "illegal_actions": (sum(r["illegal_actions"] for r in rows)
                                            if all("illegal_actions" in r for r in rows) else None)}}


def own_variants(args: argparse.Namespace, variants: dict[str, tuple[str, tuple[str, ...]]]) -> dict:
    rows = []
    for seed in args.seeds:
        for name, (config, sets) in variants.items():
            wall, summary = ours(config, seed, *sets)
            row = {"seed": seed, "variant": name, "eval": summary["eval_return_mean"],
                   "train_s": summary["train_seconds"], "wall_s": round(wall, 2)}
            rows.append(row)
            print(json.dumps(row), flush=True)
    summary = {name: {"median_eval": statistics.median(r["eval"] for r in rows if r["variant"] == name),
                      "min_eval": min(r["eval"] for r in rows if r["variant"] == name)} for name in variants}
    return {"commit": commit(), "date": time.strftime("%Y-%m-%d", time.gmtime()), "rows": rows, "summary": summary}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bench", choices=("invalid-action", "taxi", "entropy", "memory"))
    parser.add_argument("--seeds", type=int, nargs="+")
    parser.add_argument("--sb3-steps", type=int, default=200_000, help="taxi: MaskablePPO's training steps")
    parser.add_argument("--set", dest="overrides", action="append", default=[],
                        help="taxi: an override of our config (KEY=VALUE, as main.py takes it; repeatable)")
    args = parser.parse_args()
    if args.overrides and args.bench != "taxi":
        parser.error(f"--set applies to the taxi bench only, not {args.bench}")
    if args.bench == "invalid-action":
        args.seeds = args.seeds or [0, 1, 2, 3, 4]
        out = side_by_side(args, "invalid-action", SB3_INVALID, [])
    elif args.bench == "taxi":
        args.seeds = args.seeds or [0, 1, 2]
        out = side_by_side(args, "taxi", SB3_TAXI, [str(args.sb3_steps)],
                           ('env.wrappers=[{class="illegal_counter:CountIllegalActions"}]', *args.overrides))
        out["overrides"] = args.overrides
    elif args.bench == "entropy":
        args.seeds = args.seeds or [0, 1, 2, 3, 4]
        out = own_variants(args, {"per_state": ("taxi", ()),
                                  "fixed": ("taxi", ("ppo.ent_coef=0.005581106265512472",))})  # 0.01 / ln 6
    else:
        args.seeds = args.seeds or [0, 1, 2]
        cue = ('env.id="tests.integration.mask_envs:CueChoice-v0"', "env.num_envs=8", "ppo.num_steps=32",
               "ppo.num_minibatches=2", "ppo.update_epochs=4", "ppo.learning_rate=3e-3", "ppo.gamma=0.9",
               "run.eval_episodes=100", "policy.hidden_sizes=[32]", "ppo.reward_scale=1.0",
               "run.total_timesteps=12288")
        rnn = ("policy.rnn_hidden_size=32",)
        out = own_variants(args, {"lstm": ("cartpole", (*cue, *rnn, 'policy.recurrent="lstm"')),
                                  "gru": ("cartpole", (*cue, *rnn, 'policy.recurrent="gru"')),
                                  "feed_forward": ("cartpole", cue)})
    path = ROOT / "bench" / "results" / f"masks_{args.bench}.json"
    path.write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(out["summary"]))


if __name__ == "__main__":
    main()
