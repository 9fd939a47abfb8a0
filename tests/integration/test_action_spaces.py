"""Action spaces at the env boundary: bounds, fixed components, dtypes and shapes.

The envs in custom_envs.STRICT_SPACES raise on any action outside their space or not in the
space's dtype, as a strict user env does; a raise ends a run with exit code 1.
"""

import json

import gymnasium as gym
import numpy as np
import pytest
import torch

import core
from shell.actions import box_action_layout, float32_inward, to_env_action
from shell.config import PolicyConfig, config_from_dict
from shell.envs import check_action_space
from shell.errors import ConfigError
from shell.inference import Policy, load_policy
from shell.policies import ActorCritic
from shell.runner import Trainer

from .custom_envs import STRICT_SPACES, StrictActionEnv
from .test_robustness import CUSTOM, TINY, last_line

WIDE = ["--set", "policy.init_log_std=2"]  # std e^2: |u| > 9 (float32 tanh = +-1) in a fifth of the draws
SERVED = ["TightBox-v0", "LopsidedBox-v0", "Float64Box-v0", "IntBox-v0", "LockedJointBox-v0", "MatrixBox-v0",
          "Discrete32-v0", "MultiDiscrete32-v0"]
# Bounds where float32 tanh(u) * scale + bias steps outside the Box, float32 and float64.
EDGY_BOXES = [(-1.0, 0.2, np.float32), (-1.0, 0.2, np.float64), (-1000.0, 0.001, np.float32),
              (-1000.0, 0.001, np.float64), (-1000.0, 0.2, np.float32), (-10.0, 0.001, np.float64),
              (0.0, 1.0, np.float64), (-0.1, 1.0, np.float64), (-0.3, 0.9, np.float32), (0.0, 0.2, np.float64)]


def strict_space(name: str) -> gym.Space:
    return StrictActionEnv(STRICT_SPACES[name]).action_space


def obs_space() -> gym.Space:
    return StrictActionEnv.observation_space


def in_space(actions: np.ndarray, space: gym.Space) -> bool:
    return actions.dtype == space.dtype and all(space.contains(np.asarray(a)) for a in actions)


def saturating_raw(n: int = 64, size: int = 1) -> torch.Tensor:
    """Raw actions from -60 to 60, many where float32 tanh is exactly +-1."""
    return torch.linspace(-60.0, 60.0, n)[:, None].expand(n, size).contiguous()


# ----------------------------------------------------------------------------- through main.py
@pytest.mark.parametrize("name", SERVED)
def test_strict_env_trains_and_evaluates(main, tmp_path, name):
    """Every action the rollout and the evaluation send is inside the space, in its dtype."""
    run = tmp_path / "run"
    proc = main("--config", "pendulum", "--set", f"env.id={CUSTOM}:{name}", *TINY, *WIDE,
                "--total-timesteps", "128", "--run-dir", str(run))
    assert proc.returncode == 0, proc.stderr[-2000:]
    summary = json.loads(last_line(proc.stdout))
    assert summary["env_steps"] == 128 and summary["eval_episodes"] == 2
    assert np.isfinite(summary["eval_return_mean"])
    # the deployment path: numpy actions in the space's shape and dtype
    space = strict_space(name)
    policy = load_policy(run)
    obs = obs_space().sample()
    single = policy(obs)
    assert single.shape == space.shape and single.dtype == space.dtype and space.contains(single)
    assert in_space(policy(np.stack([obs_space().sample() for _ in range(5)])), space)


@pytest.mark.parametrize(("name", "needle"), [("AllLockedBox-v0", "every component has low == high"),
                                              ("BoolBox-v0", "bool Box")])
def test_unservable_box_is_refused_in_one_line(main, tmp_path, name, needle):
    proc = main("--config", "pendulum", "--set", f"env.id={CUSTOM}:{name}", *TINY, "--run-dir", str(tmp_path / "r"))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    line = last_line(proc.stderr)
    assert needle in line and "unsupported action space Box(" in line
    assert not (tmp_path / "r").exists()


