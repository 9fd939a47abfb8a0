"""The run configuration's schema, as data: one frozen attrs class per TOML section, and ``Config`` of them all.

One attrs class per concern (env, policy, ppo, run, selfplay); every field carries a one-line ``help`` in its
metadata (docs/reference/config.md is generated from these classes). Values are checked when the classes are
built, so a bad config fails before any env is made, with one line naming the key, the value and what is
allowed; a rule that joins several keys is checked beside them, in ``__attrs_post_init__`` of the section
(``SelfPlayConfig``) or of ``Config``.

Nothing here reads or writes TOML: :mod:`shell.config.loading` finds and parses config files, applies
``--set`` overrides, checks each value's type against the annotations here and builds these classes.
"""

from __future__ import annotations

import math
import re
from typing import Any

import attrs

from shell.errors import ConfigError


# ----------------------------------------------------------------------------- validators
def _range(lo: float | None = None, hi: float | None = None, *, lo_open: bool = False, hi_open: bool = False):
    def check(_instance: Any, attribute: attrs.Attribute, value: Any) -> None:
        if value is None:
            return
        if isinstance(value, float) and not math.isfinite(value):  # NaN passes every comparison; inf means nothing
            raise ConfigError(f"{_key(attribute)} = {value!r} is not a finite number; allowed: {interval}")
        bad = (lo is not None and (value <= lo if lo_open else value < lo)) or (
            hi is not None and (value >= hi if hi_open else value > hi)
        )
        if bad:
            raise ConfigError(f"{_key(attribute)} = {value!r} is out of range; allowed: {interval}")

    left, right = "(" if lo_open or lo is None else "[", ")" if hi_open or hi is None else "]"
    interval = f"{left}{'-inf' if lo is None else lo}, {'inf' if hi is None else hi}{right}"
    if lo is not None and hi is None:  # for the docs (reference/config.md): ">= 1" rather than "[1, inf]"
        check.allowed = f"{'>' if lo_open else '>='} {lo}"
    elif hi is not None and lo is None:
        check.allowed = f"{'<' if hi_open else '<='} {hi}"
    else:
        check.allowed = interval
    return check


def _one_of(*choices: str):
    def check(_instance: Any, attribute: attrs.Attribute, value: Any) -> None:
        if value not in choices:
            raise ConfigError(f"{_key(attribute)} = {value!r} is not allowed; choose one of {list(choices)}")

    check.choices = choices  # for the docs (reference/config.md)
    return check


def _positive_ints(_instance: Any, attribute: attrs.Attribute, value: Any) -> None:
    if value is None or any(v <= 0 for v in value):
        raise ConfigError(f"{_key(attribute)} = {value!r}: needs a list of positive ints")


_positive_ints.allowed = "a list of positive ints"


def _layers(instance: Any, attribute: attrs.Attribute, value: Any) -> None:
    if not value:
        raise ConfigError(f"{_key(attribute)} = {value!r}: needs at least one layer")
    _positive_ints(instance, attribute, value)


_layers.allowed = "a non-empty list of positive ints"


def _names(_instance: Any, attribute: attrs.Attribute, value: Any) -> None:
    if value is not None and (not value or len(set(value)) != len(value)):
        raise ConfigError(f"{_key(attribute)} = {value!r}: needs a non-empty list of distinct keys")


_names.allowed = "a non-empty list of distinct keys"


def _distinct(_instance: Any, attribute: attrs.Attribute, value: Any) -> None:
    if len(set(value)) != len(value):
        raise ConfigError(f"{_key(attribute)} = {value!r}: names one twice")


_distinct.allowed = "distinct names"


def _groups(_instance: Any, attribute: attrs.Attribute, value: Any) -> None:
    for name, members in value.items():
        if not isinstance(members, list) or not members or not all(isinstance(a, str) for a in members):
            raise ConfigError(f"{_key(attribute)}.{name} = {members!r}: needs a non-empty list of agent names")


_groups.allowed = "a table of group name = [agent names]"


