"""Issue 36's turn-based game configs side by side with PettingZoo's documented MaskablePPO recipe, whole processes.

The recipe is PettingZoo's tutorial "SB3: Action Masked PPO for Connect Four"
(tutorials/SB3/connect_four/sb3_connect_four_action_mask.py): one sb3-contrib ``MaskablePPO("MlpPolicy")`` model
plays both seats of the AEC game through a single-agent view of it (a ``gymnasium.Env`` whose ``step`` plays the
current mover's action and returns the NEXT mover's observation with the reward, termination and truncation of the
mover that just moved; masks from the observation's ``action_mask``, through sb3-contrib's ``ActionMasker``), the
library's default hyperparameters, ``model.learn(total_timesteps=steps)`` (the tutorial's 20,480 by default). Its
script is :data:`RECIPE` below, run with ``--recipe-python`` (a Python with sb3-contrib, PettingZoo's classic games
and the same torch); the model is seeded at construction (``seed=S``; the tutorial seeds after it, which leaves the
initial weights unseeded) and again with ``set_random_seed(S)`` as the tutorial does.

For each seed, alternating the two sides so that machine noise hits both alike, one torch thread on each:

- ours: ``python main.py --config configs/<game>.toml --seed S --run-dir DIR`` as a whole process (start to exit:
  imports, training and its own final evaluation), then its final policy (``shell.load_policy``, deterministic,
  masked) plays ``--games`` games per seat against uniform-random legal moves and the game's reference bot
  (tests/integration/game_bots.py: tic-tac-toe's perfect minimax player, random tie-breaks; connect four's one-ply
  player); the library's own evaluation of the run (``games_bar.play``: ``shell.evaluation.evaluate``) is recorded
  too, as a check of that loop;
- the recipe: the same game trained by :data:`RECIPE` for each ``--recipe-steps`` (a whole process: imports,
  training, saving the model), then its model's deterministic masked move (``model.predict(obs, action_masks=mask,
  deterministic=True)``) plays the same games against the same bots, in a second process of ``--recipe-python``.

Both sides' games are played by one function, :func:`play_seats` (plain PettingZoo, the bots of
tests/integration/game_bots.py, the policy in each seat in turn), imported by the recipe's process from this file.

    python bench/games_vs_recipe.py --game tictactoe --seeds 0 1 2 --recipe-steps 81920 \\
        --recipe-python /path/to/venv-with-sb3-contrib/bin/python
    python bench/games_vs_recipe.py --game connect-four --seeds 0 --recipe-steps 20480 --recipe-python ...

Writes ``bench/results/games_vs_recipe_<game>.json`` (``--out``): the rows (seed, side, moves, whole-process wall
and CPU seconds, the load average at its end, win / draw / loss rates per opponent and seat) and a summary (the
medians per side and the recipe's median wall time over ours). ``--set KEY=VALUE`` (repeatable) is passed to
ours' ``main.py`` (e.g. ``--set run.total_timesteps=8192`` for a quick check).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

#: per game: ours' config, PettingZoo's classic module, the reference bot (tests/integration/game_bots.py), the
#: default number of games per seat against each opponent
GAMES = {
    "tictactoe": {"config": "configs/tictactoe.toml", "module": "tictactoe_v3", "bot": "tictactoe_minimax",
                  "games": 1000},
    "connect-four": {"config": "configs/connect-four.toml", "module": "connect_four_v3", "bot": "connect_four_one_ply",
                     "games": 500},
}
BOTS_MODULE = "tests.integration.game_bots"
TUTORIAL_STEPS = 20_480

RECIPE = """
import json, sys, time
started = time.perf_counter()
import gymnasium as gym
import torch
torch.set_num_threads(1)
from importlib import import_module
from sb3_contrib import MaskablePPO
from sb3_contrib.common.wrappers import ActionMasker

mode, game, seed, model_path = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]


class MoverView(gym.Env):
    # The AEC game seen by whoever moves: reset gives the first mover's observation planes; step plays the
    # mover's action and gives the next mover's planes with the reward, termination and truncation of the mover
    # that just moved (its reward since its own last move), as the tutorial's wrapper does.
    def __init__(self, aec):
        self.aec = aec
        first = aec.possible_agents[0]
        self.observation_space = aec.observation_space(first)["observation"]
        self.action_space = aec.action_space(first)

    def _planes(self):
        return self.aec.observe(self.aec.agent_selection)["observation"]

    def reset(self, seed=None, options=None):
        self.aec.reset(seed=seed, options=options)
        return self._planes(), {}

    def step(self, action):
        mover = self.aec.agent_selection
        self.aec.step(action)
        aec = self.aec
        return (self._planes(), aec._cumulative_rewards[mover], aec.terminations[mover], aec.truncations[mover],
                aec.infos[mover])

    def legal(self):
        return self.aec.observe(self.aec.agent_selection)["action_mask"]


