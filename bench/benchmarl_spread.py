"""Baseline: BenchMARL 1.5.2 MAPPO on PettingZoo/mpe2 simple_spread, or on VMAS balance (CPU, 1 torch thread).

A standalone script, not part of the package. It runs in a venv of its own, because BenchMARL pins
torchrl<0.12 / tensordict 0.11, with torch held at the local CPU build so that pip does not pull a CUDA one:

    python3.11 -m venv .benchmarl-venv
    echo "torch==2.13.0" > .benchmarl-venv/constraints.txt
    .benchmarl-venv/bin/pip install torch==2.13.0
    .benchmarl-venv/bin/pip install -c .benchmarl-venv/constraints.txt benchmarl==1.5.2 mpe2 pettingzoo
    .benchmarl-venv/bin/pip install -c .benchmarl-venv/constraints.txt "vmas>=1.5,<1.6"   # --task balance
    # -> torch 2.13.0+cpu, torchrl 0.11.1, tensordict 0.11.0, benchmarl 1.5.2,
    #    pettingzoo 1.27.0, mpe2 1.1.1 (torchvision 0.28.0 is pulled in by benchmarl;
    #    it is a CUDA build whose _C.so does not load, but nothing on this path imports it)

Run (from the repository root; bench/multiagent_vs_benchmarl.py runs it side by side with ours):

    .benchmarl-venv/bin/python bench/benchmarl_spread.py --seed 0 --json-out bench/results/benchmarl_spread_s0.json
    .benchmarl-venv/bin/python bench/benchmarl_spread.py --task balance --seed 0

--task balance (VMAS): VmasTask.BALANCE.get_task() (benchmarl/conf/task/vmas/balance.yaml: max_steps 100,
n_agents 4, random_package_pos_on_line true, package_mass 5), with continuous actions
(prefer_continuous_actions left at its default, True); everything else as below.

Setup (everything BenchMARL's defaults unless listed):
  * algorithm: MappoConfig.get_from_yaml()      (benchmarl/conf/algorithm/mappo.yaml)
  * model / critic model: MlpConfig.get_from_yaml()  ([256, 256], Tanh)
  * experiment: ExperimentConfig.get_from_yaml() (benchmarl/conf/experiment/base_experiment.yaml)
    with these changes only:
      - max_n_frames = --frames (default 120_000; yaml default 3_000_000)
      - prefer_continuous_actions = False (yaml default True) -> discrete actions
      - loggers = ["csv"]                (yaml default [csv, wandb])
      - sampling_device = train_device = "cpu" (same as yaml default, set explicitly)
      - checkpoint_interval = 0, checkpoint_at_end = False (same as yaml default, set explicitly)
      - save_folder = --save-folder (yaml default null = cwd)
      - render = False (yaml default True): with render the csv logger saves an eval video,
        and torchrl's CSVExperiment.add_video does `import torchvision` unconditionally; the
        only torchvision 0.28 wheel available (PyPI) is a CUDA build that fails to load against
        the local torch 2.13.0+cpu. Rendering only feeds the video log, not training/eval numbers.
    Left at default: 6000 frames/iter from 10 envs (sequential, in-process), 45 minibatch
    iterations of 400 frames, lr 5e-5, gamma 0.99, evaluation=True with
    evaluation_interval=120_000 frames (+ always after the first iteration), 10 evaluation
    episodes, deterministic eval actions.
  * task: PettingZooTask.SIMPLE_SPREAD.get_task() (benchmarl/conf/task/pettingzoo/simple_spread.yaml:
    task simple_spread_v3, max_cycles 100, N 3, local_ratio 0.5) with max_cycles -> 25.
    N and local_ratio already match; continuous_actions is not in the task yaml, BenchMARL
    sets it from experiment.prefer_continuous_actions (False here).
  * seed: --seed (Experiment(seed=...)).

Reported return (benchmarl/experiment/logger.py):
  * training ("collection/reward/episode_reward_mean"): for every episode that ends in the
    collected batch, each agent's undiscounted episode return (TorchRL RewardSum
    "episode_reward", per agent) is averaged over the agents of the group, then over groups
    (here one group "agent" of 3), then over all episodes finished in that batch
    (6000 frames / 25 steps = 240 episodes per iteration). I.e. a *per-agent* mean return,
    not the team sum. In simple_spread every agent gets local_ratio*own(collisions) +
    (1-local_ratio)*global(landmark distance) reward, so per-agent returns differ only by the
    collision term.
  * evaluation ("eval/reward/episode_reward_mean"): same definition over the 10 evaluation
    episodes (reward summed over time, mean over agents, mean over groups, mean over episodes).

Output: the last stdout line is one JSON object (also written to --json-out if given).
"""

import time

_T0 = time.time()  # script start (after interpreter startup), before any heavy import

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import types  # noqa: E402

import torch  # noqa: E402

torch.set_num_threads(1)


