"""Composite (Dict and Tuple) actions and parameterised actions (shell/policies/composite.py): the joint log-prob
against torch.distributions, the zero gradient of a parameter not taken, masks, the env's structure and dtypes,
checkpoints and load_policy, and the one-line refusals."""

import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium import spaces
from torch.distributions import Bernoulli, Categorical, Normal

import core
import shell
import tests.integration.hybrid_envs as hybrid
from shell.actions import action_parts, to_env_action
from shell.api import load_policy, train
from shell.checkpoint import space_from_data, space_to_data
from shell.config import PolicyConfig, config_from_dict
from shell.envs import check_action_space
from shell.errors import ConfigError
from shell.policies.composite import CompositeActor
from shell.policies.heads import CategoricalActor, SquashedGaussianActor

LINKS = {"kind": {"0": ["p0"], "1": ["p1"], "2": ["p2"]}}
HYBRID = hybrid.HybridTargetEnv.action_space
NESTED = hybrid.NestedCompositeEnv.action_space


def actor(space, links=None, seed=0):
    torch.manual_seed(seed)
    return CompositeActor(5, space, PolicyConfig(hidden_sizes=[16]), links)


def reference_log_probs(model, features, raw):
    """Each part's log-prob ``[B]`` from torch.distributions: Normal with the tanh change of variables, Categorical,
    Bernoulli."""
    out = []
    for head, column in zip(model.heads, model.split_raw(raw), strict=True):
        if isinstance(head, SquashedGaussianActor):
            mean, std = head.distribution(features)
            u = column.double()
            jacobian = torch.log(head.action_scale.double() * (1 - torch.tanh(u) ** 2))
            out.append((Normal(mean.double(), std.double()).log_prob(u) - jacobian).sum(-1))
        elif isinstance(head, CategoricalActor):
            logits = head._logits(features)
            out.append(sum(Categorical(logits=lg.double()).log_prob(c) for lg, c in
                           zip(logits, column.long().unbind(-1), strict=True)))
        else:
            out.append(Bernoulli(logits=head.net(features).double()).log_prob(column.double()).sum(-1))
    return torch.stack(out, dim=-1)


@pytest.mark.parametrize("space", [NESTED, HYBRID])
def test_the_joint_log_prob_is_the_sum_of_the_parts_torch_distributions_log_probs(space):
    model = actor(space)
    features = torch.randn(64, 5)
    action, raw, log_prob = model.sample(features)
    expected = reference_log_probs(model, features, raw).sum(-1)
    torch.testing.assert_close(log_prob.double(), expected, rtol=1e-5, atol=1e-4)
    torch.testing.assert_close(model.log_prob(features, raw), log_prob)
    torch.testing.assert_close(model.evaluate(features, raw)[0], log_prob)
    assert action.shape == (64, sum(p.width for p in action_parts(space)))


def test_a_linked_parameter_counts_only_where_its_kind_is_taken():
    model = actor(HYBRID, LINKS)
    features = torch.randn(256, 5)
    _, raw, log_prob = model.sample(features)
    parts = reference_log_probs(model, features, raw)  # columns: kind, p0, p1, p2
    kind = raw[:, 0].long()
    assert set(kind.tolist()) == {0, 1, 2}
    expected = parts[:, 0] + parts[:, 1:].gather(1, kind[:, None]).squeeze(1)
    torch.testing.assert_close(log_prob.double(), expected, rtol=1e-5, atol=1e-4)
    torch.testing.assert_close(model.evaluate(features, raw)[0], log_prob)


@pytest.mark.parametrize("links", [LINKS, None])
def test_a_parameter_of_a_kind_not_taken_gets_exactly_zero_gradient(links):
    """Every row takes kind 0: the policy loss (clip loss and entropy bonus) gives p1 and p2's heads exactly zero
    gradient when linked; unlinked (every parameter in the ratio), they get one."""
    model = actor(HYBRID, links)
    features = torch.randn(128, 5)
    with torch.no_grad():
        _, raw, old = model.sample(features)
    raw[:, 0] = 0.0
    with torch.no_grad():
        old = model.log_prob(features, raw) - 0.05 * torch.randn(128)
    log_prob, entropy = model.evaluate(features, raw, torch.Generator().manual_seed(1))
    loss = core.clip_loss(log_prob, old, torch.randn(128), 0.2) - 0.01 * entropy.mean()
    loss.backward()
    names = [p.name for p in model.parts]
    for name, head in zip(names, model.heads, strict=True):
        grads = [p.grad for p in head.parameters()]
        zero = all(g is None or not g.any() for g in grads)
        assert zero == (links is not None and name in ("p1", "p2")), name