def _action_links(_instance: Any, attribute: attrs.Attribute, value: Any) -> None:
    for key, choices in value.items():
        if not isinstance(choices, dict) or not choices:
            raise ConfigError(f"{_key(attribute)}.{key} = {choices!r}: needs a table of choice = [part names]")
        for choice, targets in choices.items():
            if not isinstance(targets, list) or not targets or not all(
                    isinstance(t, str | int) and not isinstance(t, bool) for t in targets):
                raise ConfigError(f"{_key(attribute)}.{key}.{choice} = {targets!r}: needs a non-empty list of part "
                                  "names (strings: a Dict key, a Tuple index such as \"1\")")


_action_links.allowed = "a table of Discrete part = { choice = [part names] }"


WRAPPER_CLASS = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")


def _wrapper_specs(_instance: Any, attribute: attrs.Attribute, value: Any) -> None:
    """Each ``env.wrappers`` entry: a table with ``class = "module:Name"`` and an optional ``kwargs`` table."""
    for i, entry in enumerate(value):
        where = f"{_key(attribute)}[{i}] = {entry!r}"
        unknown = sorted(set(entry) - {"class", "kwargs"})
        if unknown:
            raise ConfigError(f"{where}: unknown key {unknown[0]!r}; an entry takes class and kwargs")
        name = entry.get("class")
        if not isinstance(name, str) or not WRAPPER_CLASS.match(name):
            raise ConfigError(f"{where}: needs class = \"module.path:ClassName\", e.g. "
                              f"class = \"gymnasium.wrappers:ClipReward\"")
        if not isinstance(entry.get("kwargs", {}), dict):
            raise ConfigError(f"{where}: kwargs must be a table, e.g. kwargs = {{ min_reward = -1.0 }}")


_wrapper_specs.allowed = 'tables of class = "module:Name" and an optional kwargs table'


def _opponents(_instance: Any, attribute: attrs.Attribute, value: Any) -> None:
    """``run.eval_opponents``: a non-empty list of distinct ``"random"`` or ``"module:function"`` names (whether
    they import is checked at start-up, by the evaluation); ``selfplay.bots`` may be empty."""
    empty_ok = attribute.metadata.get("section") == "selfplay"
    if (not value and not empty_ok) or len(set(value)) != len(value):
        raise ConfigError(f"{_key(attribute)} = {value!r}: needs a {'' if empty_ok else 'non-empty '}list of "
                          "distinct opponents")
    for name in value:
        if name != "random" and not WRAPPER_CLASS.match(name):
            raise ConfigError(f"{_key(attribute)}: {name!r} is neither \"random\" nor a bot \"module.path:function\", "
                              "e.g. \"my_bots:greedy\"")


_opponents.allowed = 'a list of "random" and "module:function" bots'


def _import_name(_instance: Any, attribute: attrs.Attribute, value: Any) -> None:
    """A ``"module.path:function"`` name (whether it imports is checked at start-up, where the run is built)."""
    if value is not None and not WRAPPER_CLASS.match(value):
        raise ConfigError(f"{_key(attribute)} = {value!r}: needs a function \"module.path:function\", e.g. "
                          "\"shell.envs.pettingzoo.symmetries:connect_four_mirror\"")


_import_name.allowed = 'a function "module.path:function"'


def _key(attribute: attrs.Attribute) -> str:
    return f"{attribute.metadata.get('section', '?')}.{attribute.name}"


def _field(default: Any, help: str, validator: Any = None) -> Any:
    return attrs.field(default=default, validator=validator, metadata={"help": help})


def _section(name: str):
    """Class decorator: a frozen attrs class whose fields know their TOML section."""

    def wrap(cls: type) -> type:
        for value in cls.__dict__.values():
            if isinstance(value, attrs.Attribute | type(attrs.field())):
                value.metadata = {**value.metadata, "section": name}
        return attrs.frozen(kw_only=True)(cls)

    return wrap


