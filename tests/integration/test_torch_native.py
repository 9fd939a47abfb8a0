"""The torch-native batched envs (shell/envs/torch_native.py) against gymnasium's Pendulum-v1 and CartPole-v1.

The reference is gymnasium's own env (``gym.make(id).unwrapped``) with ``.state`` set to the float32
state of the torch env (as float64) and stepped once. One step agrees to 1e-5 (absolute): the torch
envs compute in float32, gymnasium in float64.
"""

from __future__ import annotations

import math
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.envs.classic_control import pendulum as gym_pendulum

from shell.api import train
from shell.config import EnvConfig, config_from_dict
from shell.envs import make_env
from shell.envs.torch_native import TORCH_ENVS, TorchCartPole, TorchPendulum

ENV_IDS = ["Pendulum-v1", "CartPole-v1"]
ATOL = 1e-5
X_THRESHOLD = 2.4
THETA_THRESHOLD = 12 * 2 * math.pi / 360
# gymnasium's initial-state bounds: Pendulum uniform in [-pi, pi] x [-1, 1]; CartPole uniform in [-0.05, 0.05]^4
INIT_BOUNDS = {"Pendulum-v1": np.array([gym_pendulum.DEFAULT_X, gym_pendulum.DEFAULT_Y]),
               "CartPole-v1": np.full(4, 0.05)}
DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


# ----------------------------------------------------------------------------- the gymnasium reference
class Reference:
    """gymnasium's unwrapped env, stepped once from a given state."""

    def __init__(self, env_id: str):
        self.env_id = env_id
        self.env = gym.make(env_id).unwrapped
        self.env.reset(seed=0)

    def step(self, state: np.ndarray, action) -> tuple[np.ndarray, float, bool, np.ndarray]:
        """-> (obs, reward, terminated, new state) from ``state`` (a float32 row) and one action."""
        env = self.env
        env.state = np.asarray(state, dtype=np.float64).copy()
        if self.env_id == "CartPole-v1":
            env.steps_beyond_terminated = None  # a fresh "not yet terminated" episode each call
            obs, reward, terminated, truncated, _ = env.step(int(action))
        else:
            obs, reward, terminated, truncated, _ = env.step(np.array([action], dtype=np.float32))
        assert not truncated  # unwrapped: no time limit
        return np.asarray(obs), float(reward), bool(terminated), np.array(env.state, dtype=np.float64)

    def step_batch(self, states: np.ndarray, actions: np.ndarray):
        rows = [self.step(s, a) for s, a in zip(states, actions, strict=True)]
        obs, reward, terminated, new_state = zip(*rows, strict=True)
        return np.stack(obs), np.array(reward), np.array(terminated), np.stack(new_state)

    def observe(self, state: np.ndarray) -> np.ndarray:
        """gymnasium's observation of ``state``."""
        self.env.state = np.asarray(state, dtype=np.float64).copy()
        if self.env_id == "Pendulum-v1":
            return self.env._get_obs()
        return np.array(self.env.state, dtype=np.float32)  # CartPole returns its state as float32


@pytest.fixture(scope="module")
def refs() -> dict[str, Reference]:
    return {env_id: Reference(env_id) for env_id in ENV_IDS}


def torch_step(env_cls, states: np.ndarray, actions: np.ndarray):
    """One step of a torch env with ``env.state = states`` (fresh clocks)."""
    env = env_cls(len(states), "cpu")
    env.reset(seed=0)
    env.state = torch.as_tensor(states, dtype=torch.float32)
    env.elapsed.zero_()
    action = torch.as_tensor(actions, dtype=torch.float32)[:, None] if env_cls is TorchPendulum \
        else torch.as_tensor(actions, dtype=torch.long)
    return env, env.step(action)


def assert_close(actual: torch.Tensor, expected, atol: float = ATOL, rtol: float = 0.0, msg: str = ""):
    expected = torch.as_tensor(np.asarray(expected), dtype=torch.float64)
    torch.testing.assert_close(actual.detach().cpu().double(), expected, atol=atol, rtol=rtol,
                               msg=lambda m: f"{msg}\n{m}")