module = import_module("pettingzoo.classic." + game)
if mode == "train":
    steps = int(sys.argv[5])
    view = MoverView(module.env())
    view.reset(seed=seed)
    env = ActionMasker(view, lambda e: e.legal())
    model = MaskablePPO("MlpPolicy", env, seed=seed, verbose=0)
    model.set_random_seed(seed)
    learn = time.perf_counter()
    model.learn(total_timesteps=steps)
    learn = time.perf_counter() - learn
    model.save(model_path)
    print(json.dumps({"env_steps": int(model.num_timesteps), "learn_seconds": learn,
                      "process_seconds": time.perf_counter() - started}))
else:
    from bench.games_vs_recipe import play_seats
    model = MaskablePPO.load(model_path, device="cpu")

    def act(agent, obs):
        return int(model.predict(obs["observation"], action_masks=obs["action_mask"], deterministic=True)[0])

    print(json.dumps(play_seats(sys.argv[5], act, int(sys.argv[6]), seed)))
"""


def play_seats(game: str, act: Callable[[str, dict], int], games: int, seed: int) -> dict[str, Any]:
    """``games`` games of PettingZoo's ``game`` per seat against each opponent, the policy ``act`` in that seat.

    Args:
        game: a key of :data:`GAMES`.
        act: the policy's move: ``act(agent, observation) -> action`` with the seat's name and PettingZoo's Dict
            observation (``"observation"`` the planes from the mover's side, ``"action_mask"`` ``[A]`` int8).
        games: games per seat per opponent.
        seed: seeds the uniform-random opponent's moves (the bots keep their module's own generator).

    Returns:
        ``{"vs": {opponent: {seat: {"win", "draw", "loss", "games"}}}, "eval_seconds"}``: the rates by the sign of
        the seat's final reward (PettingZoo's +1 / 0 / -1); opponents ``"random"`` and
        ``"tests.integration.game_bots:<bot>"`` (``run.eval_opponents``' names), seats in the game's order.

    Raises:
        RuntimeError: the policy or a bot played an illegal move.
    """
    import importlib

    import numpy as np

    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from tests.integration import game_bots

    spec = GAMES[game]
    env = importlib.import_module(f"pettingzoo.classic.{spec['module']}").env()
    rng = np.random.default_rng(seed)

    def uniform(observation: Any, mask: np.ndarray) -> int:
        return int(rng.choice(np.flatnonzero(mask)))

    opponents = {"random": uniform, f"{BOTS_MODULE}:{spec['bot']}": getattr(game_bots, spec["bot"])}
    started = time.perf_counter()
    vs: dict[str, dict[str, dict]] = {}
    for name, opponent in opponents.items():
        vs[name] = {}
        for seat in env.possible_agents:
            scores = []
            for _ in range(games):
                env.reset()
                for agent in env.agent_iter():
                    obs, _, terminated, truncated, _ = env.last()
                    if terminated or truncated:  # the classic games end for both seats at once
                        break
                    mask = np.asarray(obs["action_mask"], dtype=bool)
                    if agent == seat:
                        move = act(agent, obs)
                    else:  # as the library's BotOpponent calls a bot: the planes flattened, a bool mask
                        move = opponent({"observation": np.asarray(obs["observation"]).reshape(-1)}, mask.copy())
                    if not 0 <= int(move) < len(mask) or not mask[int(move)]:
                        who = "the policy" if agent == seat else name
                        raise RuntimeError(f"{who} played the illegal move {move!r} as {agent}")
                    env.step(int(move))
                scores.append(env.rewards[seat])
            n = len(scores)
            vs[name][seat] = {"win": sum(s > 0 for s in scores) / n, "draw": sum(s == 0 for s in scores) / n,
                              "loss": sum(s < 0 for s in scores) / n, "games": n}
    env.close()
    return {"vs": vs, "eval_seconds": round(time.perf_counter() - started, 1)}


def _env() -> dict[str, str]:
    """The subprocesses' environment: this checkout importable first, one OpenMP thread."""
    return {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _run(command: list[str]) -> tuple[float, float, dict]:
    """Run one whole process: (wall seconds, CPU seconds, its last stdout line as JSON)."""
    started, cpu = time.perf_counter(), _children_cpu()
    done = subprocess.run(command, cwd=ROOT, env=_env(), capture_output=True, text=True, check=False)
    wall, cpu = time.perf_counter() - started, _children_cpu() - cpu
    if done.returncode != 0:
        sys.exit(f"{' '.join(command)} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return wall, cpu, json.loads(done.stdout.strip().splitlines()[-1])


def ours(game: str, seed: int, games: int, run_dir: Path, sets: list[str]) -> dict:
    """Ours' whole process for ``seed``, then its games (:func:`play_seats`, and the library's own evaluation)."""
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(ROOT / "bench"))
    from games_bar import play

    from shell import load_policy

    command = [sys.executable, str(ROOT / "main.py"), "--config", GAMES[game]["config"], "--seed", str(seed),
               "--run-dir", str(run_dir), *[a for s in sets for a in ("--set", s)]]
    wall, cpu, summary = _run(command)
    row = {"seed": seed, "side": "ours", "command": " ".join(command[1:]), "env_steps": summary["env_steps"],
           "wall_seconds": round(wall, 1), "cpu_seconds": round(cpu, 1),
           "train_seconds": round(summary["train_seconds"], 1), "load_average": os.getloadavg()}
    policy = load_policy(run_dir)
    row.update(play_seats(game, lambda agent, obs: int(policy({agent: obs})[agent]), games, seed))
    library = play(run_dir, games, None)
    row["library_eval"] = {"vs": library["vs"], "eval_seconds": library["eval_seconds"]}
    return row


def recipe(python: str, game: str, seed: int, steps: int, games: int, folder: Path) -> dict:
    """The recipe's whole training process for ``seed`` and ``steps``, then its games in a second process."""
    module = GAMES[game]["module"]
    model = folder.resolve() / f"recipe_{game}_s{seed}_{steps}.zip"
    wall, cpu, trained = _run([python, "-c", RECIPE, "train", module, str(seed), str(model), str(steps)])
    row = {"seed": seed, "side": "recipe", "steps": steps, "env_steps": trained["env_steps"],
           "wall_seconds": round(wall, 1), "cpu_seconds": round(cpu, 1),
           "train_seconds": round(trained["learn_seconds"], 1), "load_average": os.getloadavg()}
    _, _, played = _run([python, "-c", RECIPE, "eval", module, str(seed), str(model), game, str(games)])
    row.update(played)
    return row


def _median(rows: list[dict], key: Callable[[dict], float]) -> float:
    return round(statistics.median(key(r) for r in rows), 4)


def summarize(rows: list[dict]) -> dict:
    """Per side (and recipe step count): median wall / CPU seconds and median win / draw / loss rates; the
    recipe's median wall time over ours."""
    sides: dict[str, list[dict]] = {}
    for row in rows:
        sides.setdefault("ours" if row["side"] == "ours" else f"recipe_{row['steps']}", []).append(row)
    out: dict[str, Any] = {}
    for side, group in sides.items():
        vs = group[0]["vs"]
        out[side] = {"runs": len(group), "median_wall_seconds": _median(group, lambda r: r["wall_seconds"]),
                     "median_cpu_seconds": _median(group, lambda r: r["cpu_seconds"]),
                     "median_env_steps": _median(group, lambda r: r["env_steps"]),
                     "median_vs": {o: {s: {k: _median(group, lambda r, o=o, s=s, k=k: r["vs"][o][s][k])
                                           for k in ("win", "draw", "loss")} for s in seats}
                                   for o, seats in vs.items()}}
    if "ours" in out:
        ours_wall = out["ours"]["median_wall_seconds"]
        for side in [s for s in out if s != "ours"]:
            out[side]["wall_ratio_to_ours"] = round(out[side]["median_wall_seconds"] / ours_wall, 2)
    return out


def commit() -> str:
    done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    return done.stdout.strip() or "unknown"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--game", choices=sorted(GAMES), required=True)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--games", type=int, help="games per seat per opponent (default 1000 tic-tac-toe, 500 "
                                                  "connect four)")
    parser.add_argument("--recipe-steps", type=int, nargs="+", default=[TUTORIAL_STEPS],
                        help="the recipe's total_timesteps, one run per value and seed")
    parser.add_argument("--recipe-python", default=sys.executable,
                        help="a Python with sb3-contrib, stable-baselines3 and PettingZoo's classic games")
    parser.add_argument("--set", action="append", default=[], help="override passed to ours' main.py (repeatable)")
    parser.add_argument("--run-root", type=Path, default=Path("runs/games_vs_recipe"),
                        help="where ours' runs and the recipe's models go")
    parser.add_argument("--out", type=Path, help="default: bench/results/games_vs_recipe_<game>.json")
    args = parser.parse_args()
    games = args.games or GAMES[args.game]["games"]
    rows = []
    args.run_root.mkdir(parents=True, exist_ok=True)
    for seed in args.seeds:
        rows.append(ours(args.game, seed, games, args.run_root / f"{args.game}_s{seed}", args.set))
        print(json.dumps(rows[-1]), flush=True)
        for steps in args.recipe_steps:
            rows.append(recipe(args.recipe_python, args.game, seed, steps, games, args.run_root))
            print(json.dumps(rows[-1]), flush=True)
    config = (ROOT / GAMES[args.game]["config"]).read_text()
    out = {"commit": commit(), "date": time.strftime("%Y-%m-%d", time.gmtime()), "game": args.game,
           "games_per_seat": games, "sets": args.set, "config": GAMES[args.game]["config"], "config_text": config,
           "rows": rows, "summary": summarize(rows)}
    path = args.out or ROOT / "bench" / "results" / f"games_vs_recipe_{args.game}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(out["summary"]))


if __name__ == "__main__":
    main()
