"""Checkpoint -> agent (shell/inference.py): checkpoints store the env's spaces as plain data, so a policy
loads and exports without its env, from a factory's run as from an id's; older checkpoints without the
spaces still load through the env; a resume with an env of other spaces is refused."""

import io
import json
import os
import subprocess
import sys
import textwrap
from collections import OrderedDict
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium import spaces

import shell
import shell.evaluation
import shell.runner
from shell.checkpoint import load_checkpoint, space_from_data, space_to_data
from shell.config import config_from_dict
from shell.envs import make_env
from shell.errors import ConfigError
from shell.export import export_policy, load_exported, observation_inputs
from shell.inference import load_agent, load_policy
from shell.runner import Trainer
from tests.integration.custom_envs import STRICT_SPACES, MixedDictEnv, StrictActionEnv

from .conftest import ROOT

SERVED = {  # every kind of space the policies serve, with the corners of each encoding
    "box vector": spaces.Box(-1.0, 1.0, (3,), np.float32),
    "box unbounded": spaces.Box(-np.inf, np.inf, (4,), np.float32),
    "box per element": spaces.Box(np.array([-np.inf, -0.0, -2.5, 0.0], np.float32),
                                  np.array([1e30, 0.0, np.inf, np.float32(0.1)], np.float32)),
    "box float64": spaces.Box(np.array([-1.0, 0.1]), np.array([0.2, 1 / 3]), dtype=np.float64),
    "box float16": spaces.Box(np.float16(-2.0), np.float16(2.0), (2,), np.float16),
    "box scalar shape": spaces.Box(-1.0, 1.0, (), np.float32),
    "box int64": spaces.Box(np.iinfo(np.int64).min, np.iinfo(np.int64).max, (2,), np.int64),
    "image uint8": spaces.Box(0, 255, (84, 84, 4), np.uint8),
    "image float": spaces.Box(0.0, 1.0, (3, 16, 16), np.float32),
    "discrete": spaces.Discrete(6),
    "discrete start": spaces.Discrete(3, start=-1),
    "multidiscrete matrix": spaces.MultiDiscrete(np.array([[2, 3], [4, 5]]), start=np.array([[0, 1], [-2, 0]])),
    "multibinary": spaces.MultiBinary(5),
    "multibinary shape": spaces.MultiBinary([2, 3]),
    "dict unsorted": spaces.Dict(OrderedDict([("vector", spaces.Box(-1.0, 1.0, (3,), np.float32)),
                                              ("mode", spaces.Discrete(3)),
                                              ("pixels", spaces.Box(0, 255, (12, 12, 3), np.uint8))])),
    "dict sorted": MixedDictEnv.observation_space,
    **{f"action {name}": StrictActionEnv(space).action_space for name, space in STRICT_SPACES.items()},
}


def assert_same_space(got: gym.Space, want: gym.Space) -> None:
    assert type(got) is type(want) and got == want and got.dtype == want.dtype and got.shape == want.shape
    if isinstance(want, spaces.Box):
        for a, b in ((got.low, want.low), (got.high, want.high)):  # to the bit: inf, the sign of a zero
            assert a.dtype == b.dtype and a.tobytes() == b.tobytes()
    elif isinstance(want, spaces.Discrete):
        assert (got.n, got.start) == (want.n, want.start)
    elif isinstance(want, spaces.MultiDiscrete):
        assert np.array_equal(got.nvec, want.nvec) and np.array_equal(got.start, want.start)
    elif isinstance(want, spaces.Dict):
        assert list(got.spaces) == list(want.spaces)  # the policy's order
        for key in want.spaces:
            assert_same_space(got[key], want[key])


@pytest.mark.parametrize("name", list(SERVED))
def test_every_served_space_round_trips_through_a_weights_only_checkpoint(name):
    space = SERVED[name]
    buffer = io.BytesIO()
    torch.save({"spaces": space_to_data(space)}, buffer)
    buffer.seek(0)
    data = torch.load(buffer, weights_only=True)["spaces"]
    assert_same_space(space_from_data(data), space)
    assert plain(data)