# ----------------------------------------------------------------------------- parity: one step from the same states
def pendulum_batch(seed: int, n: int = 64) -> tuple[np.ndarray, np.ndarray]:
    """256 float32 states [theta, theta_dot] and torques exercising the angle wrap and both clips."""
    rng = np.random.default_rng(seed)
    groups = []
    # angles far outside [-pi, pi]
    groups.append((rng.uniform(-20, 20, n), rng.uniform(-8, 8, n), rng.uniform(-2, 2, n)))
    # speed near +-8 pushed further by gravity and a large (often out-of-range) torque: the new speed is clipped
    sign = rng.choice([-1.0, 1.0], n)
    theta = sign * rng.uniform(0.2, math.pi - 0.2, n) + 2 * math.pi * rng.integers(-3, 3, n)  # sin(theta) has sign
    groups.append((theta, sign * rng.uniform(7.0, 8.0, n), sign * rng.uniform(1.0, 5.0, n)))
    # torques outside [-2, 2]
    groups.append((rng.uniform(-math.pi, math.pi, n), rng.uniform(-8, 8, n),
                   rng.choice([-1.0, 1.0], n) * rng.uniform(2.0, 10.0, n)))
    # right at the wrap boundaries (2k+1) pi, k in -4..2, on both sides
    odd = 2 * rng.integers(-4, 3, n) + 1
    groups.append((odd * math.pi + rng.uniform(-1e-3, 1e-3, n), rng.uniform(-8, 8, n), rng.uniform(-3, 3, n)))
    theta, theta_dot, action = (np.concatenate(c) for c in zip(*groups, strict=True))
    states = np.stack((theta, theta_dot), axis=1).astype(np.float32)
    return states, action.astype(np.float32)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_pendulum_step_matches_gymnasium(refs, seed: int):
    states, actions = pendulum_batch(seed)
    env, step = torch_step(TorchPendulum, states, actions)
    obs, reward, terminated, new_state = refs["Pendulum-v1"].step_batch(states, actions)

    # the batch exercises what it should
    theta, theta_dot = states.astype(np.float64).T
    u = np.clip(actions.astype(np.float64), -2.0, 2.0)
    unclipped = theta_dot + (15.0 * np.sin(theta) + 3.0 * u) * 0.05
    assert (np.abs(theta) > math.pi).sum() >= 100
    assert (np.abs(theta) > 15).sum() >= 10
    assert (np.abs(actions) > 2).sum() >= 64
    assert (unclipped > 8).sum() >= 20 and (unclipped < -8).sum() >= 20
    assert np.all(np.abs(new_state[:, 1]) <= 8)

    assert_close(step.final_obs, obs, msg="final_obs")
    assert_close(step.obs, obs, msg="obs")  # no episode ends at step 1
    assert_close(step.reward, reward, msg="reward")
    assert_close(env.state, new_state, msg="new state")
    assert step.terminated.tolist() == terminated.tolist() == [False] * len(states)
    clipped = np.abs(unclipped) > 8
    assert torch.equal(env.state[clipped, 1].abs(), torch.full((int(clipped.sum()),), 8.0))


