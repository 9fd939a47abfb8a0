"""Fingerprint every shipped config: a refactor must leave all of them unchanged.

    python bench/fingerprint.py --repo CHECKOUT [--configs NAME ...] [--out FILE.json] [--jobs 2] [--set K=V ...]
    python bench/fingerprint.py --compare A.json B.json      # exit 1 on any difference

For each CHECKOUT/configs/*.toml (or the NAMEs given) this runs, with PYTHONPATH=CHECKOUT in a
fresh temporary folder, ``python CHECKOUT/main.py --config NAME --seed 0 --total-timesteps T
--run-dir TMP/run --set ...`` with the budget and overrides fixed below (the same command on two
checkouts runs the same thing), and records: ``metrics_sha256`` (metrics.csv without the wall-time
columns), ``eval_return_mean``/``eval_return_std``/``env_steps`` from summary.json, ``eval_sha256`` (every
evaluation field of summary.json: a game's ``eval_vs`` and ``elo`` too),
``checkpoint_sha256`` and ``tensor_count`` (the final checkpoint's tensors only: key path, dtype,
shape and bytes, in sorted key order; plain values such as ``train_seconds`` are ignored). A config
whose optional extra is missing (exit 2 naming ``pip install``) is recorded as skipped.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import io
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import tomllib
import torch

UPDATES = 3                                     # rollouts per config, except where one update is slow:
UPDATES_BY_CONFIG = {"pong": 1, "breakout": 1}  # bfloat16 Nature CNN, about 50 s an update on a CPU without AVX512
OVERRIDES = ("run.device=\"cpu\"", "run.eval_episodes=2", "run.eval_max_episode_steps=200",
             "run.checkpoint_every=0", "run.keep_checkpoints=1", "run.eval_every=0")
TIME_COLUMNS = ("seconds", "sps")             # metrics.csv columns that depend on wall time
FIELDS = ("status", "env_steps", "eval_return_mean", "eval_return_std", "eval_sha256", "metrics_sha256",
          "checkpoint_sha256", "tensor_count")


def budget(config: Path) -> tuple[int, int]:
    """(updates, total_timesteps) of one config: whole rollouts of num_envs * num_steps."""
    data = tomllib.loads(config.read_text())
    batch = data.get("env", {}).get("num_envs", 16) * data.get("ppo", {}).get("num_steps", 200)  # the schema's defaults
    updates = UPDATES_BY_CONFIG.get(config.stem, UPDATES)
    return updates, updates * batch


def metrics_sha256(path: Path) -> str:
    """sha256 of metrics.csv re-written without TIME_COLUMNS."""
    rows = list(csv.DictReader(path.open(newline="")))
    out = io.StringIO()
    keep = [c for c in (rows[0].keys() if rows else []) if c not in TIME_COLUMNS]
    writer = csv.DictWriter(out, fieldnames=keep, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return hashlib.sha256(out.getvalue().encode()).hexdigest()


def tensor_sha256(state: object) -> tuple[str, int]:
    """sha256 over every tensor in a nested dict/list (sorted keys) and the number of tensors."""
    digest, count = hashlib.sha256(), 0

    def walk(value: object, path: str) -> None:
        nonlocal count
        if isinstance(value, torch.Tensor):
            t = value.detach().cpu().contiguous().reshape(-1)
            digest.update(f"{path}|{value.dtype}|{tuple(value.shape)}|".encode())
            digest.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
            count += 1
        elif isinstance(value, dict):
            for key in sorted(value, key=str):
                walk(value[key], f"{path}/{key}")
        elif isinstance(value, list | tuple):
            for i, item in enumerate(value):
                walk(item, f"{path}/{i}")

    walk(state, "")
    return digest.hexdigest(), count


def eval_sha256(summary: dict) -> str:
    """sha256 of the summary's evaluation fields (``eval_*`` and a game's ``elo``), in sorted key order; a game's
    ``eval_vs`` without each seat's ``distinct`` (a count of the same games, written since 2026-12-07), so that
    fingerprints of earlier commits compare."""
    fields = {k: v for k, v in summary.items() if k.startswith("eval_") or k == "elo"}
    if "eval_vs" in fields:
        fields["eval_vs"] = {name: {seat: {k: v for k, v in rates.items() if k != "distinct"}
                                    for seat, rates in seats.items()} for name, seats in fields["eval_vs"].items()}
    return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()


def fingerprint(repo: Path, config: Path, extra: tuple[str, ...] = ()) -> dict:
    updates, total = budget(config)
    record: dict = {"updates": updates, "total_timesteps": total}
    with tempfile.TemporaryDirectory(prefix=f"fp_{config.stem}_") as tmp:
        run_dir = Path(tmp) / "run"
        cmd = [sys.executable, str(repo / "main.py"), "--config", str(config), "--seed", "0",
               "--total-timesteps", str(total), "--run-dir", str(run_dir)]
        for item in (*OVERRIDES, *extra):
            cmd += ["--set", item]
        start = time.perf_counter()
        proc = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True,
                              env={**os.environ, "PYTHONPATH": str(repo)})
        record["wall_seconds"] = round(time.perf_counter() - start, 1)
        error = (proc.stderr.strip().splitlines() or [""])[-1]
        if proc.returncode == 2 and "pip install" in error:
            return {**record, "status": "skipped", "error": error}
        if proc.returncode != 0:
            return {**record, "status": f"failed (exit {proc.returncode})", "error": error}
        summary = json.loads((run_dir / "summary.json").read_text())
        checkpoint = sorted((run_dir / "checkpoints").glob("ckpt_*.pt"))[-1]
        ckpt_sha, count = tensor_sha256(torch.load(checkpoint, map_location="cpu", weights_only=True))
        return {**record, "status": "ok", "env_steps": summary["env_steps"],
                "eval_return_mean": summary["eval_return_mean"], "eval_return_std": summary["eval_return_std"],
                "eval_sha256": eval_sha256(summary),
                "metrics_sha256": metrics_sha256(run_dir / "metrics.csv"),
                "checkpoint": checkpoint.name, "checkpoint_sha256": ckpt_sha, "tensor_count": count}


def compare(a_path: str, b_path: str) -> int:
    a, b = (json.loads(Path(p).read_text())["configs"] for p in (a_path, b_path))
    differ = False
    for name in sorted(set(a) | set(b)):
        if name not in a or name not in b:
            print(f"{name}: DIFFERENT (only in {a_path if name in a else b_path})")
            differ = True
            continue
        fields = [f for f in FIELDS if a[name].get(f) != b[name].get(f)]
        status = a[name]["status"] if not fields else ""
        print(f"{name}: " + (f"DIFFERENT ({', '.join(fields)})" if fields else
                             "identical" if status == "ok" else f"identical ({status}: {a[name].get('error', '')})"))
        differ |= bool(fields)
    return 1 if differ else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repo", type=Path, help="checkout whose main.py and configs/ are run")
    parser.add_argument("--configs", nargs="+", help="config names (default: all of CHECKOUT/configs/*.toml)")
    parser.add_argument("--out", type=Path, help="JSON file to write (default: stdout only)")
    parser.add_argument("--jobs", type=int, default=2, help="training processes at once (default 2)")
    parser.add_argument("--set", dest="extra", action="append", default=[], metavar="KEY=VALUE",
                        help='a further --set for every run (e.g. run.seed_scheme="offset": the seeding of runs '
                             "written before run.seed_scheme existed, to compare with their commits)")
    parser.add_argument("--compare", nargs=2, metavar=("A.json", "B.json"), help="compare two fingerprint files")
    args = parser.parse_args()
    if args.compare:
        return compare(*args.compare)
    if args.repo is None:
        parser.error("--repo is required (or --compare A.json B.json)")
    repo = args.repo.resolve()
    names = args.configs or sorted(p.stem for p in (repo / "configs").glob("*.toml"))
    paths = [repo / "configs" / f"{n.removesuffix('.toml')}.toml" for n in names]
    paths.sort(key=lambda p: p.stem not in UPDATES_BY_CONFIG)  # the slow ones first, beside the others
    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        runs = pool.map(lambda p: fingerprint(repo, p, tuple(args.extra)), paths)
        done = dict(zip([p.stem for p in paths], runs, strict=True))
    results = {name: done[name] for name in sorted(done)}
    for name, r in results.items():
        print(f"{name:24s} {r['status']:8s} {r['wall_seconds']:6.1f} s  {r.get('error', r.get('checkpoint_sha256'))}",
              file=sys.stderr)
    commit = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True).stdout
    changes = subprocess.run(["git", "-C", str(repo), "status", "--porcelain"], capture_output=True, text=True).stdout
    out = {"repo_commit": commit.strip(), "repo_changes": changes.splitlines(), "python": sys.version.split()[0],
           "torch": torch.__version__, "seed": 0, "updates": UPDATES, "updates_by_config": UPDATES_BY_CONFIG,
           "overrides": [*OVERRIDES, *args.extra], "dropped_metrics_columns": list(TIME_COLUMNS),
           "wall_seconds": round(time.perf_counter() - start, 1), "configs": results}
    text = json.dumps(out, indent=2) + "\n"
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)
    else:
        print(text, end="")
    return 1 if any(r["status"].startswith("failed") for r in results.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