def test_the_weighted_entropy_sums_each_part_times_its_weight():
    model = actor(HYBRID, LINKS)
    features = torch.randn(32, 5)
    _, raw, _ = model.sample(features)
    raw[:, 0] = torch.arange(32) % 3
    _, entropy = model.evaluate(features, raw, torch.Generator().manual_seed(3))
    generator = torch.Generator().manual_seed(3)
    parts = []
    for head, column in zip(model.heads, model.split_raw(raw), strict=True):
        parts.append(head.evaluate(features, model._head_raw(head, column), generator)[1])
    kind = raw[:, 0].long()
    expected = parts[0] / np.log(3) + torch.stack(parts[1:], -1).gather(1, kind[:, None]).squeeze(1) / 1.0
    torch.testing.assert_close(entropy, expected)


def test_draws_made_beforehand_give_the_evaluation_bit_for_bit():
    """``run.compile`` draws a Box head's noise outside its graph: the composite's draws, part by part."""
    model = actor(NESTED)
    features = torch.randn(16, 5)
    _, raw, _ = model.sample(features)
    direct = model.evaluate(features, raw, torch.Generator().manual_seed(5))
    draws = model.draws(16, torch.Generator().manual_seed(5))
    assert [d is None for d in draws] == [not isinstance(h, SquashedGaussianActor) for h in model.heads]
    for a, b in zip(direct, model.evaluate(features, raw, None, draws=draws), strict=True):
        assert torch.equal(a, b)


def test_masks_on_the_discrete_part_are_never_violated():
    model = actor(HYBRID, LINKS)
    features = torch.randn(3000, 5) * 3
    mask = torch.rand(3000, 3) < 0.5
    mask[torch.arange(3000), torch.randint(0, 3, (3000,))] = True
    for deterministic in (False, True):
        _, raw, log_prob = model.sample(features, deterministic, action_mask=mask)
        kind = raw[:, 0].long()
        assert mask[torch.arange(3000), kind].all()
        assert torch.isfinite(log_prob).all()
    log_prob, entropy = model.evaluate(features, raw, action_mask=mask)
    assert torch.isfinite(log_prob).all() and torch.isfinite(entropy).all()


def test_training_with_masks_never_sends_a_masked_kind(tmp_path):
    """HybridTargetMasked-v0 raises on a masked kind: training, evaluation and load_policy with masks."""
    cfg = config_from_dict({"env": {"id": "tests.integration.hybrid_envs:HybridTargetMasked-v0", "num_envs": 4},
                            "policy": {"action_links": LINKS},
                            "ppo": {"num_steps": 32, "num_minibatches": 2, "update_epochs": 2},
                            "run": {"total_timesteps": 512, "eval_episodes": 4}})
    result = train(config=cfg, run_dir=tmp_path / "run", progress=False)
    assert result.summary["eval_episodes"] == 4
    policy = load_policy(tmp_path / "run")
    mask = np.array([[False, True, True], [True, False, True]])
    rng = np.random.default_rng(0)
    for _ in range(20):
        action = policy.act(rng.uniform(-1, 1, (2, 4)).astype(np.float32), deterministic=False,
                            action_mask=mask)
        assert mask[np.arange(2), action["kind"]].all()


def test_the_env_receives_every_part_in_its_structure_and_dtype(tmp_path):
    """NestedComposite-v0 (a Tuple of a Discrete with a start, a Dict of MultiDiscrete and a float64 matrix Box, and
    MultiBinary bits) raises on any action not in its structure, bounds and dtypes; load_policy gives the same
    structure, and resuming goes on from the checkpoint."""
    cfg = config_from_dict({"env": {"id": "tests.integration.hybrid_envs:NestedComposite-v0", "num_envs": 3},
                            "ppo": {"num_steps": 16, "num_minibatches": 2, "update_epochs": 1},
                            "run": {"total_timesteps": 96, "eval_episodes": 2}})
    train(config=cfg, run_dir=tmp_path / "run", progress=False)
    policy = load_policy(tmp_path / "run")
    one = policy.act(np.zeros(3, np.float32))
    hybrid.check_action(NESTED, one)
    batch = policy.act(np.zeros((5, 3), np.float32), deterministic=False)
    assert isinstance(batch, tuple) and batch[0].shape == (5,) and batch[1]["box"].shape == (5, 2, 2)
    for i in range(5):
        hybrid.check_action(NESTED, (batch[0][i], {k: v[i] for k, v in batch[1].items()}, batch[2][i]))
    resumed = shell.resume(tmp_path / "run", 192, progress=False)
    assert resumed.summary["env_steps"] == 192


