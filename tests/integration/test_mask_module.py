"""shell/envs/masks.py: the one resolver of the mask convention, the one mask checker and the one "trained with
masks, given none" check, and that the gymnasium backend, the pettingzoo backend, inference and evaluation all go
through them (the same bad mask gives the same one-line error from each)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium import spaces

import shell.evaluation
import shell.inference
from shell.config import PolicyConfig, load_config
from shell.envs import make_env, masks
from shell.errors import ConfigError, TrainingError
from shell.inference import Policy
from shell.policies import ActorCritic

from .mask_envs import make_masked_pick
from .multiagent_envs import Relay

BOX = spaces.Box(-1.0, 1.0, (3,), np.float32)
KEYED = spaces.Dict({"target": BOX, "action_mask": spaces.MultiBinary(3)})
PZ_REFUSALS = {"method": "is for gymnasium envs; a PettingZoo env gives masks in each agent's observation ('obs') "
                         "or info ('info')"}
GOOD = np.array([True, False, True])


# ----------------------------------------------------------------------------- the resolver
def vector(convention: str) -> gym.vector.VectorEnv:
    return gym.vector.SyncVectorEnv([lambda: make_masked_pick(convention)] * 2)


@pytest.mark.parametrize("space", [spaces.Discrete(3), spaces.MultiDiscrete([2, 3]), spaces.MultiBinary(4)])
def test_resolver_auto_takes_the_obs_key_then_the_method_then_waits_for_the_first_reset(space):
    method, plain = vector("method"), vector("info")
    try:
        assert masks.resolve_source("auto", space, KEYED, vector_env=method) == "obs"
        assert masks.resolve_source("auto", space, BOX, vector_env=method) == "method"
        assert masks.resolve_source("auto", space, BOX, vector_env=plain) == masks.PENDING_INFO
        assert masks.resolve_source("auto", space, BOX) == masks.PENDING_INFO  # a backend with no method
        # a refused convention is never taken by "auto", even where the env could give it
        assert masks.resolve_source("auto", space, BOX, vector_env=method, refused=PZ_REFUSALS) == masks.PENDING_INFO
        for setting in ("info", "obs", "method"):
            assert masks.resolve_source(setting, space, KEYED, vector_env=method) == setting
        assert masks.resolve_source("none", space, KEYED, vector_env=method) is None
    finally:
        method.close()
        plain.close()


def test_resolver_refuses_in_one_line_naming_the_setting():
    cases = [
        (dict(setting="info", action_space=BOX, observation_space=BOX), "action masks need a Discrete"),
        (dict(setting="obs", action_space=spaces.Discrete(3), observation_space=BOX),
         "env.action_mask = 'obs' needs a Dict observation with key 'action_mask'; the env's observation space is"),
        (dict(setting="obs", action_space=spaces.Discrete(3), observation_space=BOX,
              observation="each agent's observation space"), "; each agent's observation space is Box("),
        (dict(setting="method", action_space=spaces.Discrete(3), observation_space=BOX),
         "env.action_mask = 'method' needs an action_masks() method on the env; it has none"),
        (dict(setting="method", action_space=spaces.Discrete(3), observation_space=BOX, refused=PZ_REFUSALS),
         "env.action_mask = 'method' is for gymnasium envs"),
    ]
    for kwargs, needle in cases:
        kwargs = dict(kwargs)
        args = (kwargs.pop("setting"), kwargs.pop("action_space"), kwargs.pop("observation_space"))
        with pytest.raises(masks.MaskError) as info:
            masks.resolve_source(*args, **kwargs)
        assert needle in str(info.value) and "\n" not in str(info.value), str(info.value)
    assert masks.resolve_source("auto", BOX, KEYED) is None  # "auto" on an action space that takes no mask
    assert masks.resolve_source("none", BOX, KEYED) is None


def test_settle_source_decides_auto_at_the_first_reset_and_leaves_a_decided_source_alone():
    assert masks.settle_source(masks.PENDING_INFO, {"action_mask": GOOD, "x": 1}) == "info"
    for info in ({}, {"x": 1}, None):
        assert masks.settle_source(masks.PENDING_INFO, info) is None
    for source in ("info", "obs", "method", None):
        assert masks.settle_source(source, {}) == source


def test_both_backends_resolve_through_the_one_resolver_and_auto_decides_at_the_first_reset(monkeypatch):
    calls = []
    resolve = masks.resolve_source
    monkeypatch.setattr(masks, "resolve_source", lambda *a, **k: calls.append(k.get("refused")) or resolve(*a, **k))
    gym_env = make_env(load_config("cartpole").env, torch.device("cpu"), source=vector("info"))
    pz_env = make_env(pettingzoo_cfg(), torch.device("cpu"), source=lambda: Relay(mask="info"))
    try:
        assert calls == [None, PZ_REFUSALS]
        (pz_source,) = pz_env.mask_sources().values()
        assert gym_env.mask_source == pz_source == masks.PENDING_INFO
        gym_env.reset(seed=0)
        pz_env.reset(seed=0)
        (pz_source,) = pz_env.mask_sources().values()
        assert gym_env.mask_source == pz_source == "info"
    finally:
        gym_env.close()
        pz_env.close()
    with pytest.raises(ConfigError, match=r"env\.action_mask = 'method' is for gymnasium envs") as info:
        make_env(pettingzoo_cfg(action_mask="method"), torch.device("cpu"), source=lambda: Relay(mask="info"))
    assert "\n" not in str(info.value)


# ----------------------------------------------------------------------------- the checker
def test_checker_gives_n_a_bool_and_takes_integer_zeros_and_ones():
    raw = np.array([[1, 0, 1], [0, 1, 1]], dtype=np.int8)
    mask = masks.check_mask(raw, 2, spaces.Discrete(3))
    assert mask.dtype == bool and np.array_equal(mask, raw.astype(bool))
    assert np.array_equal(masks.check_mask(GOOD[None], 1, spaces.Discrete(3)), GOOD[None])
    # gymnasium stacks info values it cannot stack as an object array
    ragged = np.empty(2, dtype=object)
    ragged[0], ragged[1] = GOOD, GOOD
    assert np.array_equal(masks.check_mask(ragged, 2, spaces.Discrete(3)), [GOOD, GOOD])
    # MultiBinary: every mask is legal, an all-false one too
    assert not masks.check_mask(np.zeros((2, 4), bool), 2, spaces.MultiBinary(4)).any()


@pytest.mark.parametrize(("raw", "space", "needle"), [
    (np.ones((2, 4), bool), spaces.Discrete(3), "an action mask has shape [4] (batched [2, 4]); this action space "
                                                "needs [3] per sub-env"),
    (np.ones((2, 3), np.float32), spaces.Discrete(3),
     "an action mask must be bool (or integer 0/1), got dtype float32"),
    (np.full((2, 3), 2, np.int8), spaces.Discrete(3), "an action mask of dtype int8 holds values other than 0 and 1"),
    (np.ones((2, 3), bool), BOX, "takes no action mask"),
])
def test_checker_refuses_a_bad_mask_in_one_line(raw, space, needle):
    with pytest.raises(masks.MaskError) as info:
        masks.check_mask(raw, 2, space)
    assert needle in str(info.value) and "\n" not in str(info.value), str(info.value)
    assert not isinstance(info.value, masks.NoLegalAction)


def test_checker_names_the_row_with_no_legal_action_and_when():
    space = spaces.MultiDiscrete([2, 3])
    raw = np.array([[1, 0, 1, 1, 1], [1, 1, 0, 0, 0], [0, 0, 0, 0, 0]], dtype=bool)  # row 1: component 2 all false
    with pytest.raises(masks.NoLegalAction) as info:
        masks.check_mask(raw, 3, space, row="sub-env {}".format, where="at vector step 7")
    assert str(info.value) == ("sub-env 1 has no legal action at vector step 7 (its action mask leaves a component "
                               "all false); every state needs a legal action")
    with pytest.raises(masks.NoLegalAction, match=r"^row 1 has no legal action \(its action mask"):
        masks.check_mask(raw, 3, space)
    # rows whose action is ignored get an all-true mask first, on a copy
    ignored = np.array([False, True, True])
    mask = masks.check_mask(raw, 3, space, ignored=ignored)
    assert mask[1:].all() and np.array_equal(mask[0], raw[0]) and not raw[2].any()


def test_env_error_makes_a_reset_a_config_error_and_a_step_or_no_legal_action_a_training_error():
    bad = masks.MaskError("an action mask has shape [4]")
    assert type(masks.env_error(bad, "E", True, 0)) is ConfigError
    at_step = masks.env_error(bad, "E", False, 5)
    assert type(at_step) is TrainingError and str(at_step) == "env E: an action mask has shape [4] (at vector step 5)"
    none = masks.NoLegalAction("sub-env 0 has no legal action on reset")
    assert type(masks.env_error(none, "E", True, 0)) is TrainingError
    assert masks.moment(True, 3) == "on reset" and masks.moment(False, 3) == "at vector step 3"


# ----------------------------------------------------------------------------- the three callers
class FixedMaskEnv(gym.Env):
    """Box(3) observations, Discrete(3) actions; ``info["action_mask"]`` is ``GOOD`` until step ``bad_at``, then
    ``bad``."""

    observation_space = BOX
    action_space = spaces.Discrete(3)

    def __init__(self, bad, bad_at: int = 0):
        self.bad, self.bad_at, self.t = bad, bad_at, 0

    def _info(self) -> dict:
        return {"action_mask": self.bad if self.t >= self.bad_at else GOOD.copy()}

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(3, np.float32), self._info()

    def step(self, action):
        self.t += 1
        return np.zeros(3, np.float32), 0.0, False, False, self._info()


class FixedMaskRelay(Relay):
    """:class:`Relay` whose agents' info masks are ``GOOD`` until step ``bad_at``, then ``bad`` (the tests step once,
    with action 0, which Relay allows at step 0)."""

    def __init__(self, bad, bad_at: int = 0):
        super().__init__(mask="info")
        self.bad, self.bad_at = bad, bad_at

    def _legal(self):
        return self.bad if self.t >= self.bad_at else GOOD.copy()


def pettingzoo_cfg(**env):
    overrides = {"env.backend": "pettingzoo", "env.id": "tests.integration.multiagent_envs", "env.num_envs": 2,
                 **{f"env.{k}": v for k, v in env.items()}}
    return load_config(None, overrides).env


def gym_error(bad, bad_at: int = 0) -> Exception:
    env = make_env(load_config("cartpole").env, torch.device("cpu"),
                   source=gym.vector.SyncVectorEnv([lambda: FixedMaskEnv(bad, bad_at)] * 2))
    try:
        env.reset(seed=0)
        env.step(torch.zeros(2, dtype=torch.long))
    except (ConfigError, TrainingError) as exc:
        return exc
    finally:
        env.close()
    raise AssertionError("no error")


def pettingzoo_error(bad, bad_at: int = 0) -> Exception:
    env = make_env(pettingzoo_cfg(), torch.device("cpu"), source=lambda: FixedMaskRelay(bad, bad_at))
    try:
        env.reset(seed=0)
        env.step({g: torch.zeros(spec.num_envs, dtype=torch.long) for g, spec in env.lanes.items()})
    except (ConfigError, TrainingError) as exc:
        return exc
    finally:
        env.close()
    raise AssertionError("no error")


def policy_error(bad) -> ValueError:
    agent = ActorCritic(3, spaces.Discrete(3), PolicyConfig(hidden_sizes=[8]))
    agent.action_mask_source = "info"
    with pytest.raises(ValueError) as info:
        Policy(agent, BOX)(np.zeros(3, np.float32), action_mask=bad)
    return info.value


@pytest.mark.parametrize(("bad", "message"), [
    (np.array([1.0, 0.0, 1.0], np.float32), "an action mask must be bool (or integer 0/1), got dtype float32"),
    (np.array([2, 1, 1], np.int8), "an action mask of dtype int8 holds values other than 0 and 1"),
    (np.ones(4, bool), "an action mask has shape [4] (batched "),
])
def test_the_same_bad_mask_gives_the_same_one_line_error_from_both_backends_and_a_policy(bad, message):
    on_reset = [gym_error(bad), pettingzoo_error(bad)]
    assert [type(e) for e in on_reset] == [ConfigError, ConfigError]
    at_step = [gym_error(bad, bad_at=1), pettingzoo_error(bad, bad_at=1)]
    assert [type(e) for e in at_step] == [TrainingError, TrainingError]
    from_policy = policy_error(bad)
    for exc in [*on_reset, *at_step, from_policy]:
        assert message in str(exc) and "\n" not in str(exc), str(exc)
    for exc in at_step:
        assert str(exc).endswith("(at vector step 1)"), str(exc)
    assert str(from_policy).startswith(f"action_mask: {message}")


def test_no_legal_action_is_the_same_one_line_error_naming_the_row_from_both_backends_and_a_policy():
    bad = np.zeros(3, bool)
    tail = "has no legal action{} (its action mask leaves a component all false); every state needs a legal action"
    errors = {
        "gymnasium": (gym_error(bad), "sub-env 0 " + tail.format(" on reset")),
        "gymnasium step": (gym_error(bad, bad_at=1), "sub-env 0 " + tail.format(" at vector step 1")),
        "pettingzoo": (pettingzoo_error(bad), "agent 'runner_0' of copy 0 " + tail.format(" on reset")),
        "pettingzoo step": (pettingzoo_error(bad, bad_at=1), "agent 'runner_0' of copy 0 " +
                            tail.format(" at vector step 1")),
        "policy": (policy_error(bad), "action_mask: row 0 " + tail.format("")),
    }
    for where, (exc, expected) in errors.items():
        assert str(exc).endswith(expected) and "\n" not in str(exc), (where, str(exc))
        assert isinstance(exc, ValueError if where == "policy" else TrainingError), where


def test_every_caller_goes_through_the_one_checker(monkeypatch):
    calls = []
    check = masks.check_mask
    monkeypatch.setattr(masks, "check_mask", lambda raw, n, space, **k: calls.append(n) or check(raw, n, space, **k))
    gym_env = make_env(load_config("cartpole").env, torch.device("cpu"),
                       source=gym.vector.SyncVectorEnv([lambda: FixedMaskEnv(GOOD)] * 2))
    pz_env = make_env(pettingzoo_cfg(), torch.device("cpu"), source=lambda: FixedMaskRelay(GOOD))
    try:
        gym_env.reset(seed=0)
        assert calls == [2]  # one batched check of the 2 sub-envs
        pz_env.reset(seed=0)
        assert calls == [2] + [1] * 6  # one check per agent: 3 agents in 2 copies
    finally:
        gym_env.close()
        pz_env.close()
    # inference and evaluation import the module's functions themselves
    assert shell.inference.check_mask is check and shell.inference.require_mask is masks.require_mask
    assert shell.evaluation.require_mask is masks.require_mask


# ----------------------------------------------------------------------------- trained with masks, given none
def test_require_mask_is_the_one_check_for_inference_and_evaluation():
    agent = ActorCritic(4, spaces.Discrete(2), PolicyConfig(hidden_sizes=[8]))
    masks.require_mask(agent, None, "x")  # trained without masks: nothing to require
    agent.action_mask_source = "info"
    masks.require_mask(agent, np.ones(2, bool), "x")
    with pytest.raises(masks.MaskError) as info:
        masks.require_mask(agent, None, "this call", ": pass one")
    assert str(info.value) == ("the policy was trained with action masks (env.action_mask = 'info') but this call "
                               "gives none: pass one")
    stem = "the policy was trained with action masks (env.action_mask = 'info') but "
    with pytest.raises(ValueError) as from_policy:
        Policy(agent, spaces.Box(-5.0, 5.0, (4,), np.float32))(np.zeros(4, np.float32))
    assert str(from_policy.value).startswith(stem + "this call gives none: pass action_mask=")
    with pytest.raises(ConfigError) as from_eval:
        spec = shell.evaluation.EvalSpec(load_config("cartpole").env, 1, 0)
        shell.evaluation.evaluate(agent, spec, torch.device("cpu"))
    assert str(from_eval.value) == stem + "the evaluation env 'CartPole-v1' gives none"
    for exc in (from_policy.value, from_eval.value):
        assert "\n" not in str(exc)


# ----------------------------------------------------------------------------- near misses (issue 39)
NEAR_MISSES = [  # (env.kwargs of MaskedPick, the did-you-mean the one line holds)
    (dict(convention="info", mask_name="action_masks"),
     "info has 'action_masks', not 'action_mask': did you mean info['action_mask'] (env.action_mask = 'info')?"),
    (dict(convention="info", mask_name="legal_actions"),
     "info has 'legal_actions', not 'action_mask': did you mean info['action_mask'] (env.action_mask = 'info')?"),
    (dict(convention="obs", mask_name="action_masks"),
     "the observation has key 'action_masks', not 'action_mask': did you mean obs['action_mask'] "
     "(env.action_mask = 'obs')?"),
    (dict(convention="obs", mask_name="actionMask"),
     "the observation has key 'actionMask', not 'action_mask': did you mean obs['action_mask'] "
     "(env.action_mask = 'obs')?"),
    (dict(convention="method", mask_name="action_mask"),
     "the env has action_mask(), not action_masks(): did you mean action_masks() (env.action_mask = 'method')?"),
    (dict(convention="method", mask_name="valid_action_mask"),
     "the env has valid_action_mask(), not action_masks(): did you mean action_masks() (env.action_mask = 'method')?"),
]


@pytest.mark.parametrize("kwargs,needle", NEAR_MISSES)
def test_auto_refuses_a_near_miss_at_the_first_reset_in_one_line_with_a_did_you_mean(kwargs, needle):
    """A mask under a near-miss name used to train unmasked without a word; now the first reset is a ConfigError
    (exit 2) naming what was found, the expected name and the env.action_mask settings."""
    env = make_env(load_config("cartpole").env, torch.device("cpu"),
                   source=gym.vector.SyncVectorEnv([lambda: make_masked_pick(**kwargs)] * 2))
    try:
        with pytest.raises(ConfigError) as info:
            env.reset(seed=0)
    finally:
        env.close()
    line = str(info.value)
    assert needle in line and "env.action_mask = 'none' trains unmasked" in line and "\n" not in line, line
    assert line.startswith("env ") and len(line) <= 200, line


def test_a_name_that_is_only_like_a_mask_is_no_near_miss_unless_its_size_fits():
    """Another library's name ('mask', 'legal_actions') counts only where its size is the mask's; a name one edit
    from 'action_mask' counts whatever it holds; real observation keys are no near misses."""
    d3 = spaces.Discrete(3)
    assert masks.near_miss(d3, {"mask": np.ones((2, 5))}, None) is None  # a mask of another size: not ours
    assert "'mask'" in masks.near_miss(d3, {"mask": np.ones((2, 3), bool), "_mask": np.ones(2, bool)}, None)
    assert "'action_maks'" in masks.near_miss(d3, {"action_maks": np.ones((2, 7))}, None)  # a typo, any size
    keyed = spaces.Dict({"observation": BOX, "action": spaces.Discrete(3), "attention_mask": spaces.MultiBinary(4)})
    assert masks.near_miss(d3, {"episode": {}, "_episode": np.ones(2, bool)}, keyed) is None
    assert masks.near_miss(BOX, {"action_masks": np.ones((2, 3))}, None) is None  # Box actions take no mask
    # the explicit conventions name the near miss too
    with pytest.raises(masks.MaskError, match=r"\(it has 'action_masks': did you mean 'action_mask'\?\)"):
        masks.resolve_source("obs", d3, spaces.Dict({"x": BOX, "action_masks": spaces.MultiBinary(3)}))
    with pytest.raises(masks.MaskError, match=r"\(it has 'action_masks': did you mean 'action_mask'\?\)"):
        masks.read_mask("info", None, {"action_masks": np.ones((2, 3))}, action_space=d3)
    named = gym.vector.SyncVectorEnv([lambda: make_masked_pick("method", mask_name="action_mask")] * 2)
    try:
        with pytest.raises(masks.MaskError, match=r"\(it has action_mask\(\): did you mean action_masks\(\)\?\)"):
            masks.resolve_source("method", d3, BOX, vector_env=named)
    finally:
        named.close()


class NearMissRelay(Relay):
    """:class:`Relay` whose agents give their masks as ``info["action_masks"]`` (a near miss)."""

    def __init__(self):
        super().__init__(mask="info")

    def _info(self) -> dict:
        return {agent: {"action_masks": info["action_mask"]} for agent, info in super()._info().items()}


def test_the_pettingzoo_backend_refuses_the_same_near_miss():
    env = make_env(pettingzoo_cfg(), torch.device("cpu"), source=NearMissRelay)
    try:
        with pytest.raises(ConfigError) as info:
            env.reset(seed=0)
    finally:
        env.close()
    assert NEAR_MISSES[0][1] in str(info.value)


def test_the_start_up_line_says_which_convention_was_found_or_that_none_was():
    d3 = spaces.Discrete(3)
    assert masks.announce("auto", {None: "info"}, {None: d3}) == \
        "action masks: info['action_mask'] (env.action_mask = 'auto')"
    assert masks.announce("auto", {None: None}, {None: d3}) == (
        "action masks: none found (no obs['action_mask'], action_masks() or info['action_mask']), training "
        "unmasked (env.action_mask = 'auto')")
    assert masks.announce("method", {"a": "method", "b": None}, {"a": d3, "b": d3}) == (
        "action masks: group 'a': action_masks(); group 'b': none found (no obs['action_mask'], action_masks() or "
        "info['action_mask']), training unmasked (env.action_mask = 'method')")
    assert masks.announce("auto", {None: None}, {None: BOX}) is None  # Box actions: nothing to say
    assert masks.announce("none", {None: None}, {None: d3}) is None