def cartpole_batch(seed: int, n: int = 64) -> tuple[np.ndarray, np.ndarray]:
    """256 float32 states [x, x_dot, theta, theta_dot] and actions, many on either side of the thresholds."""
    rng = np.random.default_rng(seed)

    def sym(lo, hi):
        return rng.choice([-1.0, 1.0], n) * rng.uniform(lo, hi, n)

    groups = [
        # |x| near 2.4: the new x = x + 0.02 x_dot lands on either side
        (sym(2.3, 2.5), rng.uniform(-3, 3, n), rng.uniform(-0.2, 0.2, n), rng.uniform(-1, 1, n)),
        # |theta| near 12 degrees
        (rng.uniform(-2, 2, n), rng.uniform(-1, 1, n), sym(0.18, 0.24), rng.uniform(-3, 3, n)),
        # anywhere in the observation space
        (rng.uniform(-4.8, 4.8, n), rng.uniform(-5, 5, n), rng.uniform(-0.42, 0.42, n), rng.uniform(-5, 5, n)),
        # around the initial states
        tuple(rng.uniform(-0.1, 0.1, n) for _ in range(4)),
    ]
    states = np.concatenate([np.stack(g, axis=1) for g in groups]).astype(np.float32)
    return states, rng.integers(0, 2, len(states))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_cartpole_step_matches_gymnasium(refs, seed: int):
    states, actions = cartpole_batch(seed)
    env, step = torch_step(TorchCartPole, states, actions)
    obs, reward, terminated, new_state = refs["CartPole-v1"].step_batch(states, actions)

    # both sides of both thresholds are exercised
    by_x = np.abs(new_state[:, 0]) > X_THRESHOLD
    by_theta = np.abs(new_state[:, 2]) > THETA_THRESHOLD
    x_group, theta_group = slice(0, 64), slice(64, 128)
    assert 10 <= by_x[x_group].sum() <= 54
    assert 10 <= by_theta[theta_group].sum() <= 54
    assert (~terminated).sum() >= 64 and terminated.sum() >= 64
    # rows whose float64 next state is within float32 rounding of a threshold are a coin toss: none drawn here
    margin = np.minimum(np.abs(np.abs(new_state[:, 0]) - X_THRESHOLD),
                        np.abs(np.abs(new_state[:, 2]) - THETA_THRESHOLD))
    assert margin.min() > 1e-6

    assert_close(step.final_obs, obs, msg="final_obs")
    assert_close(env.state[~terminated], new_state[~terminated], msg="new state")
    assert_close(step.reward, reward, msg="reward")
    assert step.terminated.tolist() == terminated.tolist()
    assert step.episode_done.tolist() == terminated.tolist()
    assert not step.truncated.any()


def test_cartpole_terminates_exactly_past_the_float32_threshold(refs):
    """A cart at rest at x = float32(2.4) = 2.4000001 (> 2.4), or a pole at rest at theta = float32(12 deg)
    (> 12 deg), is past the threshold: gymnasium terminates, and so must the torch env."""
    x32, th32 = float(np.float32(X_THRESHOLD)), float(np.float32(THETA_THRESHOLD))
    assert x32 > X_THRESHOLD and th32 > THETA_THRESHOLD
    states = np.array([[x32, 0, 0, 0], [-x32, 0, 0, 0], [0, 0, th32, 0], [0, 0, -th32, 0]], dtype=np.float32)
    actions = np.array([1, 0, 1, 0])
    _, step = torch_step(TorchCartPole, states, actions)
    obs, _, terminated, _ = refs["CartPole-v1"].step_batch(states, actions)
    assert terminated.tolist() == [True] * 4
    assert_close(step.final_obs, obs)
    assert step.terminated.tolist() == terminated.tolist(), (
        f"final_obs {step.final_obs.tolist()} is past |x| > 2.4 or |theta| > 12 deg but terminated is "
        f"{step.terminated.tolist()}")


# ----------------------------------------------------------------------------- spaces and observation layout
@pytest.mark.parametrize("env_id", ENV_IDS)
def test_spaces_and_layout_match_gymnasium(refs, env_id: str):
    ref_env = gym.make(env_id)
    cls = TORCH_ENVS[env_id]
    env = cls(32, "cpu")
    for mine, theirs in ((env.observation_space, ref_env.observation_space), (env.action_space, ref_env.action_space)):
        assert type(mine) is type(theirs)
        assert mine == theirs
        assert mine.shape == theirs.shape and mine.dtype == theirs.dtype
        if isinstance(mine, gym.spaces.Box):
            np.testing.assert_array_equal(mine.low, theirs.low)
            np.testing.assert_array_equal(mine.high, theirs.high)
    assert env.obs_size == int(np.prod(ref_env.observation_space.shape))
    assert env.max_episode_steps == ref_env.spec.max_episode_steps == {"Pendulum-v1": 200, "CartPole-v1": 500}[env_id]

    obs = env.reset(seed=0)
    assert obs.shape == (32, *ref_env.observation_space.shape)
    expected = np.stack([refs[env_id].observe(s) for s in env.state.double().numpy()])
    assert_close(obs, expected, atol=1e-6)
    assert all(env.observation_space.contains(o) for o in obs.numpy())