# ----------------------------------------------------------------------------- sections
@_section("env")
class EnvConfig:
    """Which environment, how many copies, and how they run."""

    id: str = _field("Pendulum-v1", "Gymnasium id, including 'my_module:MyEnv-v0' for your own env.")
    num_envs: int = _field(16, "Parallel envs per process.", _range(1))
    vectorization_mode: str = _field("sync", "'sync' (sub-envs stepped in turn), 'async' (in worker processes: "
                                     "gymnasium's AsyncVectorEnv; pettingzoo: the copies over every CPU) or "
                                     "'threads' (gymnasium: in env.shares shares, default one per CPU, stepped "
                                     "by threads of this process at once; pays where the env's step releases the "
                                     "GIL, as MuJoCo's does; the same results as 'sync').",
                                     _one_of("sync", "async", "threads"))
    shares: int | None = _field(None, "async or threads: step the sub-envs in this many shares at once, one in this "
                                "process and the rest in worker processes (threads: in threads), each share's "
                                "sub-envs in turn (the same results as 'sync'); absent = gymnasium's AsyncVectorEnv "
                                "(a process per sub-env), pettingzoo and threads one share per CPU; sync takes only 1 "
                                "(it is one share).", _range(1))
    backend: str = _field("gymnasium", "'gymnasium' (CPU envs), 'torch' (batched tensor envs), 'ale' (ale-py's "
                          "C++ AtariVectorEnv running the Atari chain; needs env.atari), 'envpool' (EnvPool's "
                          "C++ thread pool; the envpool extra) or 'pettingzoo' (a multi-agent env: env.id names a "
                          "module with parallel_env(), or with env() alone for a turn-based (AEC) game, or "
                          "'module:function' for another function of it that makes one; the multiagent extra, the "
                          "games extra for PettingZoo's classic games) or 'vmas' (a VMAS scenario's batch of worlds "
                          "on the run's device: env.id names the scenario; the vmas extra) or 'openspiel' (a "
                          "two-player turn-based OpenSpiel game: env.id names it, e.g. 'kuhn_poker', env.kwargs its "
                          "parameters; the openspiel extra). Each backend checks its "
                          "own keys "
                          "(shell/envs/).")
    kwargs: dict[str, Any] = _field(attrs.Factory(dict), "Keyword arguments for gymnasium.make of each sub-env "
                                    "(a TOML table, e.g. { continuous = true }); a string naming an existing file "
                                    "or folder relative to the config file's folder (to the current folder for "
                                    "--set) is made absolute.")
    wrappers: list[dict[str, Any]] = _field(
        attrs.Factory(list), "Wrappers of each sub-env, innermost first, around what gymnasium.make returns and "
        "inside env.obs_keys' filter and the Atari chain: [[env.wrappers]] tables with class = \"module:Name\" "
        "and optional kwargs = { ... }.", _wrapper_specs)
    groups: dict[str, list[str]] = _field(attrs.Factory(dict), "pettingzoo, vmas: agents by group, e.g. { adversary = "
                                          "[\"adversary_0\"], agent = [\"agent_0\"] }; each group has a policy of "
                                          "its own (absent = agents with identical spaces).", _groups)
    obs_keys: list[str] | None = _field(None, "Dict observations: the keys to keep (FilterObservation); absent = all.",
                                        _names)
    action_mask: str = _field("auto", "Invalid-action masks: 'info' (info['action_mask'] on reset and step), 'obs' "
                              "(a Dict observation key 'action_mask', never fed to the encoder), 'method' (the env's "
                              "action_masks()), 'none', or 'auto' (obs key, then method, then info; else none).",
                              _one_of("auto", "none", "info", "obs", "method"))
    atari: bool = _field(False, "The standard Atari chain: 30 no-op starts, frame skip 4 with max-pooling, 84x84 "
                                "grey, a frame stack (needs env.kwargs.frameskip = 1).")
    frame_stack: int = _field(4, "Frames stacked by the Atari chain.", _range(1))
    terminal_on_life_loss: bool = _field(False, "Atari: a lost life ends the episode for training only (the game "
                                                "goes on; returns are reported per game).")
    sign_reward: bool = _field(False, "Train on sign(reward) (Atari); episode statistics and eval keep the score.")
    max_episode_steps: int | None = _field(None, "Override the env's time limit (absent = registered one).", _range(1))
    normalize_obs: bool = _field(False, "Normalise observations with running mean/variance (saved in checkpoints).")
    obs_clip: float = _field(10.0, "Clip normalised observations to +-this.", _range(0.0, lo_open=True))
    normalize_reward: bool = _field(False, "Divide rewards by the running std of the discounted return.")
    reward_clip: float = _field(10.0, "Clip scaled rewards to +-this.", _range(0.0, lo_open=True))


