"""This checkout against an older commit, in wall time: whole training processes side by side.

    python bench/vs_commit.py --old /path/to/checkout-of-32f030c [--new .] [--pairs 5] [--warmup-pairs 1] [--seed 0]
                              [--python PYTHON] [--set KEY=VALUE ...] [--a-set KEY=VALUE ...]
                              [--b-set KEY=VALUE ...] [--budget NAME=STEPS ...] [--timeout 900]
                              [--out bench/results/vs_commit_<old>_<time>.json] [CONFIG ...]

Both sides run with one interpreter (``--python``, default this one), each with PYTHONPATH set to
its own checkout and ``python CHECKOUT/main.py`` from it, so the only difference between them is
the code. The old checkout must accept the same command line. Without CONFIG names, every config
in ``BUDGETS`` below is run; the MuJoCo configs of ``LONG_RUNS`` (a million steps each, usually with
``--warmup-pairs 0``) and the turn-based games of ``GAMES`` run when named.

For each config, A (the new checkout) and B (the old one) alternate, A B A B ...: one warm-up pair
that is not counted (page cache, compiled bytecode), then ``--pairs`` counted pairs. Each run is

    python CHECKOUT/main.py --config NAME --seed S --total-timesteps T --run-dir TMP/run
           --set run.device="cpu" --set run.eval_episodes=E [--set ...] [--a-set ... / --b-set ...]

in a fresh temporary folder (also its working directory), removed after the run. T and E are the
config's budget in ``BUDGETS`` (``--budget NAME=STEPS`` changes T): one run takes roughly 5-20 s
on a 2-core machine; cheap configs keep their own total_timesteps. Every run must exit 0.

What is measured, per run:
- wall: ``time.perf_counter()`` around ``subprocess.run``, the whole process (interpreter start,
  imports, env creation, training, evaluation, checkpoint and log writes, exit);
- cpu: user + system time of the process and the children it waited for, from
  ``resource.getrusage(RUSAGE_CHILDREN)`` before and after the run.
The summary the process prints (its last stdout line, JSON) is kept with the times.

Ratio convention: a pair's ratio is B wall / A wall = old / new, so **above 1 means the new code is
faster**. Per config the table gives the median A and B walls, the median of the pair ratios and
their min-max; over configs, the geometric mean of the per-config medians. The bar checked at the
end: the geometric mean >= 0.97 and no config's median below 0.90 (the verdict counts only when
every config of ``BUDGETS`` ran with 5 or more pairs). Every raw time goes to ``--out`` (JSON).

Exit status: 0 the bar is met (or not judged), 1 a run failed, 2 bad arguments, 3 the bar is missed.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# config name -> (total_timesteps, eval_episodes) of one run; the configs the speed bar names.
BUDGETS: dict[str, tuple[int, int]] = {
    "pendulum": (100_000, 2),  # the config's own total (31 updates)
    "cartpole": (65_536, 2),  # own total (32 updates)
    "cartpole-envpool": (32_768, 2),  # own total (32 updates)
    "pendulum-envpool": (49_152, 2),  # own total (12 updates)
    "doorkey": (30_720, 2),  # 15 of its 30 updates
    "cartpole-lstm": (49_152, 2),  # 48 of its 98 updates
    "pendulum-lstm": (48_000, 2),  # 15 of its 32 updates
    "pendulum-torch": (409_600, 2),  # own total (16 updates)
    "invalid-action": (5_000, 2),  # own total (5 updates)
    "taxi": (100_000, 2),  # own total (49 updates)
    "pong": (6_144, 1),  # 6 updates of 8 x 128; one eval episode (an untrained policy plays long games)
    "simple-spread": (38_400, 2),  # 12 of its 157 updates
}

# The long runs (issue 37's speed bar: each at least 1.3x faster than 32f030c's shipped config), run only when
# named: the whole million steps and the 10 evaluation episodes, as the configs train.
LONG_RUNS: dict[str, tuple[int, int]] = {
    "halfcheetah": (1_001_472, 10),
    "hopper": (1_001_472, 10),
    "walker2d": (1_001_472, 10),
}

# The turn-based games (issue 36), run only when named: a tenth of connect four's 600,000 moves; tic-tac-toe whole.
GAMES: dict[str, tuple[int, int]] = {
    "connect-four": (61_440, 2),
    "tictactoe": (300_000, 2),
}

GEOMEAN_BAR = 0.97
CONFIG_BAR = 0.90
MIN_PAIRS = 5


def run_once(python: str, checkout: Path, name: str, seed: int, steps: int, eval_episodes: int,
             overrides: list[str], timeout: float, tmp_root: str | None) -> dict:
    """One whole training process of ``checkout``; its wall and CPU seconds and its summary."""
    tmp = Path(tempfile.mkdtemp(prefix=f"vs_commit_{name}_", dir=tmp_root))
    run_dir = tmp / "run"
    cmd = [python, str(checkout / "main.py"), "--config", name, "--seed", str(seed), "--total-timesteps", str(steps),
           "--run-dir", str(run_dir), "--set", 'run.device="cpu"', "--set", f"run.eval_episodes={eval_episodes}"]
    for item in overrides:
        cmd += ["--set", item]
    env = dict(os.environ, PYTHONPATH=str(checkout))
    try:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        proc = subprocess.run(cmd, cwd=tmp, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=timeout)
        wall = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    except subprocess.TimeoutExpired as exc:
        stderr = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else exc.stderr or ""
        return {"cmd": cmd, "returncode": None, "wall": None, "error": f"timed out after {timeout} s",
                "stderr_tail": stderr[-2000:]}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    summary = None
    lines = proc.stdout.strip().splitlines()
    if lines:
        try:
            summary = json.loads(lines[-1])
        except json.JSONDecodeError:
            summary = None
    result = {"cmd": cmd, "returncode": proc.returncode, "wall": wall,
              "cpu_user": after.ru_utime - before.ru_utime, "cpu_sys": after.ru_stime - before.ru_stime,
              "summary": summary}
    result["cpu"] = result["cpu_user"] + result["cpu_sys"]
    if proc.returncode != 0:
        result["stderr_tail"] = proc.stderr[-2000:]
    return result


def git_commit(checkout: Path) -> dict:
    def git(*args: str) -> str:
        try:
            return subprocess.run(["git", *args], cwd=checkout, capture_output=True, text=True,
                                  timeout=30).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return ""

    return {"path": str(checkout), "commit": git("rev-parse", "HEAD") or None,
            "dirty": bool(git("status", "--porcelain", "--untracked-files=no"))}


def package_versions(python: str) -> dict:
    code = ("import importlib.metadata as m, json\n"
            "out = {}\n"
            "for p in ('torch', 'numpy', 'gymnasium', 'envpool', 'ale-py', 'minigrid', 'pettingzoo', 'mpe2',"
            " 'sb3-contrib'):\n"
            "    try:\n        out[p] = m.version(p)\n    except m.PackageNotFoundError:\n        out[p] = None\n"
            "print(json.dumps(out))")
    try:
        proc = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=60,
                              env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
        return json.loads(proc.stdout)
    except (OSError, subprocess.SubprocessError, json.JSONDecodeError):
        return {}


def config_stats(runs: list[dict]) -> dict:
    """Medians and pair ratios (B / A, old over new) of one config's counted pairs."""
    counted = [r for r in runs if r["pair"] > 0]
    walls = {side: [r["wall"] for r in counted if r["side"] == side] for side in "AB"}
    cpus = {side: [r["cpu"] for r in counted if r["side"] == side] for side in "AB"}
    ratios = [b / a for a, b in zip(walls["A"], walls["B"], strict=True)]
    work = {side: sorted({(r["summary"] or {}).get("env_steps") for r in runs if r["side"] == side}, key=str)
            for side in "AB"}
    return {"pairs": len(ratios), "a_wall_median": statistics.median(walls["A"]),
            "b_wall_median": statistics.median(walls["B"]), "a_cpu_median": statistics.median(cpus["A"]),
            "b_cpu_median": statistics.median(cpus["B"]), "ratios": ratios,
            "ratio_median": statistics.median(ratios), "ratio_min": min(ratios), "ratio_max": max(ratios),
            "env_steps": work, "same_env_steps": work["A"] == work["B"] and len(work["A"]) == 1}


