"""Hypothesis strategies of the fuzzer: env specs (tests/fuzz/fuzz_envs.py), multi-agent specs
(tests/fuzz/fuzz_agents.py), and configs, valid and broken.

Each strategy draws plain JSON-able data, so a case prints as it is and a subprocess rebuilds it from
``env.kwargs``. :func:`refusals` says which parts of a spec the library documents as unsupported (exit 2).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from hypothesis import strategies as st

INF = math.inf
FLOAT32_MAX = float(np.finfo(np.float32).max)

# ----------------------------------------------------------------------------- spaces
BOUNDS = {  # (low, high) of a Box, per kind
    "unit": (-1.0, 1.0),
    "infinite": (-INF, INF),
    "half_infinite": (0.0, INF),
    "huge": (-1e30, 1e30),
    "beyond_float32": (-1e39, 1e39),
    "tiny": (0.0, 1e-6),
    "lopsided": (-1000.0, 0.2),
    "offset": (1e6, 1e6 + 1.0),
    "fixed": (0.5, 0.5),
}
FLOAT_DTYPES = ["float32", "float64", "float16"]
INT_DTYPES = ["uint8", "int8", "int32", "int64"]


def _bounds(kinds: list[str]) -> st.SearchStrategy[tuple[Any, Any]]:
    return st.sampled_from(kinds).map(lambda k: BOUNDS[k])


@st.composite
def box_spec(draw: st.DrawFn, *, action: bool = False) -> dict[str, Any]:
    rank = draw(st.sampled_from([1, 1, 1, 0, 2, 3]) if not action else st.sampled_from([1, 1, 2]))
    shape = draw(st.lists(st.integers(1, 3), min_size=rank, max_size=rank))
    kinds = list(BOUNDS) if not action else ["unit", "unit", "unit", "unit", "lopsided", "tiny", "huge", "infinite",
                                              "half_infinite", "offset", "beyond_float32", "fixed"]
    dtype = draw(st.sampled_from(["float32"] * 3 + FLOAT_DTYPES + INT_DTYPES + ["bool"]))
    if draw(st.booleans()) and shape and np.prod(shape) <= 6:  # bounds per component, of several kinds
        size = int(np.prod(shape))
        pairs = draw(st.lists(_bounds(kinds), min_size=size, max_size=size))
        low = np.reshape([p[0] for p in pairs], shape).tolist()
        high = np.reshape([p[1] for p in pairs], shape).tolist()
    else:
        low, high = draw(_bounds(kinds))
    if dtype in INT_DTYPES:  # integer spaces: finite bounds the dtype holds
        info = np.iinfo(dtype)
        low = np.clip(np.nan_to_num(np.asarray(low, np.float64), posinf=info.max, neginf=info.min),
                      info.min, info.max).round().tolist()
        high = np.clip(np.nan_to_num(np.asarray(high, np.float64), posinf=info.max, neginf=info.min),
                       info.min, info.max).round().tolist()
        high = np.maximum(np.asarray(high), np.asarray(low)).tolist()
    return {"type": "box", "shape": shape, "dtype": dtype, "low": low, "high": high}


def image_spec() -> st.SearchStrategy[dict[str, Any]]:
    side = st.integers(4, 10)
    channels = st.integers(1, 4)
    last = st.tuples(side, side, channels).map(list)
    first = st.tuples(channels, side, side).map(list)
    return st.one_of(last, first).map(lambda shape: {"type": "box", "shape": shape, "dtype": "uint8",
                                                     "low": 0, "high": 255})


def discrete_spec(min_n: int = 1) -> st.SearchStrategy[dict[str, Any]]:
    return st.builds(lambda n, start: {"type": "discrete", "n": n, "start": start},
                     st.integers(min_n, 6), st.sampled_from([0, 0, -3, 1, 5]))


def multidiscrete_spec() -> st.SearchStrategy[dict[str, Any]]:
    def build(nvec: list[int], shifted: bool) -> dict[str, Any]:
        return {"type": "multidiscrete", "nvec": nvec, "start": [(-1) ** i * i for i in range(len(nvec))]
                if shifted else [0] * len(nvec)}

    return st.builds(build, st.lists(st.integers(1, 4), min_size=1, max_size=3), st.booleans())


def multibinary_spec(action: bool = False) -> st.SearchStrategy[dict[str, Any]]:
    n = st.integers(1, 4) if action else st.one_of(st.integers(1, 4), st.just([2, 3]))
    return n.map(lambda n: {"type": "multibinary", "n": n})


def leaf_obs_spec(refused: bool = True) -> st.SearchStrategy[dict[str, Any]]:
    """A space of one part; MultiDiscrete (refused) now and then."""
    supported = st.one_of(box_spec(), box_spec(), box_spec(), discrete_spec(), multibinary_spec(), image_spec())
    return st.one_of(*[supported] * 5, multidiscrete_spec()) if refused else supported


def obs_spec() -> st.SearchStrategy[dict[str, Any]]:
    """Observation spaces: leaves, and Dict and Tuple nests of them (two levels at most)."""
    def nest(children: st.SearchStrategy) -> st.SearchStrategy:
        keys = st.sampled_from(["a", "b", "pos", "image", "x_1"])
        as_dict = st.dictionaries(keys, children, min_size=1, max_size=3).map(
            lambda d: {"type": "dict", "spaces": d})
        as_tuple = st.lists(children, min_size=1, max_size=3).map(lambda s: {"type": "tuple", "spaces": s})
        return st.one_of(as_dict, as_dict, as_tuple)

    leaf = leaf_obs_spec()
    supported = st.dictionaries(st.sampled_from(["a", "b", "pos", "image", "x_1"]), leaf_obs_spec(refused=False),
                                min_size=1, max_size=3).map(lambda d: {"type": "dict", "spaces": d})
    return st.one_of(*[leaf] * 6, *[supported] * 3, nest(leaf), nest(st.one_of(leaf, nest(leaf))))


def leaf_action_spec() -> st.SearchStrategy[dict[str, Any]]:
    return st.one_of(box_spec(action=True), discrete_spec(), discrete_spec(min_n=2), multidiscrete_spec(),
                     multibinary_spec(action=True))


def composite_action_spec() -> st.SearchStrategy[dict[str, Any]]:
    """A Dict or Tuple of 0-3 action parts (an empty one is refused), now and then one nested in another."""
    def nest(children: st.SearchStrategy) -> st.SearchStrategy:
        keys = st.sampled_from(["kind", "run", "hop", "a", "b_1"])
        as_dict = st.dictionaries(keys, children, min_size=0, max_size=3).map(lambda d: {"type": "dict", "spaces": d})
        as_tuple = st.lists(children, min_size=0, max_size=3).map(lambda s: {"type": "tuple", "spaces": s})
        return st.one_of(as_dict, as_dict, as_tuple)

    # mostly parts the library serves: one refused part refuses the whole, and the served ones must train
    leaf = st.one_of(leaf_action_spec(), *[leaf_action_spec().filter(lambda s: not action_refusals(s))] * 3)
    return st.one_of(nest(leaf), nest(leaf), nest(st.one_of(leaf, nest(leaf))))


def action_spec() -> st.SearchStrategy[dict[str, Any]]:
    return st.one_of(*[leaf_action_spec()] * 5, composite_action_spec())


# ----------------------------------------------------------------------------- what the library refuses
def obs_refusals(spec: dict[str, Any], nested: bool = False) -> list[str]:
    """Why an observation space is documented as unsupported (shell/observations.py): Tuple, MultiDiscrete,
    a nested or empty Dict."""
    kind = spec["type"]
    if kind == "tuple":
        return ["Tuple observation"]
    if kind == "multidiscrete":
        return ["MultiDiscrete observation"]
    if kind == "box" and len(spec["shape"]) == 3 and sorted(spec["shape"])[1] >= 4:  # an image (shell/observations.py)
        shape = spec["shape"]
        last = shape[-1] <= 4 and not shape[0] <= 4  # the layout policy.image_channels_first = absent detects
        height, width = shape[:2] if last else shape[1:]
        if min(height, width) < 4:
            return ["an image read in the other layout (policy.image_channels_first)"]
    if kind == "dict":
        if nested:
            return ["nested Dict observation"]
        return [r for sub in spec["spaces"].values() for r in obs_refusals(sub, nested=True)]
    return []


def action_refusals(spec: dict[str, Any]) -> list[str]:
    """Why an action space is documented as unsupported (shell/envs/base.py, shell/actions.py)."""
    kind = spec["type"]
    if kind in ("dict", "tuple"):
        parts = list(spec["spaces"].values()) if kind == "dict" else spec["spaces"]
        return [r for part in parts for r in action_refusals(part)] if parts else [f"empty {kind} action"]
    if kind == "discrete":
        return ["Discrete(1)"] if spec["n"] < 2 else []
    if kind == "multidiscrete":
        return [] if max(spec["nvec"]) >= 2 else ["MultiDiscrete without a choice"]
    if kind == "multibinary":
        return []
    if spec["dtype"] == "bool":
        return ["bool Box action"]
    shape = spec["shape"]
    low = np.broadcast_to(np.asarray(spec["low"], np.float64), shape)
    high = np.broadcast_to(np.asarray(spec["high"], np.float64), shape)
    dtype = np.dtype(spec["dtype"])
    low, high = low.astype(dtype).astype(np.float64), high.astype(dtype).astype(np.float64)  # as the space holds them
    out = []
    if not (np.isfinite(low).all() and np.isfinite(high).all()):
        out.append("infinite Box action bounds")
    limit = 2**24 if dtype.kind in "iu" else FLOAT32_MAX
    if np.any(np.abs(low[np.isfinite(low)]) > limit) or np.any(np.abs(high[np.isfinite(high)]) > limit):
        out.append("Box action bounds beyond float32")
    if not np.any(low < high):
        out.append("every Box action component fixed")
    return out


def refusals(spec: dict[str, Any]) -> list[str]:
    """Every documented reason the library refuses ``spec`` at start-up (empty: it must train)."""
    return obs_refusals(spec["obs"]) + action_refusals(spec["act"])


def maskable(act: dict[str, Any]) -> bool:
    """Whether the action space takes a mask: a Discrete, MultiDiscrete or MultiBinary space, or a Dict or Tuple
    with a Discrete or MultiDiscrete part (a composite's MultiBinary parts take none)."""
    if act["type"] in ("dict", "tuple"):
        parts = list(act["spaces"].values()) if act["type"] == "dict" else act["spaces"]
        return any(maskable(part) and part["type"] != "multibinary" for part in parts)
    return act["type"] in ("discrete", "multidiscrete", "multibinary")


# ----------------------------------------------------------------------------- envs
EPISODE_ENDS = ["terminated", "truncated", "both"]
FAULTS = ["raise", "nan_reward", "nan_obs", "outside_obs", "wrong_shape_obs", "no_legal"]


@st.composite
def env_spec(draw: st.DrawFn, faults: bool = True) -> dict[str, Any]:
    """A :class:`tests.fuzz.fuzz_envs.FuzzEnv` spec."""
    obs = draw(obs_spec())
    act = draw(action_spec())
    mask = draw(st.sampled_from([None, "info", "obs", "method"])) if maskable(act) else None
    fault = None
    if faults and draw(st.integers(0, 4)) == 0:
        kinds = FAULTS if mask else FAULTS[:-1]
        fault = {"kind": draw(st.sampled_from(kinds)), "at": draw(st.sampled_from([0, 1, 3, 10, 40]))}
    return {
        "obs": obs,
        "act": act,
        "episodes": draw(st.lists(st.tuples(st.integers(1, 20), st.sampled_from(EPISODE_ENDS)).map(list),
                                  min_size=1, max_size=3)),
        "reward_scale": draw(st.sampled_from([1.0, 1.0, 0.0, 1e-8, 100.0, 1e6, 1e12])),
        "obs_scale": draw(st.sampled_from([1.0, 1.0, 1e3, 1e6])),
        "mask": mask,
        "one_legal": draw(st.sampled_from([0.0, 0.5, 1.0])) if mask else 0.0,
        "fault": fault,
        "seed": draw(st.integers(0, 2**16)),
    }


@st.composite
def run_overrides(draw: st.DrawFn, recurrent: bool = True) -> dict[str, Any]:
    """A tiny valid run of one or two updates: the config keys that change what the env path meets."""
    num_envs = draw(st.sampled_from([1, 2, 2]))
    num_steps = draw(st.sampled_from([4, 8, 16]))
    rnn = draw(st.sampled_from(["none"] * 4 + (["lstm", "gru"] if recurrent else [])))
    seq_len = draw(st.sampled_from([0, num_steps // 2])) if rnn != "none" else 0
    sequences = num_envs * (num_steps // (seq_len or num_steps)) if rnn != "none" else num_envs * num_steps
    num_minibatches = draw(st.sampled_from([m for m in (1, 2, 4) if sequences % m == 0 and
                                            (num_envs * num_steps) % m == 0]))
    updates = draw(st.integers(1, 2))
    eval_episodes = draw(st.sampled_from([0, 1, 2]))
    return {
        "env.num_envs": num_envs,
        "env.normalize_obs": draw(st.booleans()),
        "env.normalize_reward": draw(st.booleans()),
        "ppo.num_steps": num_steps,
        "ppo.num_minibatches": num_minibatches,
        "ppo.update_epochs": draw(st.integers(1, 2)),
        "ppo.norm_adv": draw(st.booleans()),
        "ppo.clip_vloss": draw(st.booleans()),
        "ppo.anneal_lr": draw(st.booleans()),
        "policy.hidden_sizes": draw(st.sampled_from([[8], [], [8, 8]])),
        "policy.activation": draw(st.sampled_from(["tanh", "relu", "elu", "silu"])),
        "policy.std": draw(st.sampled_from(["parameter", "state"])),
        "policy.recurrent": rnn,
        "policy.rnn_hidden_size": 8,
        "policy.seq_len": seq_len,
        "run.total_timesteps": updates * num_envs * num_steps,
        "run.eval_episodes": eval_episodes,
        "run.eval_every": draw(st.sampled_from([0, 1])) if eval_episodes else 0,
        "run.eval_max_episode_steps": 25,
        "run.checkpoint_every": 1,
        "run.seed": draw(st.integers(0, 3)),
        "run.device": "cpu",
        "run.loggers": [],
    }


# ----------------------------------------------------------------------------- configs
#: Valid values of every config key (shell/config/schema.py), except those a plain CPU run cannot use: env.id,
#: backend and kwargs (the case's env), the Atari chain, trackers and their tables, cuda.
VALID = {
    "env.num_envs": st.integers(1, 3),
    "env.vectorization_mode": st.just("sync"),
    "env.wrappers": st.sampled_from([[], [{"class": "gymnasium.wrappers:ClipReward",
                                          "kwargs": {"min_reward": -1.0, "max_reward": 1.0}}]]),
    "env.action_mask": st.sampled_from(["auto", "none"]),
    "env.max_episode_steps": st.one_of(st.none(), st.integers(1, 50)),
    "env.normalize_obs": st.booleans(),
    "env.obs_clip": st.floats(0.1, 100.0),
    "env.normalize_reward": st.booleans(),
    "env.reward_clip": st.floats(0.1, 100.0),
    "policy.hidden_sizes": st.lists(st.integers(1, 16), max_size=2),
    "policy.activation": st.sampled_from(["tanh", "relu", "elu", "silu"]),
    "policy.std": st.sampled_from(["parameter", "state"]),
    "policy.init_log_std": st.floats(-20.0, 2.0),
    "policy.share_encoder": st.one_of(st.none(), st.booleans()),
    "policy.cnn": st.sampled_from(["auto", "nature", "small", "board"]),
    "policy.cnn_channels": st.lists(st.integers(1, 8), min_size=1, max_size=2),
    "policy.image_encoding": st.just("pixels"),
    "policy.cnn_precision": st.sampled_from(["float32", "bfloat16"]),
    "policy.recurrent": st.sampled_from(["none", "none", "lstm", "gru"]),
    "policy.rnn_hidden_size": st.integers(1, 8),
    "policy.share_rnn": st.booleans(),
    "ppo.num_steps": st.sampled_from([4, 8]),
    "ppo.gamma": st.floats(0.0, 1.0),
    "ppo.gae_lambda": st.floats(0.0, 1.0),
    "ppo.learning_rate": st.floats(1e-6, 1e-1),
    "ppo.anneal_lr": st.booleans(),
    "ppo.update_epochs": st.integers(1, 2),
    "ppo.clip_coef": st.floats(0.01, 10.0),
    "ppo.clip_vloss": st.booleans(),
    "ppo.ent_coef": st.one_of(st.none(), st.floats(0.0, 1.0)),
    "ppo.vf_coef": st.floats(0.0, 10.0),
    "ppo.max_grad_norm": st.floats(0.01, 100.0),
    "ppo.norm_adv": st.booleans(),
    "ppo.target_kl": st.one_of(st.none(), st.floats(1e-4, 1.0)),
    "ppo.adam_eps": st.floats(1e-10, 1e-3),
    "ppo.reward_scale": st.floats(1e-3, 1e3),
    "run.seed": st.integers(0, 2**31 - 1),
    "run.seed_scheme": st.sampled_from(["spawn", "offset"]),
    "run.eval_episodes": st.integers(0, 2),
    "run.eval_max_episode_steps": st.one_of(st.none(), st.integers(1, 30)),
    "run.checkpoint_every": st.integers(0, 2),
    "run.keep_checkpoints": st.integers(1, 3),
    "run.torch_threads": st.integers(1, 2),
}


@st.composite
def valid_config(draw: st.DrawFn) -> dict[str, Any]:
    """Overrides of a valid, tiny config: a subset of :data:`VALID`, with the cross-key rules met."""
    keys = draw(st.lists(st.sampled_from(sorted(VALID)), unique=True, max_size=len(VALID)))
    out = {key: draw(VALID[key]) for key in keys}
    out = {k: v for k, v in out.items() if v is not None}
    num_envs = out.setdefault("env.num_envs", 2)
    num_steps = out.setdefault("ppo.num_steps", 8)
    if out.get("policy.recurrent", "none") != "none":
        out["policy.seq_len"] = draw(st.sampled_from([0, num_steps // 2, num_steps // 4]))
        sequences = num_envs * (num_steps // (out["policy.seq_len"] or num_steps))
    else:
        sequences = num_envs * num_steps
    out["ppo.num_minibatches"] = draw(st.sampled_from([m for m in (1, 2, 4) if sequences % m == 0]))
    if out.get("run.eval_episodes", 20) and draw(st.booleans()):
        out["run.eval_every"] = 1
    out.update({"run.total_timesteps": num_envs * num_steps * draw(st.integers(1, 2)), "run.device": "cpu",
                "run.loggers": [], "run.eval_episodes": out.get("run.eval_episodes", 1),
                "run.eval_max_episode_steps": out.get("run.eval_max_episode_steps") or 25})
    return out


#: Broken values: each (key, value) is refused on its own (wrong type, out of range, not a choice).
BROKEN_VALUES = [
    ("env.num_envs", 0), ("env.num_envs", -2), ("env.num_envs", "4"), ("env.num_envs", 2.5), ("env.num_envs", True),
    ("env.vectorization_mode", "parallel"), ("env.backend", "mujoco"), ("env.kwargs", 5), ("env.kwargs", [1]),
    ("env.wrappers", [{"class": "no colon"}]), ("env.wrappers", [{"class": "a:B", "args": {}}]),
    ("env.wrappers", "gymnasium.wrappers:ClipReward"), ("env.obs_keys", []), ("env.obs_keys", ["a", "a"]),
    ("env.action_mask", "yes"), ("env.frame_stack", 0), ("env.max_episode_steps", 0), ("env.obs_clip", 0.0),
    ("env.obs_clip", -1.0), ("env.reward_clip", 0), ("env.groups", {"g": []}), ("env.groups", {"g": [1]}),
    ("env.atari", "yes"), ("env.id", 3),
    ("policy.hidden_sizes", [0]), ("policy.hidden_sizes", [-1, 4]), ("policy.hidden_sizes", 64),
    ("policy.hidden_sizes", ["64"]), ("policy.activation", "gelu"), ("policy.std", "learned"),
    ("policy.init_log_std", 5.0), ("policy.init_log_std", -100.0), ("policy.cnn", "resnet"),
    ("policy.cnn_channels", []), ("policy.cnn_channels", [0]),
    ("policy.image_encoding", "rgb"), ("policy.image_embed_dim", 0), ("policy.image_scale", 0.0),
    ("policy.cnn_precision", "float16"), ("policy.image_codes", 1), ("policy.recurrent", "transformer"),
    ("policy.rnn_hidden_size", 0), ("policy.critic", "global"), ("policy.seq_len", -1), ("policy.agent_id", 1),
    ("ppo.num_steps", 0), ("ppo.gamma", 1.5), ("ppo.gamma", -0.1), ("ppo.gamma", "0.99"),
    ("ppo.gae_lambda", 2.0), ("ppo.learning_rate", 0.0), ("ppo.learning_rate", -1e-3),
    ("ppo.num_minibatches", 0), ("ppo.update_epochs", 0), ("ppo.clip_coef", 0.0), ("ppo.ent_coef", -0.01),
    ("ppo.vf_coef", -1.0), ("ppo.max_grad_norm", 0.0), ("ppo.target_kl", 0.0), ("ppo.adam_eps", 0.0),
    ("ppo.reward_scale", 0.0), ("ppo.norm_adv", "true"), ("ppo.anneal_lr", 1),
    ("ppo.gamma", math.nan), ("ppo.gae_lambda", math.nan), ("ppo.learning_rate", math.inf),
    ("ppo.learning_rate", math.nan), ("ppo.clip_coef", math.inf), ("ppo.clip_coef", math.nan),
    ("ppo.max_grad_norm", math.nan), ("ppo.vf_coef", math.inf), ("ppo.ent_coef", math.nan),
    ("ppo.adam_eps", math.inf), ("ppo.target_kl", math.nan), ("ppo.reward_scale", math.inf),
    ("env.obs_clip", math.nan), ("env.reward_clip", math.inf), ("policy.init_log_std", math.nan),
    ("policy.image_scale", math.inf), ("run.tracker_timeout", math.nan), ("selfplay.latest_prob", math.nan),
    ("run.seed", -1), ("run.seed", 1.5), ("run.seed_scheme", "random"), ("run.total_timesteps", 0),
    ("run.device", "tpu"), ("run.device", "cuda:0"), ("run.eval_episodes", -1), ("run.eval_every", -1),
    ("run.eval_max_episode_steps", 0), ("run.eval_opponents", []), ("run.eval_opponents", ["random", "random"]),
    ("run.eval_opponents", ["no colon"]), ("run.checkpoint_every", -1), ("run.keep_checkpoints", 0),
    ("run.torch_threads", 0), ("run.loggers", "tensorboard"), ("run.loggers", ["tensorboard", "tensorboard"]),
    ("run.loggers", ["neptune"]), ("run.wandb", "x"), ("run.tracker_timeout", 0.0),
    ("selfplay.snapshot_every", -1), ("selfplay.pool_size", 0), ("selfplay.latest_prob", 1.5),
]

#: Unknown keys and sections (typos and keys of other libraries).
UNKNOWN_KEYS = ["ppo.gama", "ppo.lr", "ppo.n_steps", "ppo.batch_size", "env.num_env", "policy.net_arch",
                "run.seeds", "run.total_steps", "optim.lr", "algo.gamma", "ppo.ent_coeff", "env.normalise_obs"]


@st.composite
def broken_config(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    """``(what, overrides)``: a valid tiny config broken in one way: a bad value, an unknown key, or a
    combination the whole-config rules refuse."""
    base = draw(valid_config())
    kind = draw(st.sampled_from(["value", "value", "unknown", "combination"]))
    if kind == "value":
        key, value = draw(st.sampled_from(BROKEN_VALUES))
        return f"{key} = {value!r}", {**base, key: value}
    if kind == "unknown":
        key = draw(st.sampled_from(UNKNOWN_KEYS))
        return f"unknown key {key}", {**base, key: 1}
    combo = draw(st.sampled_from(["minibatches", "eval_every", "seq_len", "sequences"]))
    num_envs, num_steps = base["env.num_envs"], base["ppo.num_steps"]
    if combo == "minibatches":
        return combo, {**base, "ppo.num_minibatches": num_envs * num_steps + 1, "policy.recurrent": "none"}
    if combo == "eval_every":
        return combo, {**base, "run.eval_episodes": 0, "run.eval_every": 2}
    if combo == "seq_len":
        return combo, {**base, "policy.recurrent": "lstm", "policy.seq_len": num_steps + 1}
    return combo, {**base, "policy.recurrent": "gru", "policy.seq_len": 0, "env.num_envs": 1,
                   "ppo.num_minibatches": 2}


# ----------------------------------------------------------------------------- multi-agent envs
MA_FAULTS = ["raise", "nan_reward", "nan_obs", "wrong_agent"]


@st.composite
def agents_spec(draw: st.DrawFn, faults: bool = True) -> dict[str, Any]:
    """A :class:`tests.fuzz.fuzz_agents.FuzzAgents` spec: one or two kinds of agents (same spaces within a kind),
    joining at reset or later, leaving after their lifetimes."""
    flat_box = st.builds(lambda n, b: {"type": "box", "shape": [n], "dtype": "float32", "low": b[0], "high": b[1]},
                         st.integers(1, 3), _bounds(["unit", "infinite", "lopsided"]))
    obs = st.one_of(flat_box, flat_box, discrete_spec(), box_spec())
    act = st.one_of(discrete_spec(min_n=2), multidiscrete_spec().filter(lambda s: max(s["nvec"]) >= 2),
                    st.builds(lambda n: {"type": "box", "shape": [n], "dtype": "float32", "low": -1.0, "high": 2.0},
                              st.integers(1, 2)))
    agents = []
    for kind in draw(st.lists(st.sampled_from(["scout", "relay"]), min_size=1, max_size=2, unique=True)):
        obs_k, act_k = draw(obs), draw(act)
        for i in range(draw(st.integers(1, 2))):
            agents.append({"name": f"{kind}_{i}", "obs": obs_k, "act": act_k,
                           "joins": draw(st.sampled_from([0, 0, 1, 3])), "lifetime": draw(st.integers(1, 8)),
                           "end": draw(st.sampled_from(["terminated", "truncated"]))})
    fault = None
    if faults and draw(st.integers(0, 5)) == 0:
        fault = {"kind": draw(st.sampled_from(MA_FAULTS)), "at": draw(st.sampled_from([1, 4, 12]))}
    return {"agents": agents, "mask": draw(st.sampled_from([None, "info", "obs"])), "fault": fault,
            "seed": draw(st.integers(0, 2**16))}


@st.composite
def agents_run(draw: st.DrawFn) -> dict[str, Any]:
    num_envs = draw(st.sampled_from([1, 2]))
    num_steps = draw(st.sampled_from([4, 8]))
    rnn = draw(st.sampled_from(["none", "none", "none", "gru"]))
    return {
        "env.backend": "pettingzoo",
        "env.num_envs": num_envs,
        "env.normalize_obs": draw(st.booleans()),
        "ppo.num_steps": num_steps,
        "ppo.num_minibatches": 1,
        "ppo.update_epochs": draw(st.integers(1, 2)),
        "policy.hidden_sizes": [8],
        "policy.critic": draw(st.sampled_from(["local", "local", "state", "concat"])),
        "policy.agent_id": draw(st.booleans()),
        "policy.recurrent": rnn,
        "policy.rnn_hidden_size": 8,
        "run.total_timesteps": num_envs * num_steps * draw(st.integers(1, 2)),
        "run.eval_episodes": draw(st.sampled_from([0, 1])),
        "run.eval_max_episode_steps": 20,
        "run.checkpoint_every": 1,
        "run.device": "cpu",
        "run.loggers": [],
    }


# ----------------------------------------------------------------------------- turn-based games
TURN_FAULTS = ["raise", "nan_reward", "nan_obs", "outside_obs", "no_legal"]
#: a bot of the fuzzer's games (``run.eval_opponents``, ``selfplay.bots``)
TURN_BOT = "tests.fuzz.fuzz_turns:last_legal"


def _one_in(n: int) -> st.SearchStrategy[bool]:
    """True with chance 1/n (``st.integers(0, n - 1) == 0`` would be true far more often: Hypothesis draws bounds
    often)."""
    return st.sampled_from([False] * (n - 1) + [True])


def _weighted(*choices: tuple[int, st.SearchStrategy]) -> st.SearchStrategy:
    """One of the strategies, each drawn with its weight (``st.one_of`` weighs its distinct branches alike)."""
    return st.sampled_from([k for k, (weight, _) in enumerate(choices) for _ in range(weight)]).flatmap(
        lambda k: choices[k][1])


def seat_obs_spec() -> st.SearchStrategy[dict[str, Any]]:
    """What a seat observes: mostly flat Boxes, also Discrete, MultiBinary, Boxes of rank 0 to 3, a Dict of those,
    and now and then a MultiDiscrete (refused)."""
    flat_box = st.builds(lambda n, b: {"type": "box", "shape": [n], "dtype": "float32", "low": b[0], "high": b[1]},
                         st.integers(1, 4), _bounds(["unit", "infinite", "lopsided", "half_infinite", "fixed"]))
    part = st.one_of(flat_box, discrete_spec(), box_spec(), multibinary_spec())
    as_dict = st.dictionaries(st.sampled_from(["board", "pos", "x_1"]), part, min_size=1, max_size=2).map(
        lambda d: {"type": "dict", "spaces": d})
    return _weighted((10, flat_box), (2, discrete_spec()), (2, box_spec()), (1, multibinary_spec()), (3, as_dict),
                     (1, multidiscrete_spec()))


def seat_action_spec() -> st.SearchStrategy[dict[str, Any]]:
    """A seat's moves: mostly Discrete (now and then with a ``start``; n = 1 refused), also MultiDiscrete,
    MultiBinary and Box."""
    box = st.builds(lambda n: {"type": "box", "shape": [n], "dtype": "float32", "low": -1.0, "high": 2.0},
                    st.integers(1, 2))
    plain = st.builds(lambda n: {"type": "discrete", "n": n, "start": 0}, st.integers(2, 6))
    return _weighted((12, plain), (3, discrete_spec(min_n=2)), (1, discrete_spec()), (1, multidiscrete_spec()),
                     (1, multibinary_spec(True)), (1, box))


@st.composite
def game_spec(draw: st.DrawFn, faults: bool = True) -> dict[str, Any]:
    """A :class:`tests.fuzz.fuzz_turns.FuzzGame` spec: two or three seats (the last one now and then of other
    spaces), masks that change at every move, games that end on any seat's move, a seat that leaves early."""
    n = draw(st.sampled_from([2, 2, 2, 3]))
    obs, act = draw(seat_obs_spec()), draw(seat_action_spec())
    seats = [{"obs": obs, "act": act} for _ in range(n)]
    if draw(_one_in(6)):  # the last seat differs: two groups, a policy each
        seats[-1] = {"obs": draw(seat_obs_spec()), "act": draw(st.sampled_from([act, draw(seat_action_spec())]))}
    masked = all(maskable(s["act"]) for s in seats)
    mask = draw(st.sampled_from([None, "obs", "obs", "info"])) if masked else None
    fault = None
    if faults and draw(_one_in(6)):
        kinds = TURN_FAULTS if mask else TURN_FAULTS[:-1]
        fault = {"kind": draw(st.sampled_from(kinds)), "at": draw(st.sampled_from([0, 1, 2, 5, 12, 40]))}
    return {
        "seats": seats,
        "mask": mask,
        "mask_dtype": draw(st.sampled_from(["int8", "multibinary"])),
        "waiting": draw(st.sampled_from(["zeros", "ones", "random"] + (["absent"] if mask == "info" else []))),
        "one_legal": draw(st.sampled_from([0.0, 0.5, 1.0])) if mask else 0.0,
        "order": draw(st.sampled_from(["cycle", "cycle", "random"])),
        "games": draw(st.lists(st.tuples(st.integers(1, 12), st.sampled_from(EPISODE_ENDS), st.integers(-1, n - 1))
                               .map(list), min_size=1, max_size=3)),
        "rewards": draw(st.sampled_from(["end", "move", "both"])),
        "reward_scale": draw(st.sampled_from([1.0, 1.0, 0.0, 1e-3, 100.0])),
        "leave": draw(st.sampled_from([None, None, None, {"seat": draw(st.integers(0, n - 1)),
                                                          "after": draw(st.integers(1, 6))}])),
        "fault": fault,
        "seed": draw(st.integers(0, 2**16)),
    }


@st.composite
def game_run(draw: st.DrawFn) -> dict[str, Any]:
    """A tiny run of a turn-based game: one or two updates, now and then a recurrent policy, the agent's index, a
    concat critic, a move limit, a self-play pool, random or bot opponents and openings, evaluation opponents."""
    num_envs = draw(st.sampled_from([1, 2, 2]))
    num_steps = draw(st.sampled_from([4, 8, 16]))
    rnn = draw(st.sampled_from(["none"] * 5 + ["gru", "lstm"]))
    eval_episodes = draw(st.sampled_from([0, 1, 2, 3]))
    run = {
        "env.backend": "pettingzoo",
        "env.num_envs": num_envs,
        "env.max_episode_steps": draw(st.sampled_from([None, None, None, 1, 3, 7])),
        "env.normalize_obs": draw(st.booleans()),
        "env.normalize_reward": draw(st.booleans()),
        "ppo.num_steps": num_steps,
        # a recurrent rollout is cut into env.num_envs sequences (policy.seq_len = 0)
        "ppo.num_minibatches": draw(st.sampled_from([1, 1, 2] if rnn == "none" or num_envs == 2 else [1])),
        "ppo.update_epochs": draw(st.integers(1, 2)),
        "policy.hidden_sizes": [8],
        "policy.recurrent": rnn,
        "policy.rnn_hidden_size": 8,
        "policy.agent_id": draw(st.sampled_from([False, False, False, True])),
        "policy.critic": draw(st.sampled_from(["local"] * 10 + ["concat"] * 2 + ["state"])),
        "run.total_timesteps": num_envs * num_steps * draw(st.integers(1, 2)),
        "run.eval_episodes": eval_episodes,
        "run.eval_every": draw(st.sampled_from([0, 1])) if eval_episodes else 0,
        "run.eval_max_episode_steps": 30,
        "run.eval_opponents": draw(st.sampled_from([["random"], ["random"], [TURN_BOT, "random"]])),
        "run.eval_opening_moves": draw(st.sampled_from([0, 0, 0, 1, 3])),
        "run.checkpoint_every": 1,
        "run.seed": draw(st.integers(0, 3)),
        "run.device": "cpu",
        "run.loggers": [],
    }
    kind = draw(st.sampled_from(["none"] * 6 + ["pool", "random", "openings", "bots"]))
    if kind == "pool":
        run.update({"selfplay.snapshot_every": 1, "selfplay.pool_size": draw(st.integers(1, 3)),
                    "selfplay.latest_prob": draw(st.sampled_from([0.0, 0.5, 1.0]))})
    elif kind == "random":
        run["selfplay.random_prob"] = draw(st.sampled_from([0.5, 1.0]))
    elif kind == "openings":
        run.update({"selfplay.opening_moves": draw(st.integers(1, 3)), "selfplay.vary_openings": draw(st.booleans())})
    elif kind == "bots":
        run.update({"selfplay.bots": [TURN_BOT], "selfplay.bot_prob": draw(st.sampled_from([0.5, 1.0]))})
    return {k: v for k, v in run.items() if v is not None}


# ----------------------------------------------------------------------------- VMAS scenarios
VMAS_FAULTS = ["raise", "nan_reward", "nan_obs", "inf_obs"]


@st.composite
def scenario_spec(draw: st.DrawFn, faults: bool = True) -> dict[str, Any]:
    """A :class:`tests.fuzz.fuzz_vmas.FuzzScenario` spec: one or two kinds of one to three agents, each kind with its
    own observation size, forces (2 or 3, bounds per force) and discrete choices, communication, worlds that end at
    their own steps or never, now and then an observation the backend refuses (not 1-D) and a fault."""
    kinds = []
    dim_c = draw(st.sampled_from([0, 0, 2, 3]))
    for name in draw(st.lists(st.sampled_from(["runner", "scout"]), min_size=1, max_size=2, unique=True)):
        size = draw(st.sampled_from([2, 2, 3]))
        kinds.append({
            "name": name,
            "count": draw(st.integers(1, 3)),
            "obs_size": draw(st.integers(1, 8)),
            "action_size": size,
            "nvec": draw(st.one_of(st.none(), st.lists(st.integers(2, 5), min_size=size, max_size=size))),
            "u_range": draw(st.one_of(st.sampled_from([1.0, 0.5, 3.0]),
                                      st.lists(st.sampled_from([0.1, 1.0, 2.0]), min_size=size, max_size=size))),
            # an agent talks only where the world has a channel (VMAS asserts it); VMAS 1.5 reads continuous
            # communication after the first 2 forces (its dim_p), not after all of them: an agent of 3 forces that
            # talks has its own actions refused by VMAS, so it stays silent
            "silent": True if size != 2 or not dim_c else draw(st.booleans()),
        })
    fault = None
    if faults and draw(_one_in(6)):
        fault = {"kind": draw(st.sampled_from(VMAS_FAULTS)), "at": draw(st.sampled_from([0, 1, 3, 10, 40]))}
    return {
        "kinds": kinds,
        "dim_c": dim_c,
        "observation": draw(st.sampled_from(["flat"] * 16 + ["matrix", "dict"])),
        "lengths": draw(st.lists(st.integers(0, 8), min_size=1, max_size=3)),
        "reward_scale": draw(st.sampled_from([1.0, 1.0, 0.0, 1e-3, 100.0])),
        "fault": fault,
    }


@st.composite
def scenario_run(draw: st.DrawFn) -> dict[str, Any]:
    """A tiny run of a VMAS scenario: continuous or discrete (or multi-discrete) actions, one or two updates, the
    agent's index, a concat critic, recurrent policies, a time limit or none; now and then a setting the backend
    refuses (``policy.critic = "state"``, an action mask, a key of ``env.kwargs`` it sets itself or the scenario
    does not take)."""
    num_envs = draw(st.sampled_from([1, 2, 3]))
    num_steps = draw(st.sampled_from([4, 8]))
    rnn = draw(st.sampled_from(["none"] * 4 + ["gru", "lstm"]))
    eval_episodes = draw(st.sampled_from([0, 1, 2]))
    kwargs = {"continuous_actions": draw(st.booleans())}
    if not kwargs["continuous_actions"] and draw(st.booleans()):
        kwargs["multidiscrete_actions"] = draw(st.booleans())
    if draw(_one_in(15)):  # refused: by the backend, the scenario, or VMAS (multi-discrete forces)
        key = draw(st.sampled_from(["max_steps", "seed", "no_such_argument", "multidiscrete_actions"]))
        kwargs[key] = True if key == "multidiscrete_actions" else 5
        kwargs["continuous_actions"] = kwargs["continuous_actions"] or key == "multidiscrete_actions"
    run = {
        "env.backend": "vmas",
        "env.kwargs": kwargs,
        "env.num_envs": num_envs,
        "env.max_episode_steps": draw(st.sampled_from([None, 3, 6])),
        "env.action_mask": draw(st.sampled_from(["auto"] * 10 + ["none", "info"])),
        "env.normalize_obs": draw(st.booleans()),
        "env.normalize_reward": draw(st.booleans()),
        "ppo.num_steps": num_steps,
        # a recurrent rollout is cut into env.num_envs sequences (policy.seq_len = 0)
        "ppo.num_minibatches": draw(st.sampled_from([1, 2] if rnn == "none" or num_envs == 2 else [1])),
        "ppo.update_epochs": draw(st.integers(1, 2)),
        "policy.hidden_sizes": [8],
        "policy.std": draw(st.sampled_from(["parameter", "state"])),
        "policy.recurrent": rnn,
        "policy.rnn_hidden_size": 8,
        "policy.agent_id": draw(st.booleans()),
        "policy.critic": draw(st.sampled_from(["local"] * 7 + ["concat"] * 3 + ["state"])),
        "run.total_timesteps": num_envs * num_steps * draw(st.integers(1, 2)),
        "run.eval_episodes": eval_episodes,
        "run.eval_every": draw(st.sampled_from([0, 1])) if eval_episodes else 0,
        "run.eval_max_episode_steps": 12,
        "run.checkpoint_every": 1,
        "run.seed": draw(st.integers(0, 3)),
        "run.device": "cpu",
        "run.loggers": [],
    }
    return {k: v for k, v in run.items() if v is not None}
