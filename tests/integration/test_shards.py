"""``env.vectorization_mode = "async"`` with ``env.shares``, and ``"threads"``: the sub-envs in shares stepped at the
same time, in worker processes or in threads (shell/envs/shards.py), give exactly what one SyncVectorEnv of them
gives: observations, rewards, flags and infos (final observations, masks, episode statistics), step by step and
through a whole training run."""

from __future__ import annotations

import csv

import attrs
import gymnasium as gym
import numpy as np
import pytest
import torch

from shell.api import train
from shell.config import EnvConfig, config_from_dict
from shell.envs import check_config
from shell.envs.gymnasium import from_factory, make_vector_env, vec_from_factory
from shell.envs.shards import ShardedVectorEnv
from shell.errors import ConfigError, TrainingError
from shell.workers import usable_cpus


def same(u, v) -> bool:
    """Deep equality of what vector envs return: dicts, tuples, numpy arrays (object arrays element by element,
    dtypes and shapes too), NaN equal to NaN."""
    if isinstance(u, dict):
        return isinstance(v, dict) and u.keys() == v.keys() and all(same(u[k], v[k]) for k in u)
    if isinstance(u, tuple | list):
        return type(u) is type(v) and len(u) == len(v) and all(same(a, b) for a, b in zip(u, v, strict=True))
    if isinstance(u, np.ndarray):
        if not (isinstance(v, np.ndarray) and u.dtype == v.dtype and u.shape == v.shape):
            return False
        if u.dtype == object:
            return all(same(a, b) for a, b in zip(u.ravel(), v.ravel(), strict=True))
        return bool(np.array_equal(u, v, equal_nan=u.dtype.kind == "f"))
    return type(u) is type(v) and (u == v or (u != u and v != v))