@_section("policy")
class PolicyConfig:
    """Actor and critic networks."""

    hidden_sizes: list[int] = _field([64, 64], "Hidden layer widths of the actor and critic heads ([] = linear).",
                                     _positive_ints)
    activation: str = _field("tanh", "Hidden activation: 'tanh', 'relu', 'elu' or 'silu'.",
                             _one_of("tanh", "relu", "elu", "silu"))
    std: str = _field("parameter", "'parameter' (state-independent log-std) or 'state' (softplus head).",
                      _one_of("parameter", "state"))
    init_log_std: float = _field(0.0, "Initial log-std of the Gaussian (continuous actions).", _range(-20.0, 2.0))
    share_encoder: bool | None = _field(None, "Actor and critic share one encoder (absent = shared when the "
                                              "observation has an image, separate otherwise).")
    cnn: str = _field("auto", "Image encoder: 'nature' (Mnih et al. 2015), 'small' (small grids), 'board' (3x3 "
                              "convolutions that keep a board's size, widths from cnn_channels) or 'auto' (nature "
                              "from 36x36 up, else small).", _one_of("auto", "nature", "small", "board"))
    cnn_channels: list[int] = _field([32, 32, 32], "cnn = 'board': the channels of each 3x3 convolution (padding 1, "
                                                   "so every layer keeps the board's height and width).",
                                     _layers)
    image_channels_first: bool | None = _field(None, "Image layout [C, H, W] (absent = detected: channels last when "
                                                     "the last axis is <= 4 and the first is not).")
    image_encoding: str = _field("pixels", "'pixels' (scaled by image_scale), or for integer codes per channel "
                                           "(MiniGrid's symbolic grid) 'onehot' planes or a learned 'embed'ding.",
                                 _one_of("pixels", "onehot", "embed"))
    image_embed_dim: int = _field(16, "image_encoding = 'embed': width of a cell's embedding.", _range(1))
    image_scale: float | None = _field(None, "Pixels are multiplied by this (absent = 1/255 for uint8, 1 for float).",
                                       _range(0.0, lo_open=True))
    cnn_precision: str = _field("float32", "Image encoders compute in 'float32' or under 'bfloat16' autocast "
                                           "(about 2x faster on CPUs with AVX512-BF16, several times slower "
                                           "where it is emulated); 'auto' takes bfloat16 only where the "
                                           "device computes it natively.",
                                _one_of("float32", "bfloat16", "auto"))
    image_codes: int = _field(16, "image_encoding = 'onehot' or 'embed': codes 0..image_codes-1 per channel.",
                              _range(2))
    recurrent: str = _field("none", "Recurrent core between encoder and heads: 'none', 'lstm' or 'gru'.",
                            _one_of("none", "lstm", "gru"))
    rnn_hidden_size: int = _field(64, "recurrent: width of the LSTM/GRU state.", _range(1))
    share_rnn: bool = _field(False, "recurrent: actor and critic share one recurrent core (default: one each).")
    agent_id: bool = _field(False, "Multi-agent (pettingzoo, vmas): append the agent's one-hot index in its group to "
                                   "what the policy observes (parameter sharing with agent identity).")
    critic: str = _field("local", "Multi-agent (pettingzoo, vmas): the critic sees the agent's own observation "
                                  "('local'), the env's global state() ('state') or all agents' observations of the "
                                  "group ('concat', MAPPO's centralised critic); the actor always sees its own.",
                         _one_of("local", "state", "concat"))
    seq_len: int = _field(0, "recurrent: update on sequences of this many steps with their stored start states "
                             "(0 = whole env columns of the rollout); must divide ppo.num_steps.", _range(0))
    layer_norm: bool = _field(False, "A LayerNorm after each hidden layer of the actor's and critic's MLPs, before "
                                     "the activation (Ba et al. 2016: arXiv:1607.06450).")
    critic_keys: list[str] | None = _field(None, "Dict observations of a single-agent env: keys only the critic sees "
                                                 "(privileged information, an asymmetric actor-critic as in rsl_rl "
                                                 "and IsaacLab); the actor, export and load_policy leave them out.",
                                           _names)
    action_links: dict[str, Any] = _field(attrs.Factory(dict), "Parameterised (hybrid) actions of a Dict or Tuple "
                                          "action space: a Discrete part's choices and the parts each selects, e.g. "
                                          "{ kind = { 0 = [\"run\"], 1 = [\"hop\"] } }; a selected part's log-prob "
                                          "and entropy count only where its choice is taken (parts named by key or "
                                          "index, nested ones joined by dots).", _action_links)