# ----------------------------------------------------------------------------- bounds
@pytest.mark.parametrize(("low", "high", "dtype"), EDGY_BOXES)
def test_saturated_actions_stay_in_the_box(low, high, dtype):
    """Float32 rounding once tanh saturates; the float32 tensor itself is inside the space's own bounds."""
    space = gym.spaces.Box(low, high, (3,), dtype)
    agent = ActorCritic(3, space, PolicyConfig(init_log_std=2.0))
    raw = saturating_raw(size=3)
    action = agent.actor.env_action(raw)
    assert action.dtype == torch.float32
    assert torch.all(action.double() >= float(space.low[0])) and torch.all(action.double() <= float(space.high[0]))
    assert in_space(to_env_action(action, space), space)
    # the clamp is a rounding-level correction: it moves no action by more than a few float32 steps of the scale
    unclamped = core.squash(raw, agent.actor.action_scale, agent.actor.action_bias)
    assert torch.allclose(action, unclamped, rtol=0, atol=8 * 1.2e-7 * (abs(low) + abs(high)))
    # sampled with a wide std: what is stored and what the log-prob is computed on agree
    obs = torch.randn(256, 3)
    out = agent.get_action(obs)
    assert in_space(to_env_action(out.action, space), space)
    assert torch.equal(out.action, agent.actor.env_action(out.raw_action))
    assert torch.allclose(out.log_prob, agent.evaluate(obs, out.raw_action)[0], atol=1e-4)


@pytest.mark.parametrize(("low", "high", "dtype"), EDGY_BOXES[:4])
def test_deterministic_paths_stay_in_the_box(low, high, dtype):
    """ActorCritic.act and the deployed Policy with a saturated mean (u = +-50)."""
    space = gym.spaces.Box(low, high, (2,), dtype)
    agent = ActorCritic(3, space, PolicyConfig())
    with torch.no_grad():
        agent.actor.net[-1].weight.zero_()
        agent.actor.net[-1].bias.copy_(torch.tensor([50.0, -50.0]))
    obs = torch.randn(4, 3)
    action = agent.act(obs)
    assert torch.all(action.double() >= low) and torch.all(action.double() <= float(space.high[0]))
    policy = Policy(agent, obs_space())
    assert in_space(policy(obs.numpy()), space)
    single = policy(obs[0].numpy())
    assert single.dtype == space.dtype and space.contains(single)


def test_squash_clamps_to_the_bounds_it_is_given():
    scale, bias = torch.tensor([0.6]), torch.tensor([-0.4])  # Box(-1, 0.2) in float32
    raw = torch.tensor([[30.0]])
    assert core.squash(raw, scale, bias).item() > np.float32(0.2)  # the fault
    low, high = torch.tensor([-1.0]), torch.tensor([0.2])
    assert core.squash(raw, scale, bias, low, high).item() == np.float32(0.2)
    with pytest.raises(ValueError, match="high"):
        core.squash(raw, scale, bias, low, torch.tensor([0.2, 0.3]))


def test_float32_bounds_are_rounded_inward():
    low32, high32 = float32_inward(np.array([-0.2, 0.2, -1.0]), np.array([0.2, 0.3, 0.1]))
    assert low32.dtype == high32.dtype == np.float32
    assert np.all(low32.astype(np.float64) >= [-0.2, 0.2, -1.0])
    assert np.all(high32.astype(np.float64) <= [0.2, 0.3, 0.1])
    assert np.all(np.nextafter(low32, np.float32(-np.inf)).astype(np.float64) < [-0.2, 0.2, -1.0])  # the nearest
    assert low32[2] == -1.0


def test_torch_backend_actions_stay_in_the_box(tmp_path):
    """The torch backend takes the actor's tensors as they are: check them against its bounds."""
    cfg = config_from_dict({"env": {"id": "Pendulum-v1", "backend": "torch", "num_envs": 4},
                            "policy": {"init_log_std": 2.0}, "ppo": {"num_steps": 64},
                            "run": {"device": "cpu", "total_timesteps": 256}})
    trainer = Trainer(cfg, tmp_path / "run")
    with torch.no_grad():
        trainer.agent.actor.net[-1].bias.fill_(5.0)  # mean 5, std e^2: saturated a third of the time
    sent = []
    step = trainer.env.step
    trainer.env.step = lambda actions: (sent.append(actions[None].clone()), step(actions))[1]
    trainer.collect(trainer.env.reset(seed=0))
    actions = torch.cat(sent)
    space = trainer.env.lanes[None].action_space
    assert actions.dtype == torch.float32 and actions.shape == (256, 1)
    assert torch.all(actions >= float(space.low[0])) and torch.all(actions <= float(space.high[0]))
    assert (actions == 2.0).any()