def episode(env: gym.vector.VectorEnv, steps: int, n: int) -> list:
    """Everything ``env`` returns over a reset, ``steps`` steps of seeded random actions, a reset of some
    sub-envs (``reset_mask``) and more steps."""
    rng = np.random.default_rng(0)
    space = env.single_action_space

    def actions() -> np.ndarray:
        if isinstance(space, gym.spaces.Discrete):
            return rng.integers(0, space.n, n)
        return rng.uniform(-1, 1, (n, *space.shape)).astype(space.dtype)

    out = [env.reset(seed=[1000 + i for i in range(n)])]
    out += [env.step(actions()) for _ in range(steps)]
    mask = np.zeros(n, dtype=bool)
    mask[[0, n - 1]] = True  # only the first and the last share reset
    out.append(env.reset(options={"reset_mask": mask}))
    out += [env.step(actions()) for _ in range(steps // 4)]
    return out


ENVS = ["CartPole-v1", "Taxi-v4", "Hopper-v5"]  # discrete, info masks (Taxi), MuJoCo with its truncations


@pytest.mark.parametrize("mode", ["async", "threads"])
@pytest.mark.parametrize("env_id", ENVS)
def test_shares_return_what_one_sync_vector_env_returns(env_id, mode):
    if env_id.startswith("Hopper"):
        pytest.importorskip("mujoco")
    n, steps = 7, 300
    base = EnvConfig(id=env_id, max_episode_steps=60)  # many truncations: final_obs in the infos
    sync = make_vector_env(base, n)
    try:
        expected = episode(sync, steps, n)
    finally:
        sync.close()
    assert sum("final_obs" in out[-1] for out in expected[1:]) > 5
    for shares in (2, 3, n):
        sharded = make_vector_env(attrs.evolve(base, vectorization_mode=mode, shares=shares), n)
        try:
            assert isinstance(sharded, ShardedVectorEnv) and len(sharded.pool) == shares - 1
            assert len(sharded.processes) == (shares - 1 if mode == "async" else 0)
            got = episode(sharded, steps, n)
        finally:
            sharded.close()
        bad = [t for t, (a, b) in enumerate(zip(expected, got, strict=True)) if not same(a, b)]
        assert not bad, f"{shares} shares differ from sync at steps {bad[:5]}"
        assert not any(p.is_alive() for p in sharded.processes)


def _rows(run_dir) -> list[dict]:
    rows = list(csv.DictReader(open(run_dir / "metrics.csv")))
    for row in rows:
        row.pop("seconds"), row.pop("sps")
    return rows


@pytest.mark.parametrize(("mode", "shares"), [("async", 2), ("threads", 2), ("threads", None)])
def test_a_run_in_shares_repeats_the_sync_run_exactly(tmp_path, mode, shares):
    """Metrics, evaluation and checkpoint tensors of a short Pendulum run (observation and reward
    normalisation, evaluation episodes in shares too) are those of the same run with sync sub-envs."""
    small = {"env": {"id": "Pendulum-v1", "num_envs": 6, "normalize_obs": True, "normalize_reward": True},
             "ppo": {"num_steps": 64, "num_minibatches": 4, "update_epochs": 2},
             "run": {"total_timesteps": 768, "eval_episodes": 3, "device": "cpu", "seed": 5}}
    sharded = {**small, "env": {**small["env"], "vectorization_mode": mode,
                                **({} if shares is None else {"shares": shares})}}
    a = train(config_from_dict(small), run_dir=tmp_path / "sync").summary
    b = train(config_from_dict(sharded), run_dir=tmp_path / "shares").summary
    assert a["eval_return_mean"] == b["eval_return_mean"]
    assert _rows(tmp_path / "sync") == _rows(tmp_path / "shares")
    sa = torch.load(a["checkpoint"], weights_only=True)
    sb = torch.load(b["checkpoint"], weights_only=True)
    assert sa["model"].keys() == sb["model"].keys()
    assert all(torch.equal(sa["model"][k], sb["model"][k]) for k in sa["model"])


class Counter(gym.Env):
    """Counts its steps; raises on step 3 once ``boom`` is set (a worker's sub-env failing mid-run)."""

    observation_space = gym.spaces.Box(-1e6, 1e6, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self):
        self.level, self.steps, self.boom = 0, 0, False

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.steps = 0
        return np.array([self.level], np.float32), {}

    def step(self, action):
        self.steps += 1
        if self.boom and self.steps == 3:
            raise ValueError("boom\nsecond line")
        return np.array([self.level + self.steps], np.float32), 1.0, False, self.steps >= 5, {}


@pytest.mark.parametrize("mode", ["async", "threads"])
def test_call_get_attr_and_set_attr_reach_every_sub_env_in_order(mode):
    env = vec_from_factory(Counter, EnvConfig(id="counter", vectorization_mode=mode, shares=3), 5)
    try:
        env.set_attr("level", [10, 20, 30, 40, 50])
        assert env.get_attr("level") == (10, 20, 30, 40, 50)
        env.set_attr("level", 7)  # one value for every sub-env
        assert env.call("get_wrapper_attr", "level") == (7,) * 5
        obs, _ = env.reset(seed=0)
        assert obs[:, 0].tolist() == [7.0] * 5
    finally:
        env.close()


@pytest.mark.parametrize(("mode", "line"), [("async", r"^env \S*Counter: ValueError: boom$"),
                                           ("threads", r"^env \S*Counter raised ValueError: boom$")])
def test_a_sub_env_that_raises_in_another_share_is_one_training_error_naming_the_env(mode, line):
    cfg = EnvConfig(id="counter", vectorization_mode=mode, shares=2)
    env = from_factory(Counter, cfg, 4, torch.device("cpu"))
    try:
        env.reset(seed=0)
        env.sub_envs().set_attr("boom", [False, False, False, True])  # the last sub-env: in the other share
        env.step(torch.zeros(4, dtype=torch.long))
        env.step(torch.zeros(4, dtype=torch.long))
        with pytest.raises(TrainingError, match=line):
            env.step(torch.zeros(4, dtype=torch.long))
    finally:
        env.close()


def test_threads_default_to_one_share_per_cpu():
    env = vec_from_factory(Counter, EnvConfig(id="counter", vectorization_mode="threads"), 64)
    try:
        assert len(env.parts) == min(64, usable_cpus()) and len(env.pool) == len(env.parts) - 1
    finally:
        env.close()


@pytest.mark.parametrize(("backend", "env_id"), [("torch", "Pendulum-v1"), ("envpool", "Pendulum-v1"),
                                                 ("ale", "ALE/Pong-v5")])
def test_backends_that_step_their_own_sub_envs_refuse_shares(backend, env_id):
    config = config_from_dict({"env": {"id": env_id, "backend": backend, "atari": backend == "ale",
                                       "vectorization_mode": "async", "shares": 2}})
    with pytest.raises(ConfigError, match=rf"^env.shares applies to env.backend = 'gymnasium' or 'pettingzoo', "
                                          rf"not '{backend}'$"):
        check_config(config.env)


@pytest.mark.parametrize(("backend", "env_id"), [("torch", "Pendulum-v1"), ("envpool", "Pendulum-v1"),
                                                 ("ale", "ALE/Pong-v5"), ("pettingzoo", "mpe2.simple_spread_v3"),
                                                 ("vmas", "balance")])
def test_threads_are_refused_by_every_backend_but_gymnasium(backend, env_id):
    config = config_from_dict({"env": {"id": env_id, "backend": backend, "atari": backend == "ale",
                                       "vectorization_mode": "threads"}})
    with pytest.raises(ConfigError, match=rf"^env.vectorization_mode = 'threads' applies to env.backend = "
                                          rf"'gymnasium', not '{backend}'$"):
        check_config(config.env)


def test_shares_need_async_or_threads():
    with pytest.raises(ConfigError, match=r"^env.shares = 2 applies to env.vectorization_mode = 'async' or "
                                          r"'threads'"):
        config_from_dict({"env": {"shares": 2}})
    # one share is what "sync" steps: a shipped config in shares can be run in sync from the command line
    assert config_from_dict({"env": {"vectorization_mode": "sync", "shares": 1}}).env.shares == 1
    with pytest.raises(ConfigError, match=r"env.shares = 0 is out of range"):
        config_from_dict({"env": {"vectorization_mode": "async", "shares": 0}})