@_section("ppo")
class PPOConfig:
    """The PPO update."""

    num_steps: int = _field(200, "Rollout length T per env.", _range(1))
    gamma: float = _field(0.99, "Discount factor.", _range(0.0, 1.0))
    gae_lambda: float = _field(0.95, "GAE lambda.", _range(0.0, 1.0))
    learning_rate: float = _field(3e-4, "Adam learning rate.", _range(0.0, lo_open=True))
    anneal_lr: bool = _field(False, "Anneal the learning rate linearly to 0 over training.")
    num_minibatches: int = _field(8, "Minibatches per epoch.", _range(1))
    update_epochs: int = _field(10, "Passes over each rollout.", _range(1))
    clip_coef: float = _field(0.2, "PPO ratio clip epsilon.", _range(0.0, lo_open=True))
    clip_vloss: bool = _field(False, "Clip the value loss against the rollout-time values.")
    ent_coef: float | None = _field(
        None, "Entropy bonus; absent = 0 for Box actions, normalized_entropy_coef(n) for Discrete(n).",
        _range(0.0))
    ent_coef_end: float | None = _field(
        None, "Anneal the entropy coefficient linearly from ent_coef (at the first update) to this (at the last); "
              "absent = a fixed coefficient.", _range(0.0))
    magnet_coef: float = _field(
        0.0, "Magnetic mirror descent (Sokota et al. 2023): the mean over the minibatch of KL(pi(.|s) || rho(.|s)) "
             "from the policy to a magnet policy rho, times this, joins the loss (Discrete and MultiDiscrete "
             "actions, feed-forward policies; 0 = off).", _range(0.0))
    magnet_every: int = _field(
        0, "With magnet_coef: the magnet becomes a copy of the policy every this many updates (it starts as the "
           "initial policy); 0 = the uniform policy over the legal actions, never refreshed.", _range(0))
    average_decay: float = _field(
        0.0, "Keep an average policy beside the policy: after every update each of its weights becomes decay * its "
             "own + (1 - decay) * the policy's (an exponential moving average; the first update copies); 1 = the "
             "equal-weight mean of every policy since average_start. Saved in checkpoints; the run is deployed as it "
             "(load_policy(run), play, export; average=False: the last policy), and an OpenSpiel game's "
             "evaluations measure its exploitability beside the policy's (0 = none).", _range(0.0, 1.0))
    average_start: float = _field(
        0.0, "With average_decay: the fraction of the run's updates after which the average starts; until then it "
             "is the policy itself, so the early policies leave no trace in it (0 = from the first update).",
        _range(0.0, 1.0, hi_open=True))
    vf_coef: float = _field(0.5, "Value-loss coefficient.", _range(0.0))
    max_grad_norm: float = _field(0.5, "Global gradient-norm clip.", _range(0.0, lo_open=True))
    norm_adv: bool = _field(True, "Normalise advantages per minibatch.")
    target_kl: float | None = _field(None, "Stop the epochs early once approx_kl exceeds this (absent = never).",
                                     _range(0.0, lo_open=True))
    adam_eps: float = _field(1e-5, "Adam epsilon.", _range(0.0, lo_open=True))
    reward_scale: float = _field(1.0, "Constant factor on rewards before GAE (logged returns stay raw).",
                                 _range(0.0, lo_open=True))
    rpo_alpha: float = _field(0.0, "RPO (Rahman and Xue 2022): uniform noise U(-alpha, alpha) on the Gaussian's "
                                   "pre-squash mean in the update, not in the rollout (Box actions; 0 = off; "
                                   "CleanRL uses 0.5).", _range(0.0))
    desired_kl: float | None = _field(None, "KL-adaptive learning rate (rsl_rl's rule, per minibatch): divide by 1.5 "
                                            "when approx_kl > 2x this, multiply by 1.5 below half, within [1e-5, "
                                            "1e-2] (absent = a fixed or annealed rate).", _range(0.0, lo_open=True))
    value_norm: bool = _field(False, "Train the critic on returns normalised by their running mean and std and "
                                     "rescale its outputs (MAPPO's ValueNorm; saved in checkpoints).")
    symmetry: str | None = _field(None, "Symmetry augmentation (as rsl_rl's): \"module:function\" mapping a "
                                        "minibatch's (obs, raw_actions, action_mask) to their mirror images; each row "
                                        "of every minibatch is replaced by its image with probability 1/2, its old "
                                        "log-prob, value and advantage kept; a function with a keyword generator "
                                        "gets the run's, to draw each row's image from several (absent = off).",
                            _import_name)