# ----------------------------------------------------------------------------- fixed components
def test_locked_joint_is_held_and_left_out_of_the_distribution(tmp_path):
    space = gym.spaces.Box(np.array([-1.0, 0.5, -2.0], np.float32), np.array([1.0, 0.5, 2.0], np.float32))
    agent = ActorCritic(3, space, PolicyConfig(init_log_std=2.0))
    assert agent.actor.log_std.shape == (2,) and agent.actor.raw_action_shape == (2,)
    out = agent.get_action(torch.randn(100, 3))
    assert out.raw_action.shape == (100, 2) and out.action.shape == (100, 3)
    assert torch.all(out.action[:, 1] == 0.5) and torch.isfinite(out.log_prob).all()
    assert in_space(to_env_action(out.action, space), space)
    # the env action's free components are the squashed raw action
    expected = core.squash(out.raw_action, agent.actor.action_scale, agent.actor.action_bias,
                           agent.actor.action_low, agent.actor.action_high)
    assert torch.equal(out.action[:, [0, 2]], expected)
    # log-prob and entropy cover the free components only
    mean, std = agent.actor.distribution(torch.zeros(1, 3))
    assert mean.shape == (1, 2) and std.shape == (2,)


def test_locked_joint_first_update_is_finite(tmp_path):
    cfg = config_from_dict({"env": {"id": f"{CUSTOM}:LockedJointBox-v0", "num_envs": 2},
                            "policy": {"init_log_std": 2.0},
                            "ppo": {"num_steps": 32, "num_minibatches": 2, "update_epochs": 2},
                            "run": {"device": "cpu", "total_timesteps": 64, "eval_episodes": 0}})
    trainer = Trainer(cfg, tmp_path / "run")
    assert trainer.lanes.only.storage.raw_actions.shape == (32, 2, 2)
    trainer.collect(trainer.env.reset(seed=0))
    metrics = trainer.lanes.only.ppo.update(trainer.lanes.only.storage)
    assert all(torch.isfinite(v) for v in metrics.values()), metrics
    assert all(torch.isfinite(p).all() for p in trainer.agent.parameters())
    trainer.env.close()


def test_fixed_value_float32_cannot_hold_is_exact_at_the_env_boundary():
    space = strict_space("LockedJointBox-v0")  # component 1 is fixed at float64 0.2
    agent = ActorCritic(3, space, PolicyConfig())
    actions = to_env_action(agent.get_action(torch.randn(8, 3)).action, space)
    assert actions.dtype == np.float64 and np.all(actions[:, 1] == 0.2)
    assert in_space(actions, space)


# ----------------------------------------------------------------------------- dtypes
def test_integer_box_stores_float_raw_actions_and_consistent_log_probs(tmp_path):
    cfg = config_from_dict({"env": {"id": f"{CUSTOM}:IntBox-v0", "num_envs": 4},
                            "policy": {"init_log_std": 1.0}, "ppo": {"num_steps": 64},
                            "run": {"device": "cpu", "total_timesteps": 256}})
    trainer = Trainer(cfg, tmp_path / "run")
    assert trainer.agent.actor.raw_action_dtype == torch.float32
    trainer.collect(trainer.env.reset(seed=0))
    storage, actor = trainer.lanes.only.storage, trainer.agent.actor
    raw = storage.raw_actions.flatten(0, 1)
    assert raw.dtype == torch.float32 and raw.shape == (256, 2)
    assert (raw != raw.round()).all()  # not truncated to integers
    obs = storage.obs.flatten(0, 1)
    with torch.no_grad():
        assert torch.allclose(storage.log_probs.flatten(), actor.log_prob(obs, raw), atol=1e-5)
        actions = actor.env_action(raw)
    assert torch.equal(actions, actions.round()) and actions.min() == 0 and actions.max() == 10
    space = trainer.env.lanes[None].action_space
    assert in_space(to_env_action(actions, space), space)
    trainer.env.close()


def test_integer_box_bins_are_equal_width():
    """Squashed onto [low - 0.5, high + 0.5]: each integer of Box(0, 2) covers a third of tanh's range."""
    agent = ActorCritic(3, gym.spaces.Box(0, 2, (1,), np.int64), PolicyConfig())
    y = torch.linspace(-1, 1, 30001)[1:-1, None]
    actions = agent.actor.env_action(torch.atanh(y))
    counts = torch.bincount(actions[:, 0].long(), minlength=3).double() / len(y)
    assert torch.allclose(counts, torch.full((3,), 1 / 3, dtype=torch.float64), atol=1e-3)


@pytest.mark.parametrize("space", [gym.spaces.Discrete(3, start=-1, dtype=np.int32),
                                   gym.spaces.MultiDiscrete([3, 4], start=[-1, 2], dtype=np.int32),
                                   gym.spaces.MultiDiscrete([2, 5], start=[10, -3], dtype=np.int16)])