def print_table(stats: dict[str, dict], label_a: str, label_b: str) -> None:
    print(f"\nratio = B wall / A wall (old / new): above 1 means A ({label_a}) is faster than B ({label_b})")
    header = (f"{'config':<18} {'pairs':>5} {'A wall s':>9} {'B wall s':>9} {'A cpu s':>8} {'B cpu s':>8} "
              f"{'ratio':>6} {'min-max':>11}")
    print(header)
    print("-" * len(header))
    for name, s in stats.items():
        print(f"{name:<18} {s['pairs']:>5} {s['a_wall_median']:>9.2f} {s['b_wall_median']:>9.2f} "
              f"{s['a_cpu_median']:>8.2f} {s['b_cpu_median']:>8.2f} {s['ratio_median']:>6.3f} "
              f"{s['ratio_min']:>5.3f}-{s['ratio_max']:.3f}")


def parse_budgets(items: list[str]) -> dict[str, int]:
    budgets = {}
    for item in items:
        name, sep, steps = item.partition("=")
        if not sep or not steps.replace("_", "").isdigit() or int(steps.replace("_", "")) < 1:
            raise SystemExit(f"--budget expects NAME=STEPS, got {item!r}")
        budgets[name.removesuffix(".toml")] = int(steps.replace("_", ""))
    return budgets


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("configs", nargs="*", metavar="CONFIG",
                        help=f"config names (default: all of {', '.join(BUDGETS)})")
    parser.add_argument("--old", required=True, type=Path, help="checkout of the old commit (side B)")
    parser.add_argument("--new", type=Path, default=ROOT, help="checkout of the new code (side A; default: this one)")
    parser.add_argument("--pairs", type=int, default=MIN_PAIRS, help="counted A B pairs per config (default 5)")
    parser.add_argument("--warmup-pairs", type=int, default=1,
                        help="A B pairs run first and not counted (default 1; 0 for the long runs)")
    parser.add_argument("--seed", type=int, default=0, help="--seed of every run (default 0)")
    parser.add_argument("--python", default=sys.executable, help="interpreter of both sides (default: this one)")
    parser.add_argument("--set", dest="both", action="append", default=[], metavar="KEY=VALUE",
                        help="extra --set override for both sides; repeatable")
    parser.add_argument("--a-set", dest="a_only", action="append", default=[], metavar="KEY=VALUE",
                        help="extra --set override for A (the new checkout) only; repeatable")
    parser.add_argument("--b-set", dest="b_only", action="append", default=[], metavar="KEY=VALUE",
                        help="extra --set override for B (the old checkout) only; repeatable")
    parser.add_argument("--budget", action="append", default=[], metavar="NAME=STEPS",
                        help="total_timesteps of one run of config NAME instead of BUDGETS'; repeatable")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds one run may take (default 900)")
    parser.add_argument("--tmp-root", help="folder for the runs' temporary folders (default: the system's)")
    parser.add_argument("--out", type=Path, help="JSON of every raw time (default: "
                        "bench/results/vs_commit_<old commit>_<time>.json in the new checkout)")
    args = parser.parse_args()

    names = [n.removesuffix(".toml") for n in args.configs] or list(BUDGETS)
    budgets = {**BUDGETS, **LONG_RUNS, **GAMES}
    unknown = [n for n in names if n not in budgets]
    if unknown:
        parser.error(f"no budget for {', '.join(unknown)}; known: {', '.join(budgets)}")
    if args.warmup_pairs < 0:
        parser.error("--warmup-pairs must be at least 0")
    if args.pairs < 1:
        parser.error("--pairs must be at least 1")
    extra_budgets = parse_budgets(args.budget)
    new, old = args.new.resolve(), args.old.resolve()
    for checkout in (new, old):
        if not (checkout / "main.py").is_file():
            parser.error(f"{checkout} has no main.py")

    sides = {"A": (new, args.both + args.a_only), "B": (old, args.both + args.b_only)}
    info = {"A": git_commit(new), "B": git_commit(old)}
    label_a = (info["A"]["commit"] or "?")[:7] + ("+dirty" if info["A"]["dirty"] else "")
    label_b = (info["B"]["commit"] or "?")[:7] + ("+dirty" if info["B"]["dirty"] else "")
    started = time.strftime("%Y-%m-%d %H:%M:%S")
    out = args.out or ROOT / "bench" / "results" / f"vs_commit_{label_b[:7]}_{time.strftime('%Y%m%d_%H%M%S')}.json"
    record = {
        "what": "whole training processes, A (new) and B (old) alternating A B A B; the first warmup_pairs pairs "
                "are not counted; ratio = B wall / A wall (old / new), above 1 = the new code is faster",
        "warmup_pairs": args.warmup_pairs,
        "started": started, "A": {**info["A"], "overrides": sides["A"][1]},
        "B": {**info["B"], "overrides": sides["B"][1]}, "python": args.python,
        "packages": package_versions(args.python), "platform": platform.platform(),
        "processor": platform.processor(), "cpu_count": os.cpu_count(), "seed": args.seed, "pairs": args.pairs,
        "configs": {},
    }
    print(f"A = {label_a} ({new}), B = {label_b} ({old}); {args.pairs} counted pair(s) per config after "
          f"{args.warmup_pairs} warm-up pair(s); python {args.python}", flush=True)

    stats: dict[str, dict] = {}
    failed = False
    for name in names:
        steps, eval_episodes = budgets[name]
        steps = extra_budgets.get(name, steps)
        runs: list[dict] = []
        entry = {"total_timesteps": steps, "eval_episodes": eval_episodes, "load_before": os.getloadavg(),
                 "runs": runs}
        record["configs"][name] = entry
        for pair in range(1 - args.warmup_pairs, args.pairs + 1):
            for side in "AB":
                checkout, overrides = sides[side]
                result = run_once(args.python, checkout, name, args.seed, steps, eval_episodes, overrides,
                                  args.timeout, args.tmp_root)
                result.update(side=side, pair=pair, load=os.getloadavg()[0])
                runs.append(result)
                tag = "warm-up" if pair <= 0 else f"pair {pair}"
                if result["returncode"] != 0:
                    print(f"{name} {tag} {side}: FAILED ({result.get('error') or 'exit ' + str(result['returncode'])})"
                          f"\n{result.get('stderr_tail', '')}", file=sys.stderr, flush=True)
                    failed = True
                    break
                print(f"{name} {tag} {side}: wall {result['wall']:.2f} s, cpu {result['cpu']:.2f} s", flush=True)
            if failed:
                break
        entry["load_after"] = os.getloadavg()
        if failed:
            break
        stats[name] = config_stats(runs)
        entry["stats"] = stats[name]
        if not stats[name]["same_env_steps"]:
            print(f"warning: {name}: the runs' env_steps differ (A {stats[name]['env_steps']['A']}, "
                  f"B {stats[name]['env_steps']['B']}): the two sides did not do the same work", flush=True)

    if stats:
        print_table(stats, label_a, label_b)
        medians = [s["ratio_median"] for s in stats.values()]
        geomean = math.exp(statistics.fmean(math.log(m) for m in medians))
        worst = min(stats, key=lambda n: stats[n]["ratio_median"])
        met = geomean >= GEOMEAN_BAR and stats[worst]["ratio_median"] >= CONFIG_BAR
        judged = not failed and set(BUDGETS) <= set(stats) and args.pairs >= MIN_PAIRS
        print(f"\ngeometric mean of the per-config median ratios (old / new): {geomean:.3f} over {len(stats)} "
              f"config(s); lowest: {worst} {stats[worst]['ratio_median']:.3f}")
        verdict = ("met" if met else "MISSED") if judged else "not judged (needs every config and >= 5 pairs)"
        print(f"bar (geometric mean >= {GEOMEAN_BAR}, every config >= {CONFIG_BAR}): {verdict}")
        record.update(geomean=geomean, bar={"geomean": GEOMEAN_BAR, "config": CONFIG_BAR, "met": met,
                                            "judged": judged})
    record["finished"] = time.strftime("%Y-%m-%d %H:%M:%S")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=1) + "\n")
    print(f"raw times: {out}")
    if failed:
        return 1
    return 3 if stats and record["bar"]["judged"] and not record["bar"]["met"] else 0


if __name__ == "__main__":
    sys.exit(main())