@_section("run")
class RunConfig:
    """Seeds, length, device and evaluation."""

    seed: int = _field(0, "Seed of the run: every stream (each sub-env, evaluation episode and rank) is derived "
                          "from it by run.seed_scheme.", _range(0))
    seed_scheme: str = _field("spawn", "'spawn': each stream from its own SeedSequence child, so runs of different "
                                       "seeds share none; 'offset': sub-env i gets seed + i (runs written before "
                                       "the scheme existed, which resume and evaluate with it).",
                              _one_of("spawn", "offset"))
    total_timesteps: int = _field(100_000, "Env steps over all envs; rounds up to whole rollouts.", _range(1))
    device: str = _field("auto", "'cpu', 'cuda' or 'auto' (cuda when available).", _one_of("cpu", "cuda", "auto"))
    eval_episodes: int = _field(20, "Deterministic evaluation episodes at each evaluation (0 = none); a turn-based "
                                    "game plays this many against each of eval_opponents.", _range(0))
    eval_max_episode_steps: int | None = _field(
        None, "Step cap of one evaluation episode, counted as truncated (absent = the env's time limit, else 10,000).",
        _range(1))
    eval_every: int = _field(0, "Evaluate (and checkpoint) every this many updates during training (0 = never); "
                                "the last update's is the final evaluation, in the summary.",
                             _range(0))
    eval_opponents: list[str] = _field(
        ["random"], "Turn-based games: who the policy plays in each seat at evaluation; \"random\" (uniform over "
        "legal moves) or a bot \"module:function\" taking (observation, action_mask) and returning an action. "
        "eval_return_mean is the mean score against the first, over both seats.", _opponents)
    eval_opening_moves: int = _field(
        0, "Turn-based games: each evaluation game opens with this many uniform-random legal moves (of either seat), "
           "drawn from a stream of the run's own, the same in every evaluation and against every opponent, so that a "
           "deterministic policy meets a deterministic bot in different games. 0 = none: such a pair plays one game "
           "however many it counts (eval_vs gives each seat's distinct games).", _range(0))
    exploitability: bool | None = _field(
        None, "OpenSpiel games: the policy's exact NashConv and exploitability (from its action probabilities at "
              "every information state) at every evaluation: metrics.csv columns, summary and eval.json fields. "
              "Absent = on for games of at most 200,000 information states (shell.games.exploitability."
              "MAX_INFORMATION_STATES); true = required (a larger game is refused); false = off.")
    checkpoint_every: int = _field(10, "Write a checkpoint every this many updates (0 = only at the end).",
                                   _range(0))
    keep_checkpoints: int = _field(3, "Keep this many most recent checkpoints, plus best.pt.", _range(1))
    compile: bool = _field(False, "torch.compile the update's minibatch loss (forward and backward) and gradient "
                                  "clip (CPU: needs a C++ compiler, else the run stays eager with one warning "
                                  "line). Recurrent policies stay eager. Per update 1.4-1.5x on the MuJoCo configs "
                                  "here, plus 20-60 s of compilation per process (bench/BENCHMARKS.md).")
    torch_threads: int = _field(1, "main.py's torch.set_num_threads (small MLPs are fastest with 1 per process); "
                                   "shell.train leaves threads to its caller.", _range(1))
    loggers: list[str] = _field(["tensorboard"], "Where each update's row goes besides metrics.csv (always "
                                "written): any of 'tensorboard', 'wandb', 'mlflow' (shell/tracking/; [] = none).",
                                _distinct)
    wandb: dict[str, Any] = _field(attrs.Factory(dict), "The [run.wandb] table: project, entity, group, tags, name, "
                                   "notes, mode (absent keys: W&B's own WANDB_* environment variables).")
    mlflow: dict[str, Any] = _field(attrs.Factory(dict), "The [run.mlflow] table: tracking_uri (absent: "
                                    "MLFLOW_TRACKING_URI, else sqlite in the run dir), experiment, run_name.")
    tracker_timeout: float = _field(30.0, "Seconds a tracker (wandb, mlflow) may take to open its run, for one "
                                          "request, and without progress at the end; past it the run goes on "
                                          "without it.",
                                    _range(0.0, lo_open=True))


