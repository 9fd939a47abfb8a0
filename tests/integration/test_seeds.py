"""Seeds that never overlap (shell/seeding.py, DESIGN.md "Seeds"): with ``run.seed_scheme = "spawn"`` runs of seeds
0 to 9 share no env stream, in training (each rank, a fresh start and a resume) and in evaluation, on every
backend; ``"offset"`` keeps the old rule exactly, and old runs are read with it."""

import itertools

import pytest
import torch

from shell.config import config_from_dict, config_from_saved, load_config
from shell.envs.base import OneLane
from shell.runner import Trainer
from shell.seeding import base_seed, eval_seeds, per_copy, sampling_seed, train_seeds

RUN_SEEDS = range(10)


def test_spawned_streams_are_distinct_within_and_across_runs():
    by_run = {}
    for seed in RUN_SEEDS:
        streams = []
        for rank, update in itertools.product((0, 1), (0, 7)):
            streams += train_seeds(seed, "spawn", 16, rank, 2, update)
        streams += eval_seeds(seed, "spawn", 20)
        streams += [sampling_seed(seed, "spawn", rank) for rank in (0, 1)]
        assert len(set(streams)) == len(streams), f"run {seed} reuses a stream"
        by_run[seed] = set(streams)
    for a, b in itertools.combinations(RUN_SEEDS, 2):
        assert not by_run[a] & by_run[b], (a, b)


def test_offset_is_the_old_rule_whose_adjacent_seeds_overlap():
    """The rule of runs written before the scheme existed, exactly; its flaw is why it is not the default."""
    assert train_seeds(5, "offset", 16, rank=1, world_size=2, update=3) == 5 + 16 * (1 + 3 * 2)
    assert eval_seeds(5, "offset", 20) == 5 + 1_000_000 and eval_seeds(5, "offset", 1, first=3) == 5 + 1_000_003
    assert sampling_seed(5, "offset", 1) == 6
    shared = set(per_copy(train_seeds(0, "offset", 16), 16)) & set(per_copy(train_seeds(1, "offset", 16), 16))
    assert len(shared) == 15
    assert len(set(per_copy(eval_seeds(0, "offset", 20), 20)) & set(per_copy(eval_seeds(1, "offset", 20), 20))) == 19


def test_a_video_replay_reuses_its_episodes_seed():
    assert eval_seeds(3, "spawn", 1, first=4) == eval_seeds(3, "spawn", 6)[4:5]


def test_old_configs_read_as_offset_and_new_ones_spawn():
    fresh = load_config("cartpole")
    assert fresh.run.seed_scheme == "spawn"
    saved = fresh.to_dict()
    del saved["run"]["seed_scheme"]  # as written before the scheme existed
    assert config_from_saved(saved).run.seed_scheme == "offset"
    assert config_from_saved(fresh.to_dict()).run.seed_scheme == "spawn"


# ----------------------------------------------------------------------------- every backend
def _ma_config(seed: int) -> dict:
    return {"env": {"backend": "pettingzoo", "id": "tests.integration.multiagent_envs", "num_envs": 2},
            "run": {"seed": seed}}


BACKENDS = {
    # name: (config of run seed s, how the backend turns a reset seed into sub-env streams)
    "gymnasium": (lambda s: {"env": {"id": "CartPole-v1", "num_envs": 4}, "run": {"seed": s}}, "per_env"),
    "torch": (lambda s: {"env": {"id": "CartPole-v1", "backend": "torch", "num_envs": 4}, "run": {"seed": s}},
              "one_generator"),
    "pettingzoo": (_ma_config, "per_env"),
    "ale": (lambda s: {"env": {"id": "ALE/Pong-v5", "backend": "ale", "num_envs": 2, "atari": True,
                               "kwargs": {"frameskip": 1}},
                       "policy": {"hidden_sizes": [], "cnn": "nature", "activation": "relu"},
                       "run": {"seed": s}}, "per_env"),
    "envpool": (lambda s: {"env": {"id": "Counting-v0", "backend": "envpool", "num_envs": 3}, "run": {"seed": s}},
                "pool"),
}


