"""The refinements, each off by default: RPO (``ppo.rpo_alpha``), the KL-adaptive learning rate
(``ppo.desired_kl``), value normalisation (``ppo.value_norm``), LayerNorm in the MLPs
(``policy.layer_norm``) and critic-only observation keys (``policy.critic_keys``). Each trains a few
updates with its option on; the pure parts are property-tested in tests/property/test_refinements.py."""

from __future__ import annotations

import csv
import itertools

import gymnasium as gym
import numpy as np
import pytest
import torch

import core
from shell.api import resume, train
from shell.checkpoint import load_checkpoint
from shell.config import PolicyConfig, config_from_dict, load_config
from shell.errors import ConfigError
from shell.export import export_policy
from shell.inference import load_policy
from shell.policies import ActorCritic
from shell.runner import Trainer

from .conftest import run_main
from .test_multiagent import MIXED
from .test_multiagent import config as multiagent_config

PENDULUM = {"env.id": "Pendulum-v1", "env.num_envs": 4, "ppo.num_steps": 32, "ppo.num_minibatches": 2,
            "ppo.update_epochs": 2, "policy.hidden_sizes": [16], "run.total_timesteps": 384,
            "run.eval_episodes": 0, "run.loggers": []}


def pendulum(**overrides):
    return load_config(None, {**PENDULUM, **overrides})


def rows_of(run) -> list[dict[str, str]]:
    with open(run / "metrics.csv") as f:
        return list(csv.DictReader(f))


def finite_metrics(run) -> bool:
    keys = ("policy_loss", "value_loss", "entropy", "approx_kl", "explained_variance")
    return all(np.isfinite(float(row[k])) for row in rows_of(run) for k in keys)


# ---------------------------------------------------------------- RPO
def test_rpo_trains_and_perturbs_only_the_update(tmp_path):
    summary = train(config=pendulum(**{"ppo.rpo_alpha": 0.5}), run_dir=tmp_path / "rpo", progress=False).summary
    assert summary["env_steps"] == 384 and finite_metrics(tmp_path / "rpo")
    # the rollout is RPO's own: the first one (before any update) is the plain policy's, bit for bit
    stored = []
    for alpha in (0.0, 0.5):
        trainer = Trainer(pendulum(**{"ppo.rpo_alpha": alpha}), tmp_path / f"collect{alpha}")
        trainer.collect(trainer.env.reset(seed=0))
        storage = trainer.lanes.only.storage
        stored.append((storage.raw_actions.clone(), storage.log_probs.clone(), storage.values.clone()))
        trainer.env.close()
    assert all(torch.equal(a, b) for a, b in zip(*stored, strict=True))
    # in the update the actions are scored under the perturbed mean; at 0 nothing is drawn
    agent = ActorCritic(3, gym.spaces.Box(-2.0, 2.0, (1,)), PolicyConfig(hidden_sizes=[8]))
    obs, raw = torch.randn(5, 3), torch.randn(5, 1)
    plain, with_zero = torch.Generator().manual_seed(1), torch.Generator().manual_seed(1)
    log_prob, _, _ = agent.evaluate(obs, raw, plain)
    log_prob0, _, _ = agent.evaluate(obs, raw, with_zero, rpo_alpha=0.0)
    assert torch.equal(log_prob, log_prob0) and torch.equal(plain.get_state(), with_zero.get_state())
    perturbed, _, _ = agent.evaluate(obs, raw, torch.Generator().manual_seed(1), rpo_alpha=0.5)
    assert not torch.equal(perturbed, log_prob)


def test_rpo_needs_box_actions(tmp_path):
    with pytest.raises(ConfigError, match=r"ppo.rpo_alpha = 0.5 perturbs a Gaussian's mean: it needs Box actions"):
        train("cartpole", overrides={"ppo.rpo_alpha": 0.5}, run_dir=tmp_path / "run", progress=False)