@_section("selfplay")
class SelfPlayConfig:
    """Turn-based games: a learner against a pool of its past snapshots, uniform-random moves and/or bots (off with
    ``snapshot_every = 0``, ``random_prob = 0``, ``bot_prob = 0`` and ``opening_moves = 0``: one policy plays, and
    learns in, every seat)."""

    snapshot_every: int = _field(0, "Add the learner's policy to the pool every this many updates (0 = no pool: "
                                    "one policy plays every seat).", _range(0))
    pool_size: int = _field(8, "Snapshots kept in the pool (the oldest leaves first).", _range(1))
    latest_prob: float = _field(0.5, "The chance that a game's opponent is the current policy (learning in both "
                                     "seats) rather than a snapshot drawn uniformly from the pool.", _range(0.0, 1.0))
    random_prob: float = _field(0.0, "The chance that a game's opponent is uniform-random legal moves (the learner "
                                     "plays one seat), drawn before latest_prob; with snapshot_every = 0 the other "
                                     "games are plain self-play (0 = never).", _range(0.0, 1.0))
    opening_moves: int = _field(0, "The first this many moves of every training game are uniform-random legal "
                                   "moves that no seat learns from, so that the learner meets every opening "
                                   "(0 = none).", _range(0))
    vary_openings: bool = _field(False, "Each training game's random opening is 0 to opening_moves moves long, "
                                        "drawn uniformly per game, so that the learner also meets the positions "
                                        "before them (false: every opening is opening_moves long).")
    bots: list[str] = _field(attrs.Factory(list), "Distinct bots \"module:function\" (as run.eval_opponents takes "
                                                  "them: (observation, action_mask) -> action; \"random\": uniform "
                                                  "legal moves) that play some training games against the learner "
                                                  "(see bot_prob); not evaluation opponents.", _opponents)
    bot_prob: float = _field(0.0, "The chance that a game's opponent is one of bots, drawn uniformly (the learner "
                                  "plays one seat), drawn with random_prob: the two add up to at most 1 (0 = "
                                  "never).", _range(0.0, 1.0))

    def __attrs_post_init__(self) -> None:
        if self.random_prob + self.bot_prob > 1.0:
            raise ConfigError(f"selfplay.random_prob + selfplay.bot_prob = {self.random_prob + self.bot_prob:g}: "
                              "the chances of a game against random moves and against a bot add up to at most 1")
        if self.vary_openings and self.opening_moves == 0:
            raise ConfigError("selfplay.vary_openings = true draws each opening's length from 0 to "
                              "selfplay.opening_moves, which is 0: set opening_moves >= 1")
        if bool(self.bots) != (self.bot_prob > 0):
            raise ConfigError("selfplay.bots and selfplay.bot_prob go together: set both (bots = "
                              "[\"my_bots:greedy\"], bot_prob > 0) or neither")

    @property
    def enabled(self) -> bool:
        """Opponents other than the learner itself play some games: a pool of snapshots, uniform-random moves or
        bots."""
        return self.snapshot_every > 0 or self.random_prob > 0 or self.opening_moves > 0 or self.bot_prob > 0


SECTIONS: dict[str, type] = {"env": EnvConfig, "policy": PolicyConfig, "ppo": PPOConfig, "run": RunConfig,
                             "selfplay": SelfPlayConfig}

#: A file's section that is none of SECTIONS: read by ``main.py tune`` (shell/tune/); training ignores it.
TUNE_SECTION = "tune"