def test_discrete_actions_in_the_space_dtype_with_start(space):
    agent = ActorCritic(3, space, PolicyConfig())
    assert agent.actor.raw_action_dtype == torch.long
    out = agent.get_action(torch.randn(300, 3))
    actions = to_env_action(out.action, space)
    assert in_space(actions, space)
    assert actions.shape == (300, *space.shape)
    first = actions.reshape(300, -1)[:, 0]  # every value of the first component is reached
    start = int(np.ravel(space.start)[0])
    n = int(space.n) if isinstance(space, gym.spaces.Discrete) else int(space.nvec[0])
    assert set(first.tolist()) == set(range(start, start + n))


@pytest.mark.parametrize("space", [gym.spaces.Box(0, 200, (2,), np.uint8), gym.spaces.Box(-0.5, 0.2, (), np.float16),
                                   gym.spaces.Box(-1, 0.2, (2, 1, 2), np.float64)])
def test_other_dtypes_and_shapes_are_served(space):
    check_action_space(space)
    agent = ActorCritic(3, space, PolicyConfig(init_log_std=2.0))
    size = int(np.prod(space.shape))
    assert agent.actor.raw_action_shape == (size,)
    out = agent.get_action(torch.randn(200, 3))
    assert out.action.shape == (200, size)
    assert in_space(to_env_action(out.action, space), space)
    assert in_space(to_env_action(agent.actor.env_action(saturating_raw(size=size)), space), space)


# ----------------------------------------------------------------------------- refusals
def _mutated(low, high) -> gym.spaces.Box:
    space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    space.low[:] = low  # gymnasium refuses NaN and low > high at construction; a user space may still hold them
    space.high[:] = high
    return space


@pytest.mark.parametrize(("space", "needle"), [
    (gym.spaces.Box(0, 1, (2,), np.bool_), "bool Box"),
    (gym.spaces.Box(0.5, 0.5, (3,), np.float32), "every component has low == high"),
    (gym.spaces.Box(3, 3, (2, 2), np.int64), "every component has low == high"),
    (gym.spaces.Box(-np.inf, 1.0, (2,), np.float32), "no inf or NaN"),
    (_mutated([np.nan, 0.0], 1.0), "no inf or NaN"),
    (_mutated(0.5, [1.0, 0.2]), "low <= high"),
    (gym.spaces.Box(-1e39, 1e39, (2,), np.float64), "float32 range"),
    (gym.spaces.Box(0, 2**30, (2,), np.int64), r"2\*\*24"),
])
def test_unservable_boxes_raise_one_line(space, needle):
    with pytest.raises(ConfigError, match=needle) as info:
        check_action_space(space)
    assert "\n" not in str(info.value) and str(info.value).startswith("unsupported action space Box(")
    with pytest.raises(ConfigError, match=needle):
        ActorCritic(3, space, PolicyConfig())


def test_layout_of_a_locked_integer_component():
    layout = box_action_layout(gym.spaces.Box(np.array([0, 4, -3]), np.array([5, 4, 3]), dtype=np.int64))
    assert layout.free_index.tolist() == [0, 2] and layout.fixed_action.tolist() == [0.0, 4.0, 0.0]
    assert layout.scale.tolist() == [3.0, 3.5] and layout.bias.tolist() == [2.5, 0.0]
    assert layout.low.tolist() == [0.0, -3.0] and layout.high.tolist() == [5.0, 3.0] and layout.integer


def test_a_refused_run_without_a_run_dir_leaves_no_empty_runs_folder(tmp_path, monkeypatch):
    """The default run dir runs/<env>__s<seed>__<time>: a start-up refusal (a link to a part Platform-v0's Dict
    action does not have) removes it and the runs/ folder it made, but never a runs/ that was there before, nor
    another run's folder in it."""
    from shell.api import train

    monkeypatch.chdir(tmp_path)
    config = config_from_dict({"env": {"id": "Platform-v0", "num_envs": 2}, "run": {"total_timesteps": 64},
                               "policy": {"action_links": {"kind": {"0": ["walk"]}}}})
    refusal = "policy.action_links.kind.0: the action space has no part 'walk'"
    with pytest.raises(ConfigError, match=refusal):
        train(config=config, progress=False)
    assert not (tmp_path / "runs").exists()
    (tmp_path / "runs" / "other").mkdir(parents=True)
    with pytest.raises(ConfigError, match=refusal):
        train(config=config, progress=False)
    assert [p.name for p in (tmp_path / "runs").iterdir()] == ["other"]
    with pytest.raises(ConfigError, match=refusal):
        train(config=config, run_dir=tmp_path / "a" / "b", progress=False)
    assert not (tmp_path / "a").exists()