def plain(data) -> bool:
    """Only dicts, lists, str, int, float and bool (no numpy scalars, no tensors)."""
    if isinstance(data, dict):
        return all(isinstance(k, str) and plain(v) for k, v in data.items())
    if isinstance(data, list):
        return all(plain(v) for v in data)
    return type(data) in (str, int, float, bool)


def test_a_space_no_policy_serves_is_refused():
    for space in (spaces.Tuple([spaces.Text(2)]), spaces.Text(4)):
        with pytest.raises(ValueError, match="cannot store"):
            space_to_data(space)
    with pytest.raises(ValueError, match="not a stored space"):
        space_from_data({"type": "Graph"})


def tiny_config(env: dict, policy: dict | None = None, **run):
    return config_from_dict({"env": {"num_envs": 2, **env}, "policy": policy or {},
                             "ppo": {"num_steps": 16, "num_minibatches": 2, "update_epochs": 1},
                             "run": {"eval_episodes": 0, "device": "cpu", "total_timesteps": 32, **run}})


def test_checkpoints_store_the_envs_spaces(tmp_path):
    config = tiny_config({"id": "tests.integration.custom_envs:MixedDict-v0"})
    trainer = Trainer(config, tmp_path / "run", progress=False)
    observation_space, action_space = trainer.env.lanes[None].observation_space, trainer.env.lanes[None].action_space
    trainer.train()
    state = load_checkpoint(next((tmp_path / "run" / "checkpoints").glob("ckpt_*.pt")))
    assert_same_space(space_from_data(state["spaces"]["observation"]), observation_space)
    assert_same_space(space_from_data(state["spaces"]["action"]), action_space)


USER_ENV = '''
import gymnasium as gym
import numpy as np


class Corridor(gym.Env):
    """Walk right: a user's own env, in a module only the training process can import."""

    observation_space = gym.spaces.Dict({"pos": gym.spaces.Box(0.0, 1.0, (1,), np.float32),
                                         "cell": gym.spaces.Discrete(8)})
    action_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.pos = 0
        return self._obs(), {}

    def _obs(self):
        return {"pos": np.array([self.pos / 7], np.float32), "cell": self.pos}

    def step(self, action):
        self.pos = int(np.clip(self.pos + (1 if action[0] > 0 else -1), 0, 7))
        return self._obs(), 1.0 if self.pos == 7 else -0.01, self.pos == 7, False, {}


def make_corridor():
    return gym.wrappers.TimeLimit(Corridor(), max_episode_steps=20)
'''

TRAIN = '''
import shell
from user_env_pkg import make_corridor

shell.train(env=make_corridor, run_dir={run!r}, progress=False,
            overrides={{"env.num_envs": 2, "ppo.num_steps": 16, "ppo.num_minibatches": 2, "ppo.update_epochs": 1,
                       "run.total_timesteps": 32, "run.eval_episodes": 0, "run.device": "cpu"}})
'''

USE = '''
import json

import numpy as np

import shell
from shell.export import export_policy, load_exported, observation_inputs

try:
    import user_env_pkg  # noqa: F401
    raise SystemExit("the env's module should not be importable here")
except ImportError:
    pass
policy = shell.load_policy({run!r})
obs = {{"pos": np.array([[0.0], [0.5], [1.0]], np.float32), "cell": np.array([0, 3, 7])}}
actions = policy(obs)
result = export_policy({run!r}, "pt2", {out!r})
got = load_exported(result.path, "pt2")(*observation_inputs(obs, policy.observation_space))
print(json.dumps({{"space": str(policy.observation_space), "same": bool(np.array_equal(got, actions)),
                  "dtype": str(actions.dtype), "shape": list(actions.shape), "checked": result.checked_observations}}))
'''