def test_to_env_action_rebuilds_the_structure():
    # Discrete, box(4), md(2), bits(3): a Dict's keys in gymnasium's sorted order
    action = torch.tensor([[2.0, 0.5, -0.5, 0.25, 0.0, 1.0, 0.0, 1.0, 0.0, 1.0]])
    out = to_env_action(action, NESTED)
    assert out[0].tolist() == [2] and out[0].dtype == np.int32
    assert out[1]["md"].tolist() == [[1, 0]] and out[1]["box"].dtype == np.float64
    assert out[1]["box"].tolist() == [[[0.2, -0.5], [0.2, 0.0]]]  # clipped to the Box's high of 0.2
    assert out[2].tolist() == [[1, 0, 1]] and out[2].dtype == np.int8


def test_a_checkpoint_stores_tuple_and_dict_action_spaces():
    for space in (NESTED, HYBRID):
        back = space_from_data(space_to_data(space))
        assert back == space and [p.name for p in action_parts(back)] == [p.name for p in action_parts(space)]


@pytest.mark.parametrize(("space", "links", "needle"), [
    (spaces.Dict({"a": spaces.Discrete(2), "t": spaces.Text(4)}), None,
     "its part 't' is a Text, not a Box, Discrete, MultiDiscrete, MultiBinary, Dict or Tuple"),
    (spaces.Tuple(()), None, "an empty Tuple has no action to learn"),
    (spaces.Dict({"a": spaces.Discrete(2), "b": spaces.Box(-np.inf, 1.0, (1,))}), None,
     "(action part 'b')"),
    (HYBRID, {"kinds": {"0": ["p0"]}}, "policy.action_links.kinds: the action space"),
    (HYBRID, {"kind": {"0": ["q"]}}, "policy.action_links.kind.0: the action space has no part 'q'"),
    (HYBRID, {"p0": {"0": ["p1"]}}, "a link goes from a Discrete part; 'p0' is Box"),
    (HYBRID, {"kind": {"3": ["p1"]}}, "choice '3' is not one of the choices 0..2 of 'kind'"),
    (HYBRID, {"kind": {"0": ["p1"]}, "p1": {}}, "policy.action_links.p1 = {}: needs a table of choice"),
    (HYBRID, {"kind": {"x": ["p1"]}}, "choice 'x' is not one of"),
    (HYBRID, {"kind": {"0": ["kind"]}}, "a part cannot select itself"),
    (spaces.Discrete(3), {"kind": {"0": ["p0"]}}, "policy.action_links needs a Dict or Tuple action space"),
])
def test_each_unsupported_composite_or_link_is_refused_in_one_line(space, links, needle):
    from shell.policies import ActorCritic

    with pytest.raises(ConfigError) as info:
        check_action_space(space)
        ActorCritic(4, space, PolicyConfig(action_links=links or {}))
    message = str(info.value)
    assert needle in message and "\n" not in message and len(message) <= 200, message