def test_make_env_builds_the_torch_native_envs():
    for env_id, cls in TORCH_ENVS.items():
        env = make_env(EnvConfig(id=env_id, backend="torch", num_envs=5), torch.device("cpu"))
        assert type(env) is cls and env.num_envs == 5 and env.max_episode_steps == cls.max_episode_steps
        assert env.reset(seed=0).shape == (5, env.obs_size)
        short = make_env(EnvConfig(id=env_id, backend="torch", num_envs=3, max_episode_steps=7), torch.device("cpu"))
        assert short.max_episode_steps == 7 and cls.max_episode_steps != 7


# ----------------------------------------------------------------------------- initial-state distribution
def gym_initial_states(env_id: str, count: int) -> np.ndarray:
    env = gym.make(env_id).unwrapped
    out = []
    for seed in range(count):
        env.reset(seed=seed)
        out.append(np.array(env.state, dtype=np.float64))
    return np.stack(out)


def assert_initial_states(env_id: str, states: np.ndarray, spread: bool = True):
    bound = INIT_BOUNDS[env_id]
    assert np.all(np.abs(states) <= bound + 1e-6), f"initial state outside [-{bound}, {bound}]: {states}"
    if spread:  # fills the box, centred
        assert np.all(states.min(0) < -0.95 * bound) and np.all(states.max(0) > 0.95 * bound)
        assert np.all(np.abs(states.mean(0)) < 0.05 * bound)


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_reset_distribution_matches_gymnasium(env_id: str):
    env = TORCH_ENVS[env_id](4096, "cpu")
    env.reset(seed=123)
    mine = env.state.double().numpy()
    theirs = gym_initial_states(env_id, 1000)
    assert_initial_states(env_id, theirs)  # the bounds are gymnasium's
    assert_initial_states(env_id, mine)
    bound = INIT_BOUNDS[env_id]
    for q in (0.1, 0.25, 0.5, 0.75, 0.9):  # same (uniform) distribution: quantiles agree
        np.testing.assert_array_less(np.abs(np.quantile(mine, q, axis=0) - np.quantile(theirs, q, axis=0)),
                                     0.08 * bound)