# ---------------------------------------------------------------- KL-adaptive learning rate
def test_desired_kl_moves_the_learning_rate_by_rsl_rls_rule_and_resumes_from_it(tmp_path):
    run = tmp_path / "run"
    # a desired KL far below any step's: every minibatch with a KL above 2e-12 divides the rate by 1.5
    train(config=pendulum(**{"ppo.desired_kl": 1e-12, "ppo.learning_rate": 1e-3}), run_dir=run, progress=False)
    rates = [float(row["learning_rate"]) for row in rows_of(run)]
    assert rates[0] < 1e-3 and all(b <= a for a, b in itertools.pairwise(rates))
    assert finite_metrics(run)
    state = load_checkpoint(next((run / "checkpoints").glob("ckpt_*.pt")))
    saved = float(state["optimizer"]["param_groups"][0]["lr"])
    assert saved == pytest.approx(rates[-1], rel=1e-6)
    # every rate is 1e-3 / 1.5^k, or the floor
    steps = [np.log(1e-3 / r) / np.log(1.5) for r in rates if r > 1e-5]
    assert all(abs(k - round(k)) < 1e-4 for k in steps)
    resume(run, total_timesteps=512)
    rates_after = [float(row["learning_rate"]) for row in rows_of(run)]
    assert len(rates_after) == 4 and rates_after[3] <= rates[-1]


def test_desired_kl_steps_without_a_host_sync_on_a_device_tensor():
    lr = torch.tensor(1e-3)
    out = core.adaptive_learning_rate(lr, torch.tensor(0.05), 0.01)
    assert isinstance(out, torch.Tensor) and float(out) == pytest.approx(1e-3 / 1.5)


# ---------------------------------------------------------------- value normalisation
def test_value_norm_trains_saves_and_resumes_its_statistics(tmp_path):
    run = tmp_path / "run"
    result = train(config=pendulum(**{"ppo.value_norm": True}), run_dir=run, progress=False)
    assert finite_metrics(run)
    state = load_checkpoint(next((run / "checkpoints").glob("ckpt_*.pt")))
    assert float(state["model"]["value_normalizer.moments.count"]) == 384  # every return of 3 rollouts
    assert float(state["model"]["value_normalizer.moments.mean"]) < -1.0  # Pendulum's returns are negative
    # the rollout reads values in return units: the head's output rescaled by the statistics
    agent = result.policy.agent
    obs = torch.randn(6, 3)
    head = agent.critic(obs).squeeze(-1)
    moments = agent.value_normalizer.moments
    torch.testing.assert_close(agent.value(obs), core.denormalize_value(head, moments.mean, moments.var))
    torch.testing.assert_close(agent.value_normalizer.normalize(agent.value(obs)), head)
    resumed = resume(run, total_timesteps=512).summary
    state = load_checkpoint(resumed["checkpoint"])
    assert float(state["model"]["value_normalizer.moments.count"]) == 512


def test_value_norm_keeps_statistics_per_lane(tmp_path):
    cfg = multiagent_config(**MIXED, **{"ppo.value_norm": True, "run.eval_episodes": 0})
    result = train(config=cfg, run_dir=tmp_path / "run", progress=False)
    state = load_checkpoint(result.summary["checkpoint"])
    counts = {group: float(state["model"][f"{group}.value_normalizer.moments.count"]) for group in ("runner", "scout")}
    assert counts["runner"] > 0 and counts["scout"] > 0
    means = {group: float(state["model"][f"{group}.value_normalizer.moments.mean"]) for group in counts}
    assert means["runner"] != means["scout"]  # each lane's own returns


# ---------------------------------------------------------------- LayerNorm and critic-only keys
class PrivilegedEnv(gym.Env):
    """A hidden target in [-1, 1]: the actor sees it through noise ("obs"), the critic also exactly
    ("privileged"); reward ``-(action - target)^2``, 8 steps an episode."""

    observation_space = gym.spaces.Dict({"obs": gym.spaces.Box(-5.0, 5.0, (2,), np.float32),
                                         "privileged": gym.spaces.Box(-1.0, 1.0, (1,), np.float32)})
    action_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t, self.target = 0, float(self.np_random.uniform(-1, 1))
        return self._obs(), {}

    def _obs(self):
        noisy = self.target + self.np_random.normal(0, 0.5)
        return {"obs": np.array([noisy, self.t / 8], np.float32), "privileged": np.array([self.target], np.float32)}

    def step(self, action):
        self.t += 1
        reward = -float((action[0] - self.target) ** 2)
        return self._obs(), reward, False, self.t >= 8, {}