def test_the_cli_refuses_a_bad_link_in_one_line_with_exit_2(tmp_path):
    proc = subprocess.run(
        [sys.executable, "main.py", "--config", "configs/platform.toml", "--set", "run.total_timesteps=64",
         "--set", 'policy.action_links={kind = {0 = ["walk"]}}', "--run-dir", str(tmp_path / "run")],
        capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert lines[-1].startswith("error: policy.action_links.kind.0: the action space has no part 'walk'"), lines
    assert "Traceback" not in proc.stderr


CHAIN = spaces.Dict({"a": spaces.Discrete(2), "b": spaces.Discrete(2, start=5), "p": spaces.Box(-1, 1, (1,)),
                     "q": spaces.Dict({"x": spaces.Box(-1, 1, (1,)), "y": spaces.Discrete(3)})})


def test_chained_links_count_a_part_only_where_every_choice_above_it_had_an_effect():
    """a: 0 selects b, 1 selects q (a Dict: both its parts); b: 0 selects p. Where a = 1, b had no effect, so
    neither has p. Keys, choices and targets given as ints are read as names; the order of the links is free."""
    model = actor(CHAIN, {"b": {0: ["p"]}, "a": {0: ["b"], "1": ["q"]}})
    assert [p.name for p in model.parts] == ["a", "b", "p", "q.x", "q.y"]
    raw = torch.tensor([[0.0, 0, 0, 0, 0], [0, 1, 0, 0, 0], [1, 0, 0, 0, 0], [1, 1, 0, 0, 0]])
    assert model._active(model.split_raw(raw)).int().tolist() == [
        [1, 1, 1, 0, 0], [1, 1, 0, 0, 0], [1, 0, 0, 1, 1], [1, 0, 0, 1, 1]]
    features = torch.randn(4, 5)
    parts = reference_log_probs(model, features, raw)
    active = model._active(model.split_raw(raw)).double()
    torch.testing.assert_close(model.log_prob(features, raw).double(), (parts * active).sum(-1), rtol=1e-5,
                               atol=1e-4)


def test_links_that_form_a_cycle_are_refused_in_one_line():
    with pytest.raises(ConfigError, match=r"^policy.action_links: the links of 'a', 'b' form a cycle"):
        actor(CHAIN, {"a": {"0": ["b"]}, "b": {"0": ["a"]}})


def test_policy_config_refuses_links_of_the_wrong_shape():
    with pytest.raises(ConfigError, match="needs a table of choice"):
        PolicyConfig(action_links={"kind": ["p0"]})
    with pytest.raises(ConfigError, match="needs a non-empty list of part names"):
        PolicyConfig(action_links={"kind": {"0": "p0"}})


def test_hybrid_target_is_learned_with_links(tmp_path):
    """The parameterised env of the bar's kind, through cartpole.toml with env.id swapped and the link set: the right
    kind and a parameter near its target (a return near the maximum of 8)."""
    proc = subprocess.run(
        [sys.executable, "main.py", "--config", "configs/cartpole.toml", "--set",
         "env.id=tests.integration.hybrid_envs:HybridTarget-v0", "--set",
         'policy.action_links={kind = {0 = ["p0"], 1 = ["p1"], 2 = ["p2"]}}', "--run-dir", str(tmp_path / "run")],
        capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    import json

    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert summary["eval_return_mean"] > 7.0, summary
    assert gym.spaces.Discrete(3).contains(load_policy(tmp_path / "run").act(np.eye(4, dtype=np.float32)[0])["kind"])


@pytest.mark.parametrize(("env_id", "policy_cfg", "fmt"), [
    ("NestedComposite-v0", {}, "onnx"),
    ("HybridTargetMasked-v0", {"action_links": LINKS}, "pt2"),
    ("HybridTargetMasked-v0", {"action_links": LINKS, "recurrent": "gru", "rnn_hidden_size": 8}, "onnx"),
])
def test_the_exported_file_equals_load_policy_on_64_observations(tmp_path, env_id, policy_cfg, fmt):
    """One output per part, named after it; the metadata's paths rebuild the structure, which equals load_policy's
    action on 64 observations (with masks for the masked env; a recurrent policy's state fed back)."""
    import json

    from shell.export import METADATA_KEY, export_policy, load_exported

    cfg = config_from_dict({"env": {"id": f"tests.integration.hybrid_envs:{env_id}", "num_envs": 2},
                            "policy": {"hidden_sizes": [16], **policy_cfg},
                            "ppo": {"num_steps": 16, "num_minibatches": 2, "update_epochs": 1},
                            "run": {"total_timesteps": 64, "eval_episodes": 1}})
    train(config=cfg, run_dir=tmp_path / "run", progress=False)
    result = export_policy(tmp_path / "run", fmt, out=tmp_path / f"policy.{fmt}")
    policy = load_policy(tmp_path / "run")
    space = policy.action_space
    if fmt == "onnx":
        import onnx

        props = {p.key: p.value for p in onnx.load(str(result.path)).metadata_props}
        outputs = json.loads(props[METADATA_KEY])["output"]["outputs"]
        assert [o["name"] for o in outputs] == [f"action.{p.name}" for p in action_parts(space)]
    run = load_exported(result.path, fmt)
    rng = np.random.default_rng(1)
    obs = rng.uniform(-1, 1, (64, policy.agent.observation_space.shape[0])).astype(np.float32)
    masked = "Masked" in env_id
    masks = rng.random((64, 3)) < 0.6
    masks[np.arange(64), rng.integers(0, 3, 64)] = True
    inputs = [obs, *([masks] if masked else [])]
    recurrent = "recurrent" in policy_cfg
    state = np.zeros((64, policy.agent.initial_state(1).shape[1]), np.float32) if recurrent else None
    for step in range(3 if recurrent else 1):
        start = np.full(64, step == 0)
        expected = policy.act(obs, episode_start=start if recurrent else None,
                              action_mask=masks if masked else None)
        got = run(*inputs, *([state, start] if recurrent else []))
        inputs[0] = obs = np.roll(obs, 1, axis=0)
        if recurrent:
            *got, state = got
        rebuilt = rebuild(space, {tuple(part.path): value for part, value in zip(action_parts(space), got,
                                                                                   strict=True)})
        for leaf_got, leaf_expected in zip(nested_leaves(rebuilt), nested_leaves(expected), strict=True):
            assert leaf_got.dtype == leaf_expected.dtype and leaf_got.shape == leaf_expected.shape
            np.testing.assert_allclose(leaf_got, leaf_expected, atol=1e-5)
        if masked:
            assert masks[np.arange(64), np.asarray(got[0])].all()


def nested_leaves(action):
    """The arrays of a nested dict/tuple action, depth first in key order."""
    if isinstance(action, dict):
        return [leaf for key in sorted(action) for leaf in nested_leaves(action[key])]
    if isinstance(action, tuple | list):
        return [leaf for part in action for leaf in nested_leaves(part)]
    return [np.asarray(action)]


def rebuild(space, values, path=()):
    """The structure of ``space`` from its parts' arrays keyed by path (the exported metadata's ``path``)."""
    if isinstance(space, spaces.Dict):
        return {key: rebuild(sub, values, (*path, key)) for key, sub in space.spaces.items()}
    if isinstance(space, spaces.Tuple):
        return tuple(rebuild(sub, values, (*path, i)) for i, sub in enumerate(space.spaces))
    return values[path]


def test_the_mlflow_pyfunc_model_returns_the_structured_action(tmp_path):
    """``predict({"obs": obs, "action_mask": mask})`` of a masked parameterised policy: load_policy's dict action."""
    pytest.importorskip("mlflow")
    import mlflow.pyfunc

    from shell.tracking.mlflow_tracker import save_policy_model

    cfg = config_from_dict({"env": {"id": "tests.integration.hybrid_envs:HybridTargetMasked-v0", "num_envs": 2},
                            "policy": {"hidden_sizes": [16], "action_links": LINKS},
                            "ppo": {"num_steps": 16, "num_minibatches": 2, "update_epochs": 1},
                            "run": {"total_timesteps": 64, "eval_episodes": 1}})
    result = train(config=cfg, run_dir=tmp_path / "run", progress=False)
    save_policy_model(result.run_dir / "checkpoints" / "ckpt_000000000064.pt", tmp_path / "model")
    model = mlflow.pyfunc.load_model(str(tmp_path / "model"))
    rng = np.random.default_rng(2)
    obs = rng.uniform(-1, 1, (16, 4)).astype(np.float32)
    masks = np.eye(3, dtype=bool)[rng.integers(0, 3, 16)]
    got = model.predict({"obs": obs, "action_mask": masks})
    expected = load_policy(tmp_path / "run").act(obs, action_mask=masks)
    assert list(got) == list(expected) == ["kind", "p0", "p1", "p2"]
    for key in expected:
        np.testing.assert_array_equal(got[key], expected[key])
    assert (got["kind"] == masks.argmax(1)).all()


def test_agents_of_a_pettingzoo_env_act_in_composite_spaces(tmp_path):
    """Two agents with Dict actions and masks in their infos (the env raises on a masked kind or a wrong
    structure): one shared policy trains, evaluates and acts through load_policy."""
    cfg = config_from_dict({"env": {"id": "tests.integration.hybrid_envs", "backend": "pettingzoo", "num_envs": 2},
                            "policy": {"hidden_sizes": [16], "action_links": LINKS},
                            "ppo": {"num_steps": 16, "num_minibatches": 2, "update_epochs": 1},
                            "run": {"total_timesteps": 128, "eval_episodes": 2}})
    result = train(config=cfg, run_dir=tmp_path / "run", progress=False)
    assert result.summary["env_steps"] == 128
    obs = {"a": np.zeros(4, np.float32), "b": np.ones(4, np.float32)}
    actions = load_policy(tmp_path / "run").act(obs, action_mask={"a": np.array([0, 0, 1], bool),
                                                                  "b": np.array([1, 0, 0], bool)})
    assert int(actions["a"]["kind"]) == 2 and int(actions["b"]["kind"]) == 0 and actions["a"]["p2"].shape == (1,)