def python(code: str, path: list[Path], cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(str(p) for p in [ROOT, *path])}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=cwd, env=env, timeout=300)


def test_a_factory_run_loads_and_exports_where_its_env_cannot_be_imported(tmp_path):
    """Trained from a factory in the user's own module; loaded and exported in a process that cannot import it."""
    package = tmp_path / "user"
    package.mkdir()
    (package / "user_env_pkg.py").write_text(textwrap.dedent(USER_ENV))
    run, out = tmp_path / "run", tmp_path / "policy.pt2"
    proc = python(TRAIN.format(run=str(run)), [package], tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    proc = python(USE.format(run=str(run), out=str(out)), [], tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result == {"space": "Dict('cell': Discrete(8), 'pos': Box(0.0, 1.0, (1,), float32))", "same": True,
                      "dtype": "float32", "shape": [3, 1], "checked": 65}
    assert out.is_file()


def test_an_id_run_loads_and_exports_with_gymnasiums_registry_blocked(tmp_path, monkeypatch):
    run = tmp_path / "run"
    Trainer(tiny_config({"id": "Pendulum-v1", "normalize_obs": True}), run, progress=False).train()
    expected = load_policy(run)
    obs = np.stack([expected.observation_space.sample() for _ in range(16)])
    monkeypatch.setattr(gym.envs.registration, "registry", {})
    monkeypatch.setattr(gym, "registry", {})
    with pytest.raises(gym.error.Error):  # the block holds: no env of the id can be made now
        gym.make("Pendulum-v1")
    with pytest.raises(ConfigError):
        make_env(tiny_config({"id": "Pendulum-v1"}).env, torch.device("cpu"), num_envs=1)
    policy = shell.load_policy(run)
    assert policy.observation_space == expected.observation_space and policy.action_space == expected.action_space
    assert np.array_equal(policy(obs), expected(obs))
    result = export_policy(run, "pt2", tmp_path / "policy.pt2")
    got = load_exported(result.path, "pt2")(*observation_inputs(obs, policy.observation_space))
    assert np.abs(got - expected(obs)).max() <= 1e-5


def drop_spaces(run: Path) -> None:
    """Make the run's checkpoints as they were written before they stored the spaces."""
    for path in (run / "checkpoints").glob("ckpt_*.pt"):
        state = torch.load(path, weights_only=True)
        del state["spaces"]
        torch.save(state, path)


class MatchSign(gym.Env):
    observation_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.array([1.0], np.float32), {}

    def step(self, action):
        return np.array([1.0], np.float32), float(action), True, False, {}


class WiderMatchSign(MatchSign):
    observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.ones(2, np.float32), {}

    def step(self, action):
        return np.ones(2, np.float32), float(action), True, False, {}


def factory_run(run: Path) -> None:
    shell.train(env=MatchSign, run_dir=run, progress=False,
                overrides={"env.num_envs": 2, "ppo.num_steps": 16, "ppo.num_minibatches": 1,
                           "run.total_timesteps": 32, "run.eval_episodes": 0, "run.device": "cpu"})


def test_checkpoints_without_spaces_load_through_the_env(tmp_path):
    run = tmp_path / "id"
    Trainer(tiny_config({"id": "CartPole-v1"}), run, progress=False).train()
    obs = np.random.default_rng(0).uniform(-1, 1, (8, 4)).astype(np.float32)
    expected = load_policy(run)(obs)
    drop_spaces(run)
    assert np.array_equal(load_policy(run)(obs), expected)
    run = tmp_path / "factory"
    factory_run(run)
    drop_spaces(run)
    with pytest.raises(ConfigError, match=r"trained on an env factory.*env=<the same env factory>"):
        load_agent(run)
    agent, _, _ = load_agent(run, env=MatchSign)
    assert agent.observation_space == MatchSign.observation_space


def test_the_eval_command_and_resume_still_need_a_factory_runs_env(tmp_path):
    run = tmp_path / "run"
    factory_run(run)
    shell.load_policy(run)  # the policy alone does not need it
    with pytest.raises(ConfigError, match=r"trained on an env factory.*evaluate it from Python.*shell\.evaluate\("):
        shell.evaluation.eval_checkpoint(run, episodes=1)
    with pytest.raises(ConfigError, match=r"resume it from Python: shell.resume\(.*env=<the same env factory>\)"):
        shell.resume(run, 64, progress=False)


def test_resume_refuses_an_env_of_other_spaces_and_closes_it(tmp_path, monkeypatch):
    run = tmp_path / "run"
    factory_run(run)
    closed = []
    original_init = shell.runner.Trainer.__init__

    def tracking_init(self, *args, **kwargs):
        original_init(self, *args, **kwargs)
        env_close = self.env.close
        self.env.close = lambda: (closed.append(True), env_close())[1]

    monkeypatch.setattr(shell.runner.Trainer, "__init__", tracking_init)
    with pytest.raises(ConfigError, match=r"the env's observation space Box\(-1.0, 1.0, \(2,\), float32\) differs "
                                          r"from the checkpoint's Box\(-1.0, 1.0, \(1,\), float32\)"):
        shell.resume(run, 64, env=WiderMatchSign, progress=False)
    assert closed == [True]
    assert shell.resume(run, 64, env=MatchSign, progress=False).summary["env_steps"] == 64


def test_an_observation_of_the_wrong_shape_is_one_line_naming_both_shapes_checked_before_the_mask():
    """It used to be torch's 'mat1 and mat2 shapes cannot be multiplied', and with a mask, a complaint about the
    mask (issue 39)."""
    from shell.config import PolicyConfig
    from shell.inference import Policy
    from shell.policies import ActorCritic

    box = spaces.Box(-1.0, 1.0, (4,), np.float32)
    agent = ActorCritic(4, spaces.Discrete(3), PolicyConfig(hidden_sizes=[8]))
    policy = Policy(agent, box)
    assert policy(np.zeros(4, np.float32)).shape == () and policy(np.zeros((2, 4), np.float32)).shape == (2,)
    for obs, given in ((np.zeros(3, np.float32), [3]), (np.zeros((2, 3), np.float32), [2, 3]),
                       (np.zeros((2, 2, 4), np.float32), [2, 2, 4]), (np.float32(0.0), [])):
        with pytest.raises(ValueError) as info:
            policy(obs)
        assert str(info.value) == (f"the observation has shape {given}; this policy takes [4] (one observation) or "
                                   "[N, 4] (a batch)"), str(info.value)
    agent.action_mask_source = "info"  # a masked policy given a wrong observation and a right mask
    with pytest.raises(ValueError, match=r"^the observation has shape \[3\]; this policy takes \[4\]"):
        policy(np.zeros(3, np.float32), action_mask=np.ones(3, bool))
    keyed = spaces.Dict({"pos": box, "image": spaces.Box(0, 255, (2, 5, 5), np.uint8)})
    dict_agent = ActorCritic(keyed, spaces.Discrete(3), PolicyConfig(hidden_sizes=[8]))
    dict_policy = Policy(dict_agent, keyed)
    good = {"pos": np.zeros(4, np.float32), "image": np.zeros((2, 5, 5), np.uint8)}
    assert dict_policy(good).shape == ()
    with pytest.raises(ValueError) as info:
        dict_policy({**good, "pos": np.zeros(5, np.float32)})
    assert str(info.value) == ("observation key 'pos' has shape [5]; this policy takes [4] (one observation) or "
                               "[N, 4] (a batch)")
    with pytest.raises(ValueError, match=r"^the observation has no key 'image'; this policy takes the keys"):
        dict_policy({"pos": good["pos"]})
    with pytest.raises(ValueError, match=r"^the observation's keys are not one observation nor one batch"):
        dict_policy({**good, "pos": np.zeros((2, 4), np.float32)})
