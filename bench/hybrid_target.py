"""A parameterised env through ``cartpole.toml``: does the policy learn the right kind and its parameter?

    python bench/hybrid_target.py --seeds 0-2 --out bench/results/platform_20261207/hybrid_target.json

``HybridTarget-v0`` (tests/integration/hybrid_envs.py) shows a target kind (one-hot, 3 kinds) and a target
parameter in [-1, 1]; its action is a Dict of the kind and one Box(-1, 1, (1,)) parameter per kind, and only the
chosen kind's parameter matters (reward ``1 - |p - target| / 2`` for the right kind, else 0; 8 steps an episode).
Each seed trains ``configs/cartpole.toml`` with ``env.id`` swapped, linked (``policy.action_links``) and unlinked
(every parameter in the ratio), then the deployed policy (``load_policy``, deterministic) is scored on 1,000
random targets: the share of right kinds and the mean absolute error of the chosen kind's parameter (a policy
that ignored the target would score 1/3 and 0.5 at best).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
ENV = "tests.integration.hybrid_envs:HybridTarget-v0"
LINKS = 'policy.action_links={kind = {0 = ["p0"], 1 = ["p1"], 2 = ["p2"]}}'


def score(run_dir: Path, n: int = 1000) -> dict[str, float]:
    import shell

    rng = np.random.default_rng(0)
    kind, target = rng.integers(0, 3, n), rng.uniform(-1, 1, n)
    obs = np.zeros((n, 4), np.float32)
    obs[np.arange(n), kind], obs[:, 3] = 1.0, target
    action = shell.load_policy(run_dir).act(obs)
    chosen = np.stack([action[f"p{k}"][:, 0] for k in range(3)], axis=1)[np.arange(n), kind]
    return {"kind_accuracy": float((action["kind"] == kind).mean()),
            "parameter_mae": float(np.abs(chosen - target).mean())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="0-2")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    lo, _, hi = args.seeds.partition("-")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for seed in range(int(lo), int(hi or lo) + 1):
            for form, extra in (("linked", ["--set", LINKS]), ("unlinked", [])):
                run_dir = Path(tmp) / f"{form}_s{seed}"
                cmd = [sys.executable, "main.py", "--config", "cartpole", "--seed", str(seed), "--set",
                       f"env.id={ENV}", *extra, "--run-dir", str(run_dir)]
                proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=True)
                summary = json.loads(proc.stdout.strip().splitlines()[-1])
                row = {"seed": seed, "form": form, "eval_return_mean": summary["eval_return_mean"],
                       "train_seconds": summary["train_seconds"], **score(run_dir)}
                print(json.dumps(row), flush=True)
                rows.append(row)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"env": ENV, "config": "cartpole", "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