def test_layer_norm_and_critic_keys_train_and_export_without_the_critic_keys(tmp_path):
    run = tmp_path / "run"
    overrides = {"policy.layer_norm": True, "policy.critic_keys": ["privileged"], "env.normalize_obs": True,
                 "env.num_envs": 2, "ppo.num_steps": 16, "ppo.num_minibatches": 2, "ppo.update_epochs": 2,
                 "policy.hidden_sizes": [16], "run.total_timesteps": 96, "run.eval_episodes": 2, "run.loggers": []}
    result = train(env=PrivilegedEnv, overrides=overrides, run_dir=run, progress=False)
    assert finite_metrics(run) and np.isfinite(result.summary["eval_return_mean"])
    agent = result.policy.agent
    assert isinstance(agent.actor.net[1], torch.nn.LayerNorm) and isinstance(agent.critic[1], torch.nn.LayerNorm)
    assert list(agent.encoder.encoders) == ["obs"]  # the actor's encoder has no "privileged"
    assert list(agent.critic_encoder.encoders) == ["obs", "privileged"]
    # the deployed policy takes the actor's keys only (and ignores the others)
    policy = load_policy(run)
    env = PrivilegedEnv()
    obs, _ = env.reset(seed=3)
    action = policy({"obs": obs["obs"]})
    assert np.array_equal(action, policy(obs)) and action.shape == (1,)
    exported = export_policy(run, "onnx")
    assert exported.input_names == ["obs"] and exported.max_abs_diff < 1e-5
    import onnxruntime

    session = onnxruntime.InferenceSession(str(exported.path), providers=["CPUExecutionProvider"])
    assert [i.name for i in session.get_inputs()] == ["obs"]


def test_layer_norm_draws_no_random_numbers_of_its_own():
    torch.manual_seed(0)
    plain = ActorCritic(3, gym.spaces.Box(-1.0, 1.0, (2,)), PolicyConfig(hidden_sizes=[8, 8]))
    torch.manual_seed(0)
    normed = ActorCritic(3, gym.spaces.Box(-1.0, 1.0, (2,)), PolicyConfig(hidden_sizes=[8, 8], layer_norm=True))
    linear = [m.weight for m in plain.modules() if isinstance(m, torch.nn.Linear)]
    linear_normed = [m.weight for m in normed.modules() if isinstance(m, torch.nn.Linear)]
    assert all(torch.equal(a, b) for a, b in zip(linear, linear_normed, strict=True))
    assert sum(isinstance(m, torch.nn.LayerNorm) for m in normed.modules()) == 4


@pytest.mark.parametrize(("env", "keys", "message"), [
    ("Pendulum-v1", ["privileged"], "needs a Dict observation"),
    (PrivilegedEnv, ["secret"], "the observation has no key 'secret'; its keys are ['obs', 'privileged']"),
    (PrivilegedEnv, ["obs", "privileged"], "names every key of the observation"),
])
def test_critic_keys_that_do_not_fit_the_observation_are_one_line(tmp_path, env, keys, message):
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]")):
        train(env=env, overrides={"policy.critic_keys": keys, "run.loggers": []}, run_dir=tmp_path / "run",
              progress=False)


# ---------------------------------------------------------------- validation
@pytest.mark.parametrize(("values", "message"), [
    ({"ppo": {"rpo_alpha": -0.1}}, r"ppo.rpo_alpha = -0.1 is out of range"),
    ({"ppo": {"desired_kl": 0.0}}, r"ppo.desired_kl = 0.0 is out of range"),
    ({"ppo": {"desired_kl": 0.01, "anneal_lr": True}}, r"cannot be combined with ppo.anneal_lr"),
    ({"ppo": {"value_norm": "yes"}}, r"ppo.value_norm = 'yes' has the wrong type"),
    ({"policy": {"layer_norm": 1}}, r"policy.layer_norm = 1 has the wrong type"),
    ({"policy": {"critic_keys": []}}, r"policy.critic_keys = \[\]: needs a non-empty list"),
    ({"policy": {"critic_keys": ["a"], "share_encoder": True}}, r"leave policy.share_encoder out"),
])
def test_bad_refinement_settings_are_one_line(values, message):
    with pytest.raises(ConfigError, match=message):
        config_from_dict(values)


def test_a_bad_refinement_setting_exits_2_with_one_line(tmp_path):
    proc = run_main("--config", "pendulum", "--set", "ppo.rpo_alpha=-1", "--run-dir", str(tmp_path / "run"))
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1] == "error: ppo.rpo_alpha = -1.0 is out of range; allowed: [0.0, inf)"
    assert "Traceback" not in proc.stderr