# ----------------------------------------------------------------------------- time limits and SAME_STEP autoreset
def cartpole_policy(obs: torch.Tensor, controlled: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """A balancing controller on ``controlled`` envs (they reach the time limit), random elsewhere."""
    x, x_dot, theta, theta_dot = obs.unbind(-1)
    balance = (3 * theta + theta_dot + 0.1 * x + 0.3 * x_dot > 0).long()
    random = torch.randint(0, 2, (len(obs),), generator=gen)
    return torch.where(controlled, balance, random)


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_time_limit_and_autoreset(refs, env_id: str):
    """Every step is checked against gymnasium; truncation comes exactly at the time limit, terminations
    and truncations autoreset in the same step, and the episode statistics are the finished episode's."""
    n = 16
    ref = refs[env_id]
    env = TORCH_ENVS[env_id](n, "cpu")
    limit = env.max_episode_steps
    gen = torch.Generator().manual_seed(0)
    obs = env.reset(seed=7)
    length = torch.zeros(n, dtype=torch.long)
    if env_id == "Pendulum-v1":
        # stagger the clocks so that the envs hit the limit at different steps
        length = torch.arange(n) * 11
        env.elapsed = length.clone()
        steps = 2 * limit + 20
    else:
        controlled = torch.arange(n) < n // 2
        steps = 2 * limit + 30
    ret = torch.zeros(n, dtype=torch.float64)
    truncations = terminations = 0
    fresh_states = []
    for t in range(steps):
        state = env.state.double().numpy()
        if env_id == "Pendulum-v1":
            action = 3.0 * torch.rand((n, 1), generator=gen) - 1.5
            ref_action = action[:, 0].numpy()
        else:
            action = cartpole_policy(obs, controlled, gen)
            ref_action = action.numpy()
        step = env.step(action)
        ref_obs, ref_reward, ref_terminated, _ = ref.step_batch(state, ref_action)

        # the step itself is gymnasium's
        assert_close(step.final_obs, ref_obs, msg=f"final_obs at step {t}")
        assert_close(step.reward, ref_reward, msg=f"reward at step {t}")
        assert step.terminated.tolist() == ref_terminated.tolist(), f"step {t}"

        length += 1
        ret += step.reward.double()
        assert int(length.max()) <= limit
        assert step.truncated.tolist() == (length == limit).tolist(), f"step {t}: truncation not exactly at {limit}"
        done = step.terminated | step.truncated
        assert step.episode_done.tolist() == done.tolist()

        # the finished episodes: statistics, fresh reset observation, restarted clocks
        if done.any():
            assert step.episode_length[done].tolist() == length[done].tolist()
            assert_close(step.episode_return[done], ret[done], atol=1e-3, rtol=1e-5, msg=f"episode_return at step {t}")
            if env_id == "CartPole-v1":
                assert step.episode_return[done].tolist() == length[done].float().tolist()
            assert not torch.equal(step.obs[done], step.final_obs[done])
            fresh = env.state[done].double().numpy()
            assert_initial_states(env_id, fresh, spread=False)
            assert_close(step.obs[done], np.stack([ref.observe(s) for s in fresh]), atol=1e-6)
            fresh_states.append(fresh)
            assert env.elapsed[done].tolist() == [0] * int(done.sum())
        assert torch.equal(step.obs[~done], step.final_obs[~done])
        assert env.elapsed.tolist() == torch.where(done, 0, length).tolist()
        truncations += int(step.truncated.sum())
        terminations += int(step.terminated.sum())
        length = torch.where(done, 0, length)
        ret = torch.where(done, 0.0, ret)
        obs = step.obs

    if env_id == "Pendulum-v1":
        assert terminations == 0
        assert truncations == 2 * n  # every env twice, each at its own step
    else:
        assert truncations == 2 * n // 2  # the controlled envs, at 500 and 1000
        assert terminations >= 100
    fresh_states = np.concatenate(fresh_states)
    assert_initial_states(env_id, fresh_states, spread=env_id == "CartPole-v1")


# ----------------------------------------------------------------------------- seeding
def rollout(env, seed: int, actions: torch.Tensor) -> list[torch.Tensor]:
    out = [env.reset(seed=seed)]
    for action in actions:
        step = env.step(action)
        out += [step.obs, step.final_obs, step.reward, step.terminated, step.truncated, step.episode_return]
    return out


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_seeding(env_id: str):
    n, cls = 8, TORCH_ENVS[env_id]
    steps = cls.max_episode_steps + 10 if env_id == "Pendulum-v1" else 60  # autoresets draw from the generator
    gen = torch.Generator().manual_seed(1)
    if env_id == "Pendulum-v1":
        actions = 4 * torch.rand((steps, n, 1), generator=gen) - 2
    else:
        actions = torch.randint(0, 2, (steps, n), generator=gen)
    env = cls(n, "cpu")
    first = rollout(env, 5, actions)
    again = rollout(env, 5, actions)  # the same instance, reseeded after a whole trajectory
    fresh = rollout(cls(n, "cpu"), 5, actions)
    other = rollout(cls(n, "cpu"), 6, actions)
    for a, b, c in zip(first, again, fresh, strict=True):
        assert torch.equal(a, b) and torch.equal(a, c)
    assert not torch.equal(first[0], other[0])
    # the autoreset draws differ too: compare the reset observations where both runs ended an episode
    def ended(run):  # [steps, n]: terminated | truncated
        return torch.stack(run[4::6]) | torch.stack(run[5::6])

    both = ended(first) & ended(other)
    assert both.any()  # episodes ended: the autoreset drew states from the generator
    obs_first, obs_other = torch.stack(first[1::6]), torch.stack(other[1::6])
    assert not torch.equal(obs_first[both], obs_other[both])


# ----------------------------------------------------------------------------- device and dtypes
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("env_id", ENV_IDS)
def test_outputs_on_device_with_interface_dtypes(env_id: str, device: str):
    n = 6
    env = TORCH_ENVS[env_id](n, torch.device(device))
    obs = env.reset(seed=0)
    assert obs.device == env.device and obs.dtype == torch.float32 and obs.shape == (n, env.obs_size)
    env.elapsed.fill_(env.max_episode_steps - 1)  # the next step ends every episode: the autoreset path runs
    if env_id == "Pendulum-v1":
        action = torch.zeros((n, 1), device=device)
    else:
        action = torch.ones(n, dtype=torch.long, device=device)
    for _ in range(2):
        step = env.step(action)
        for name, value in step._asdict().items():
            if name == "episode_start":  # None: the torch envs reset in the same step (SAME_STEP)
                assert value is None
                continue
            if name in ("valid", "action_mask", "ended"):  # the lane contract's, filled by shell.envs.base.OneLane
                continue
            assert isinstance(value, torch.Tensor), name
            assert value.device == env.device, name
        assert step.obs.shape == step.final_obs.shape == (n, env.obs_size)
        for name in ("obs", "final_obs", "reward", "episode_return"):
            assert getattr(step, name).dtype == torch.float32, name
        for name in ("terminated", "truncated", "episode_done"):
            assert getattr(step, name).dtype == torch.bool, name
        assert step.episode_length.dtype == torch.long
        assert all(t.shape == (n,) for t in (step.reward, step.terminated, step.truncated, step.episode_done,
                                              step.episode_return, step.episode_length))
    assert env.state.device == env.device and env.state.dtype == torch.float32


def test_pendulum_float64_actions_keep_float32_outputs():
    """GymVecEnv returns float32 whatever the action dtype; the torch env speaks the same interface."""
    env = TorchPendulum(4, "cpu")
    env.reset(seed=0)
    step = env.step(torch.zeros((4, 1), dtype=torch.float64))
    dtypes = {name: getattr(step, name).dtype for name in ("obs", "final_obs", "reward", "episode_return")}
    assert set(dtypes.values()) == {torch.float32}, dtypes
    assert env.state.dtype == torch.float32


# ----------------------------------------------------------------------------- training through the runner
@pytest.mark.parametrize("env_id", ENV_IDS)
def test_short_training_with_torch_backend(tmp_path: Path, env_id: str):
    cfg = config_from_dict({"env": {"id": env_id, "backend": "torch", "num_envs": 64},
                            "ppo": {"num_steps": 32, "num_minibatches": 4, "update_epochs": 2},
                            "run": {"total_timesteps": 4096, "eval_episodes": 2}})
    summary = train(cfg, run_dir=tmp_path / "run").summary
    assert summary["env_steps"] == 4096
    assert summary["env_id"] == env_id
    assert summary["eval_episodes"] == 2 and math.isfinite(summary["eval_return_mean"])
    assert (tmp_path / "run" / "summary.json").exists()


def test_torch_backend_runs_are_evaluated_on_gymnasium_envs():
    """Evaluation uses the reference env, with the same initial states as a gymnasium-backend run."""
    import attrs

    from shell.config import PolicyConfig
    from shell.evaluation import EvalSpec, evaluate
    from shell.policies import ActorCritic

    torch_cfg = config_from_dict({"env": {"id": "Pendulum-v1", "backend": "torch"}}).env
    gym_cfg = attrs.evolve(torch_cfg, backend="gymnasium")
    agent = ActorCritic(3, TorchPendulum.action_space, PolicyConfig())
    cpu = torch.device("cpu")
    on_torch, on_gym = (evaluate(agent, EvalSpec(cfg, 3, 7), cpu).returns for cfg in (torch_cfg, gym_cfg))
    assert on_torch == on_gym