def _streams(seed, copies: int, kind: str) -> set:
    if kind == "per_env":
        return {("env", s) for s in per_copy(seed, copies)}
    if kind == "pool":  # EnvPool seeds sub-env i of a pool built with seed b with b + i
        return {("env", base_seed(seed) + i) for i in range(copies)}
    return {("generator", base_seed(seed))}  # the torch envs: one generator for the batch


@pytest.mark.parametrize("backend", list(BACKENDS))
def test_runs_of_seeds_0_to_9_share_no_env_stream_on_every_backend(backend, tmp_path, monkeypatch):
    if backend == "ale":
        pytest.importorskip("ale_py")
    if backend == "envpool":
        from .test_envpool_backend import STANDIN

        monkeypatch.syspath_prepend(str(STANDIN))
        monkeypatch.delitem(__import__("sys").modules, "envpool", raising=False)
    if backend == "pettingzoo":
        pytest.importorskip("pettingzoo")
    make_config, kind = BACKENDS[backend]
    resets = []
    from shell.envs.pettingzoo import vector as pettingzoo

    for cls in (OneLane, pettingzoo.ParallelVecEnv):
        original = cls.reset

        def spy(self, seed=None, _original=original):
            resets.append((seed, self.copies))
            return _original(self, seed=seed)

        monkeypatch.setattr(cls, "reset", spy)
    by_run = {}
    for seed in RUN_SEEDS:
        data = make_config(seed)
        data.setdefault("ppo", {}).update({"num_steps": 8, "num_minibatches": 1, "update_epochs": 1})
        data["run"].update({"device": "cpu", "eval_episodes": 0, "total_timesteps": 8 * data["env"]["num_envs"]})
        trainer = Trainer(config_from_dict(data), tmp_path / f"run{seed}", progress=False)
        try:
            trainer._start()  # a fresh run's reset
            trainer.update = 3
            trainer._start()  # the reset of a resume at update 3
        finally:
            trainer.env.close()
        streams = set()
        for reset_seed, copies in resets:
            streams |= _streams(reset_seed, copies, kind)
        resets.clear()
        # the evaluation's episodes (on gymnasium's env of the same id, or the pettingzoo env itself)
        episodes = 3
        eval_kind = "per_env"
        eval_streams = _streams(eval_seeds(seed, trainer.config.run.seed_scheme, episodes), episodes, eval_kind)
        assert not streams & eval_streams
        by_run[seed] = streams | eval_streams
        assert len(streams) == (2 if kind == "one_generator" else 2 * data["env"]["num_envs"]), streams
    for a, b in itertools.combinations(RUN_SEEDS, 2):
        assert not by_run[a] & by_run[b], (backend, a, b, by_run[a] & by_run[b])


def test_the_gymnasium_sub_envs_get_the_spawned_seeds(tmp_path):
    cfg = config_from_dict({"env": {"id": "CartPole-v1", "num_envs": 3}, "run": {"seed": 7, "eval_episodes": 0}})
    trainer = Trainer(cfg, tmp_path / "run", progress=False)
    try:
        trainer._start()
        assert list(trainer.env.get_attr("np_random_seed")) == train_seeds(7, "spawn", 3)
    finally:
        trainer.env.close()


def test_evaluation_uses_the_schemes_episode_seeds(tmp_path, monkeypatch):
    """The evaluation resets with eval_seeds of the run's scheme; an old run (offset) keeps seed + 1,000,000 + i."""
    from shell import evaluation

    seen = []
    original = OneLane.reset
    monkeypatch.setattr(OneLane, "reset", lambda self, seed=None: (seen.append(seed), original(self, seed))[1])
    agent = Trainer(load_config("cartpole", {"run.eval_episodes": 0}), tmp_path / "run", progress=False).agent
    cfg = load_config("cartpole").env
    for scheme in ("spawn", "offset"):
        evaluation.evaluate(agent, evaluation.EvalSpec(cfg, 2, 4, seed_scheme=scheme, max_episode_steps=5),
                            torch.device("cpu"))
    assert seen == [eval_seeds(4, "spawn", 2), 4 + 1_000_000]