@attrs.frozen(kw_only=True)
class Config:
    """The whole run configuration, with derived sizes as properties."""

    env: EnvConfig = attrs.field(factory=EnvConfig)
    policy: PolicyConfig = attrs.field(factory=PolicyConfig)
    ppo: PPOConfig = attrs.field(factory=PPOConfig)
    run: RunConfig = attrs.field(factory=RunConfig)
    selfplay: SelfPlayConfig = attrs.field(factory=SelfPlayConfig)

    def __attrs_post_init__(self) -> None:
        if self.env.shares not in (None, 1) and self.env.vectorization_mode == "sync":  # "sync" is one share
            raise ConfigError(f"env.shares = {self.env.shares} applies to env.vectorization_mode = 'async' or "
                              "'threads'; set one, or set env.shares = 1 (one share: 'sync') or leave it out")
        if self.run.eval_every and not self.run.eval_episodes:
            raise ConfigError(f"run.eval_every = {self.run.eval_every} needs run.eval_episodes >= 1")
        if self.policy.recurrent != "none":
            seq_len = self.policy.seq_len or self.ppo.num_steps
            if self.ppo.num_steps % seq_len:
                raise ConfigError(f"policy.seq_len = {seq_len} does not divide ppo.num_steps = {self.ppo.num_steps}")
            sequences = self.env.num_envs * (self.ppo.num_steps // seq_len)
            if sequences % self.ppo.num_minibatches:
                raise ConfigError(
                    f"a recurrent rollout has env.num_envs * ppo.num_steps / policy.seq_len = {sequences} "
                    f"sequences, not divisible by ppo.num_minibatches = {self.ppo.num_minibatches}")
        if self.ppo.desired_kl is not None and self.ppo.anneal_lr:
            raise ConfigError(f"ppo.desired_kl = {self.ppo.desired_kl} sets the learning rate from the KL; it cannot "
                              "be combined with ppo.anneal_lr = true")
        if self.run.exploitability and self.env.backend != "openspiel":
            raise ConfigError(f"run.exploitability = true measures an OpenSpiel game (env.backend = 'openspiel'); "
                              f"{self.env.id!r} is on env.backend = {self.env.backend!r}")
        if self.run.exploitability and self.policy.recurrent != "none":
            raise ConfigError("run.exploitability = true reads the policy at each information state alone; a "
                              f"recurrent policy (policy.recurrent = {self.policy.recurrent!r}) is not served")
        if self.ppo.magnet_coef and self.policy.recurrent != "none":
            raise ConfigError(f"ppo.magnet_coef = {self.ppo.magnet_coef} compares the policy with its magnet state by "
                              f"state; a recurrent policy (policy.recurrent = {self.policy.recurrent!r}) is not "
                              "served: leave one out")
        if self.ppo.magnet_every and not self.ppo.magnet_coef:
            raise ConfigError(f"ppo.magnet_every = {self.ppo.magnet_every} refreshes a magnet that ppo.magnet_coef = "
                              "0 leaves out: set magnet_coef > 0, or leave magnet_every out")
        if self.ppo.symmetry is not None and self.policy.recurrent != "none":
            raise ConfigError(f"ppo.symmetry = {self.ppo.symmetry!r} mirrors single steps; a recurrent policy "
                              f"(policy.recurrent = {self.policy.recurrent!r}) trains on sequences: leave one out")
        if self.ppo.symmetry is not None and self.env.normalize_obs:
            raise ConfigError(f"ppo.symmetry = {self.ppo.symmetry!r} mirrors the observations the policy reads, and "
                              "the mirror of a normalised observation is not the normalised mirror: set "
                              "env.normalize_obs = false")
        if self.policy.critic_keys is not None and (self.policy.share_encoder or self.policy.share_rnn):
            shared = "share_encoder" if self.policy.share_encoder else "share_rnn"
            raise ConfigError(f"policy.critic_keys = {self.policy.critic_keys!r} gives the critic inputs the actor "
                              f"does not see, so actor and critic cannot share one encoder; leave policy.{shared} "
                              "out or set it to false")
        if self.batch_size % self.ppo.num_minibatches:
            raise ConfigError(
                f"env.num_envs * ppo.num_steps = {self.batch_size} is not divisible by "
                f"ppo.num_minibatches = {self.ppo.num_minibatches}"
            )

    @property
    def batch_size(self) -> int:
        """Transitions per rollout: ``num_steps * num_envs``."""
        return self.ppo.num_steps * self.env.num_envs

    def num_updates(self, world_size: int = 1) -> int:
        """Updates that reach ``run.total_timesteps`` over ``world_size`` processes (whole rollouts: the
        total rounds up)."""
        return -(-self.run.total_timesteps // (self.batch_size * world_size))

    def to_dict(self) -> dict[str, dict[str, Any]]:
        return {name: attrs.asdict(getattr(self, name)) for name in SECTIONS}