def _process_start_epoch() -> float:
    """Wall-clock time the process started (Linux /proc), includes interpreter startup."""
    try:
        with open("/proc/self/stat") as f:
            start_ticks = int(f.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
        return time.time() - uptime + start_ticks / os.sysconf("SC_CLK_TCK")
    except Exception:
        return _T0


def install_mpe_shim():
    """pettingzoo>=1.25 dropped MPE: `import pettingzoo.mpe` raises ImportError -> mpe2.

    TorchRL 0.11 (torchrl/envs/libs/pettingzoo.py) first tries
    `from pettingzoo.utils.all_modules import all_environments`; on pettingzoo 1.27 that
    raises ModuleNotFoundError (atari needs multi_agent_ale_py) and TorchRL falls back to
    `_load_available_envs()`, whose first line is
    `from pettingzoo.mpe.all_modules import mpe_environments` (it only catches
    ModuleNotFoundError, so the ImportError raised by pettingzoo.mpe aborts it).
    The task "simple_spread_v3" is then matched by module basename
    (`value.__name__.split(".")[-1] == task`) and built via `.parallel_env(**kwargs)`.
    So the only thing needed is a `pettingzoo.mpe.all_modules` exposing `mpe_environments`;
    mpe2.all_modules is exactly that (keys "mpe/simple_spread_v3" -> mpe2.simple_spread_v3).
    """
    import mpe2
    import mpe2.all_modules
    import pettingzoo

    shim = types.ModuleType("pettingzoo.mpe")
    shim.__path__ = []  # mark as package
    shim.all_modules = mpe2.all_modules
    shim.simple_spread_v3 = mpe2.simple_spread_v3
    sys.modules["pettingzoo.mpe"] = shim
    sys.modules["pettingzoo.mpe.all_modules"] = mpe2.all_modules
    pettingzoo.mpe = shim


def _read_scalar(log_dir: str, key: str):
    path = os.path.join(log_dir, "scalars", key + ".csv")
    rows = []
    if os.path.isfile(path):
        with open(path) as f:
            for line in f:
                line = line.strip()
                if line:
                    step, val = line.split(",")
                    rows.append((int(step), float(val)))
    return rows


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--task", choices=("simple_spread", "balance"), default="simple_spread")
    p.add_argument("--frames", type=int, default=120_000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--save-folder", default=None,
                   help="where BenchMARL writes its csv logs (default: a new temporary folder)")
    p.add_argument("--json-out", default=None)
    args = p.parse_args()

    spread = args.task == "simple_spread"
    from benchmarl.algorithms import MappoConfig
    from benchmarl.experiment import Experiment, ExperimentConfig
    from benchmarl.models.mlp import MlpConfig

    if spread:
        install_mpe_shim()
        from benchmarl.environments import PettingZooTask

        task = PettingZooTask.SIMPLE_SPREAD.get_task()
        task.config.update({"max_cycles": 25, "N": 3, "local_ratio": 0.5})
    else:
        from benchmarl.environments import VmasTask

        task = VmasTask.BALANCE.get_task()  # BenchMARL's own task defaults, unchanged

    exp_cfg = ExperimentConfig.get_from_yaml()
    exp_cfg.sampling_device = "cpu"
    exp_cfg.train_device = "cpu"
    exp_cfg.buffer_device = "cpu"
    if spread:
        exp_cfg.prefer_continuous_actions = False
    exp_cfg.max_n_frames = args.frames
    exp_cfg.max_n_iters = None
    exp_cfg.loggers = ["csv"]
    exp_cfg.render = False  # see docstring: csv video logging needs a working torchvision
    exp_cfg.checkpoint_interval = 0
    exp_cfg.checkpoint_at_end = False
    save_folder = args.save_folder or tempfile.mkdtemp(prefix="benchmarl-")
    os.makedirs(save_folder, exist_ok=True)
    exp_cfg.save_folder = save_folder

    experiment = Experiment(
        task=task,
        algorithm_config=MappoConfig.get_from_yaml(),
        model_config=MlpConfig.get_from_yaml(),
        critic_model_config=MlpConfig.get_from_yaml(),
        seed=args.seed,
        config=exp_cfg,
    )
    t_run0 = time.time()
    experiment.run()
    t_run = time.time() - t_run0

    log_dir = experiment.logger.loggers[0].experiment.log_dir
    train = _read_scalar(log_dir, "collection_reward_episode_reward_mean")
    evals = _read_scalar(log_dir, "eval_reward_episode_reward_mean")
    frames = _read_scalar(log_dir, "counters_total_frames")
    t_end = time.time()
    result = {
        "lib": "benchmarl",
        "algo": "mappo",
        "env": "pettingzoo/mpe2 simple_spread_v3 N=3 local_ratio=0.5 max_cycles=25 discrete" if spread
        else "vmas balance " + " ".join(f"{k}={v}" for k, v in sorted(task.config.items())) + " continuous",
        "seed": args.seed,
        "frames": int(frames[-1][1]) if frames else experiment.total_frames,
        "iters": experiment.n_iters_performed,
        "wall_s_script": round(t_end - _T0, 2),
        "wall_s_process": round(t_end - _process_start_epoch(), 2),
        "wall_s_run": round(t_run, 2),
        "torch_threads": torch.get_num_threads(),
        "train_return_per_agent_first": train[0][1] if train else None,
        "train_return_per_agent_last": train[-1][1] if train else None,
        "eval_return_per_agent_last": evals[-1][1] if evals else None,
        "eval_points": [(s, round(v, 4)) for s, v in evals],
        "return_definition": "per-agent undiscounted episode return, mean over agents/groups/episodes "
                             "(BenchMARL logger)",
        "versions": {
            m: __import__("importlib.metadata").metadata.version(m)
            for m in ("torch", "torchrl", "tensordict", "benchmarl", *(("pettingzoo", "mpe2") if spread else ("vmas",)))
        },
    }
    line = json.dumps(result)
    if args.json_out:
        with open(args.json_out, "w") as f:
            f.write(line + "\n")
    print(line, flush=True)


if __name__ == "__main__":
    main()
