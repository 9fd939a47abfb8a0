"""Export a checkpoint's deterministic policy as one self-contained file: ONNX, or a ``torch.export`` program.

The exported function is :class:`shell.inference.Policy` without this library: raw observations
``[B, ...]`` in, env actions ``[B, ...]`` out, with everything in between baked in: the frozen
observation-normalisation statistics, the encoder, the actor head, and the squash onto the Box
(fixed components held, an integer Box rounded) or the argmax, then the env boundary's clip and
cast to the action space's dtype (:func:`shell.actions.to_env_action`). The batch dimension is
dynamic (``B >= 1``).

Inputs, one per observation part, in the order of the observation space's keys (for a Dict,
gymnasium sorts its keys unless it was built from an OrderedDict; ``ExportResult.input_names``
and the file's metadata list them):

- a vector Box: ``[B, *space.shape]`` float32 (the observation as the env returns it, cast to
  float32), named ``obs`` (or the Dict key);
- a Discrete: ``[B]`` int64, the value as the env returns it (``start`` included);
- an image Box (rank 3): ``[B, *space.shape]`` in the space's dtype if uint8, else float32.

:func:`observation_inputs` turns a batch of env observations into these arrays.

Output ``action``: ``[B, *action_space.shape]`` in the action space's dtype (float32 for most Box
spaces, int64 for Discrete and MultiDiscrete by default), exactly what ``Policy`` returns: the
cast is part of the graph.

A Dict or Tuple action space gives one output per part instead of ``action``, named ``action.`` and
the part's name as :func:`shell.actions.action_parts` gives it (a Dict key, a Tuple index, nested names
joined by dots: ``action.kind``, ``action.1.md``; ``_out`` appended where an input has that name), each
``[B, *part.shape]`` in the part's dtype, in that order;
the metadata's ``output.outputs`` gives each one's ``path`` of keys and indices, which rebuilds the
structure (:func:`action_leaves` goes the other way).

A policy trained with action masks takes one more input after the observation parts (and before
a recurrent state): ``action_mask`` ``[B, A]`` bool, True where legal (Discrete ``A = n``,
MultiDiscrete the component masks concatenated, ``A = sum(nvec)``; MultiBinary ``A = n``, True where
the bit may be set). The exported argmax never chooses a masked action. MultiBinary actions come
out as ``[B, *shape]`` int8.

A recurrent policy (``policy.recurrent``) carries its state explicitly: two more inputs after the
observation parts (and the mask), ``state`` ``[B, S]`` float32 (zeros to start; ``S`` in the metadata) and
``episode_start`` ``[B]`` bool (true where the observation is the first of an episode: the state
restarts there), and a second output ``state_out`` ``[B, S]`` to feed back on the next step.

Right after writing, the file is loaded back (onnxruntime for ONNX, ``torch.export.load`` for pt2)
and run on observations sampled from the observation space, and on the same scaled by 10 (so Box
actions saturate), with random masks for a masked policy (at least one legal action per component;
every exported action must be legal); its actions must equal ``Policy``'s (discrete actions exactly, Box actions
within ``1e-5 * max(1, largest |bound|)``), else the file is removed and :class:`ExportError` is
raised.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
import tempfile
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

import gymnasium as gym
import numpy as np
import torch
from gymnasium import spaces
from torch import nn

from shell.actions import COMPOSITES, action_parts, action_width
from shell.envs.masks import MASK_KEY, component_sizes, has_mask_key, mask_size, without_mask_key
from shell.errors import ConfigError, ExportError, first_line, said
from shell.inference import Policy, load_agent, resolve_checkpoint
from shell.installation import install_hint
from shell.observations import ObsLayout, ObsPart, obs_layout
from shell.policies.encoders import uses_bfloat16

FORMATS = ("onnx", "pt2")
CHECK_SAMPLES = 32
CHECK_SCALE = 10.0
RTOL_BOX = 1e-5
RECURRENT_CHECK_STEPS = 5  # steps of the recurrent check, with the state fed back
ONNX_PACKAGES = ("onnx", "onnxscript", "onnxruntime")
METADATA_KEY = "ppo_core"
# torch's note on saving and loading the image encoders' channels_last weights (harmless on the CPU)
NO_COMPLETE_TENSOR = "No complete tensor found in the group"


class ExportResult(NamedTuple):
    """What :func:`export_policy` wrote.

    Attributes:
        path: the file.
        format: ``"onnx"`` or ``"pt2"``.
        input_names: the inputs in order (``["obs"]``, or the Dict keys).
        max_abs_diff: the largest ``|exported - Policy|`` over the check's actions (0.0 for discrete).
        checked_observations: how many observations the check ran.
    """

    path: Path
    format: str
    input_names: list[str]
    max_abs_diff: float
    checked_observations: int


def _input_dtype(part: ObsPart) -> np.dtype:
    if part.kind == "onehot":
        return np.dtype(np.int64)
    if part.kind == "image" and part.dtype == torch.uint8:
        return np.dtype(np.uint8)
    return np.dtype(np.float32)


def _torch_dtype(dtype: np.dtype) -> torch.dtype:
    return torch.from_numpy(np.zeros(0, dtype)).dtype


class DeterministicPolicy(nn.Module):
    """The traceable deterministic policy: raw observation parts -> env actions (what gets exported).

    ``forward(*inputs)`` takes one tensor per part of ``layout`` in its key order (see the module
    docstring for shapes and dtypes) and returns ``[B, *action_space.shape]`` in the action space's
    dtype, equal to :class:`shell.inference.Policy`'s output for the same observations.

    Args:
        agent: a loaded :class:`shell.policies.ActorCritic` (eval mode, on the CPU).
        observation_space: the env's observation space, as the policy sees it.
    """

    def __init__(self, agent: nn.Module, observation_space: gym.Space):
        super().__init__()
        self.agent = agent
        self.recurrent = agent.recurrent
        self.masked = agent.action_mask_source is not None
        self.mask_size = int(agent.mask_size) if self.masked else 0
        self.state_size = int(agent.initial_state(1, torch.device("cpu")).shape[1]) if self.recurrent else 0
        self.layout: ObsLayout = obs_layout(observation_space)
        self.action_space = agent.action_space
        #: the outputs' spaces: the action space itself (output ``action``), or a composite's parts (one output
        #: named after each part, in :func:`shell.actions.action_parts` order)
        self.leaves = export_leaves(self.action_space)
        self.composite = isinstance(self.action_space, COMPOSITES)
        self.widths = [action_width(space) for _, space in self.leaves]
        for i, (_, space) in enumerate(self.leaves):
            if isinstance(space, spaces.Box):
                # to_env_action clips a float32 action against bounds of the space's dtype in numpy's common dtype
                clip = np.result_type(np.float32, space.dtype)
                self.register_buffer(f"low_{i}", torch.as_tensor(np.asarray(space.low, clip)), persistent=False)
                self.register_buffer(f"high_{i}", torch.as_tensor(np.asarray(space.high, clip)), persistent=False)

    @property
    def input_names(self) -> list[str]:
        names = ["obs" if key is None else str(key) for key in self.layout.parts]
        if self.masked:
            names.append(MASK_KEY)
        return [*names, "state", "episode_start"] if self.recurrent else names

    @property
    def output_names(self) -> list[str]:
        names = [name for name, _ in self.leaves]
        taken = set(self.input_names)  # ONNX needs every name distinct: an observation key may be a part's too
        for i, name in enumerate(names):
            while name in taken:
                name += "_out"
            names[i] = name
            taken.add(name)
        return [*names, "state_out"] if self.recurrent else names

    def _part(self, x: torch.Tensor, part: ObsPart) -> torch.Tensor:
        """One raw input -> the tensor shell.observations.to_tensor gives."""
        if part.kind == "onehot":
            index = x.long() - int(part.space.start)
            return nn.functional.one_hot(index, part.shape[0]).to(torch.float32)
        if part.kind == "image":
            return x if part.dtype == torch.uint8 else x.to(torch.float32)
        return x.to(torch.float32).reshape(x.shape[0], part.shape[0])

    def forward(self, *inputs: torch.Tensor) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        parts = self.layout.parts
        if self.recurrent:
            inputs, (state, episode_start) = inputs[:-2], inputs[-2:]
        mask = None
        if self.masked:
            inputs, mask = inputs[:-1], inputs[-1].to(torch.bool)
        if self.layout.is_dict:
            obs: Any = {key: self._part(x, part) for (key, part), x in zip(parts.items(), inputs, strict=True)}
        else:
            obs = self._part(inputs[0], parts[None])
        if self.recurrent:
            action, state = self.agent.act_step(obs, state, episode_start.to(torch.bool), deterministic=True,
                                                action_mask=mask)
        else:
            action = self.agent.act(obs, deterministic=True, action_mask=mask)
        columns = action.split(self.widths, dim=-1) if self.composite else [action]
        out = tuple(self._leaf(column, i) for i, column in enumerate(columns))
        if self.recurrent:
            return (*out, state)
        return out if self.composite else out[0]

    def _leaf(self, action: torch.Tensor, i: int) -> torch.Tensor:
        """One output: shell.actions.to_env_action of its part (a composite's float columns rounded to indices)."""
        space = self.leaves[i][1]
        out_dtype = _torch_dtype(space.dtype)
        if isinstance(space, spaces.Box):  # reshape, clip in the common dtype, cast
            low, high = getattr(self, f"low_{i}"), getattr(self, f"high_{i}")
            action = action.reshape(action.shape[0], *space.shape).to(low.dtype)
            return torch.minimum(torch.maximum(action, low), high).to(out_dtype)
        if self.composite:  # a Discrete part's index is one float column
            action = action.round().to(torch.long)
            action = action[:, 0] if isinstance(space, spaces.Discrete) else action
        if isinstance(space, spaces.MultiBinary):
            action = action.reshape(action.shape[0], *space.shape)
        return action.to(out_dtype)


def export_leaves(space: gym.Space) -> list[tuple[str, gym.Space]]:
    """The exported outputs' names and spaces: ``[("action", space)]``, or for a Dict or Tuple action space one
    per part, named ``action.`` and the part's name (:func:`shell.actions.action_parts`: ``"action.kind"``,
    ``"action.0"``, ``"action.move.x"``)."""
    if isinstance(space, COMPOSITES):
        return [(f"action.{part.name}", part.space) for part in action_parts(space)]
    return [("action", space)]


def action_leaves(action: Any, space: gym.Space) -> list[np.ndarray]:
    """An env action (a batch), as :class:`shell.inference.Policy` returns it, as the exported outputs' list:
    ``[action]``, or a composite's parts in :func:`export_leaves` order."""
    if not isinstance(space, COMPOSITES):
        return [np.asarray(action)]
    return [np.asarray(_at(action, part.path)) for part in action_parts(space)]


def _at(action: Any, path: tuple) -> Any:
    for key in path:
        action = action[key]
    return action


def observation_inputs(obs: Any, observation_space: gym.Space, mask_key: bool = True) -> list[np.ndarray]:
    """A batch of env observations ``[B, ...]`` (a dict of them for Dict spaces) -> the exported
    function's inputs, in order, with the dtypes of the module docstring.

    A Dict space with an ``"action_mask"`` key (PettingZoo's classic games, whose observation is
    ``{"observation": ..., "action_mask": [B, A] int8}``) is the env's space of a policy that reads its masks
    from that key: the other keys give the observation inputs and the key gives the ``action_mask`` input,
    last, ``[B, A]`` bool. So the env's observation as it comes is the whole input list. With
    ``mask_key=False`` the key is an observation part like any other (a policy trained without masks, with
    ``action_mask = "none"`` in the config's ``[env]``, for which it is part of the observation).

    Raises:
        ConfigError: an observation space the policies cannot serve (shell.observations.obs_layout).
        MaskError: the space holds only ``"action_mask"``.
    """
    mask = mask_key and has_mask_key(observation_space)
    layout = obs_layout(without_mask_key(observation_space) if mask else observation_space)
    out = []
    for key, part in layout.parts.items():
        value = np.asarray(obs if key is None else obs[key])
        out.append(np.ascontiguousarray(value, dtype=_input_dtype(part)))
    if mask:
        out.append(np.ascontiguousarray(np.asarray(obs[MASK_KEY]), dtype=bool))
    return out


def _check_observations(observation_space: gym.Space, n: int, seed: int = 0) -> Any:
    """``n`` observations sampled from the space, then the same with their float vector parts
    scaled by :data:`CHECK_SCALE` (``2n`` in all), batched like a vector env's."""
    space = observation_space
    space.seed(seed)
    samples = [space.sample() for _ in range(n)]
    layout = obs_layout(space)

    def stack(key: str | None) -> np.ndarray:
        return np.stack([np.asarray(s if key is None else s[key]) for s in samples])

    def scaled(value: np.ndarray, part: ObsPart) -> np.ndarray:
        if part.kind == "flat" and value.dtype.kind == "f":
            return np.concatenate([value, value * CHECK_SCALE])
        return np.concatenate([value, value])

    if layout.is_dict:
        return {key: scaled(stack(key), part) for key, part in layout.parts.items()}
    return scaled(stack(None), layout.parts[None])


def check_masks(action_space: gym.Space, n: int, seed: int = 0) -> np.ndarray:
    """``[n, A]`` random bool masks for the check: each entry legal with probability 1/2, at least one legal
    action per component (row 0 is all true)."""
    rng = np.random.default_rng(seed)
    size = mask_size(action_space)
    mask = rng.random((n, size)) < 0.5
    mask[0] = True
    start = 0
    for k in component_sizes(action_space):
        block = mask[:, start:start + k]
        block[np.arange(n), rng.integers(0, k, n)] |= ~block.any(axis=1)
        start += k
    return mask


def _require_onnx() -> None:
    missing = []
    for name in ONNX_PACKAGES:
        try:
            __import__(name)
        except ImportError:
            missing.append(name)
    if missing:
        raise ConfigError(f"{said('format', 'onnx')} needs {', '.join(missing)}; run: {install_hint('export')}")


def _example(module: DeterministicPolicy, observation_space: gym.Space) -> tuple[torch.Tensor, ...]:
    example = tuple(torch.from_numpy(x[:2]) for x in observation_inputs(_check_observations(observation_space, 2),
                                                                       observation_space, mask_key=False))
    if module.masked:
        example += (torch.from_numpy(check_masks(module.action_space, 2)),)
    if module.recurrent:
        example += (torch.zeros(2, module.state_size), torch.ones(2, dtype=torch.bool))
    return example


def _dynamic_shapes(module: DeterministicPolicy) -> tuple[tuple[dict[int, Any], ...]]:
    """Every input's dim 0 is the one dynamic batch (grouped as the signature's ``*inputs``)."""
    batch = torch.export.Dim("batch", min=1, max=2**20)
    return (tuple({0: batch} for _ in module.input_names),)


_ONNX_REGISTRATION_LOGGER = "torch.onnx._internal.exporter._registration"


@contextlib.contextmanager
def _quiet(name: str):
    logger = logging.getLogger(name)
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def _write_onnx(module: DeterministicPolicy, example: tuple, path: Path, metadata: dict[str, Any]) -> None:
    import onnx

    try:
        # the exporter prints its progress on stdout, which belongs to the CLI's JSON line; its notes on
        # torchvision's operators and a pytree deprecation inside torch are noise for this model
        with contextlib.redirect_stdout(sys.stderr), warnings.catch_warnings(), _quiet(_ONNX_REGISTRATION_LOGGER):
            warnings.simplefilter("ignore", FutureWarning)
            warnings.filterwarnings("ignore", message=".*will not be used, since it shares the same shape")
            program = torch.onnx.export(module, example, dynamo=True, input_names=module.input_names,
                                        output_names=module.output_names, dynamic_shapes=_dynamic_shapes(module),
                                        external_data=False, optimize=True, verbose=False)
    except Exception as exc:
        raise ExportError(f"torch.onnx.export failed: {first_line(exc, with_type=True)}") from exc
    model = program.model_proto
    onnx.helper.set_model_props(model, {METADATA_KEY: json.dumps(metadata)})
    onnx.save_model(model, str(path))


def _write_pt2(module: DeterministicPolicy, example: tuple, path: Path, metadata: dict[str, Any]) -> None:
    try:
        program = torch.export.export(module, example, dynamic_shapes=_dynamic_shapes(module))
    except Exception as exc:
        raise ExportError(f"torch.export.export failed: {first_line(exc, with_type=True)}") from exc
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=NO_COMPLETE_TENSOR)
        torch.export.save(program, str(path), extra_files={f"{METADATA_KEY}.json": json.dumps(metadata)})


def load_exported(path: str | Path, format: str):
    """A callable ``(*inputs: np.ndarray) -> np.ndarray`` for an exported file (the check uses it);
    for a recurrent policy it returns ``(action, state_out)``, for a composite action space a tuple of the
    parts (then ``state_out``).

    ONNX runs through an onnxruntime ``InferenceSession`` on the CPU; pt2 through
    ``torch.export.load(path).module()``.
    """
    if format == "onnx":
        import onnxruntime

        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        session = onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        names = [i.name for i in session.get_inputs()]

        def run_onnx(*inputs: np.ndarray) -> Any:
            outputs = session.run(None, dict(zip(names, inputs, strict=True)))
            return outputs[0] if len(outputs) == 1 else tuple(outputs)

        return run_onnx
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=NO_COMPLETE_TENSOR)
        program = torch.export.load(str(path)).module()

    def run(*inputs: np.ndarray) -> Any:
        with torch.inference_mode():
            out = program(*(torch.from_numpy(x) for x in inputs))
        return tuple(x.numpy() for x in out) if isinstance(out, tuple | list) else out.numpy()

    return run


def check_exported(run: Any, policy: Policy, obs: Any, observation_space: gym.Space,
                   masks: np.ndarray | None = None) -> float:
    """Compare an exported function with ``policy`` on a batch of observations ``obs`` (and ``masks``
    ``[B, A]`` bool for a masked policy).

    Returns:
        The largest absolute difference of the actions (0.0 for discrete actions).

    Raises:
        ExportError: a different shape or dtype, a discrete action that differs, a Box action
            further than ``1e-5 * max(1, largest |bound|)`` from the policy's, or a masked action.
    """
    expected = policy(obs, action_mask=masks)
    inputs = observation_inputs(obs, observation_space, mask_key=False)
    got = _outputs(run(*inputs, *([] if masks is None else [masks])))
    _check_legal(got, masks, policy.action_space)
    return _compare(got, action_leaves(expected, policy.action_space), policy)


def _outputs(out: Any) -> list[np.ndarray]:
    """The exported function's outputs as a list of arrays (one output, or a composite's parts)."""
    return [np.asarray(x) for x in out] if isinstance(out, tuple | list) else [np.asarray(out)]


def _check_legal(actions: list[np.ndarray], masks: np.ndarray | None, space: gym.Space) -> None:
    """Raise ExportError if an exported action (the outputs, :func:`export_leaves`) is one its mask forbids."""
    if masks is None:
        return
    n = len(actions[0])
    if isinstance(space, spaces.MultiBinary):
        bad = (actions[0].reshape(n, -1).astype(bool) & ~masks).any(axis=1)
    else:  # the masked parts' indices side by side (a composite's Discrete and MultiDiscrete parts)
        leaves = [(a, s) for a, (_, s) in zip(actions, export_leaves(space), strict=True) if component_sizes(s)]
        index = np.concatenate([(a.reshape(n, -1) - np.asarray(s.start).reshape(1, -1)).astype(np.int64)
                                for a, s in leaves], axis=1)
        offsets = np.concatenate([[0], np.cumsum(component_sizes(space))[:-1]]).astype(np.int64)
        bad = ~np.take_along_axis(masks, index + offsets, axis=1).all(axis=1)
    if bad.any():
        raise ExportError(f"the exported policy chose a masked action on {int(bad.sum())} of {n} observations")


def check_exported_recurrent(run: Any, policy: Policy, obs: Any, observation_space: gym.Space,
                             masks: np.ndarray | None = None, steps: int = RECURRENT_CHECK_STEPS) -> float:
    """:func:`check_exported` for a recurrent policy: ``steps`` steps on the batch ``obs`` (rolled by
    one row per step, so every step differs), the exported state fed back each step, the episode
    restarting in every third row at step 2. Returns the largest absolute difference."""
    policy.reset()
    n = len(next(iter(obs.values())) if isinstance(obs, dict) else obs)
    state = np.zeros((n, policy.agent.initial_state(1).shape[1]), np.float32)
    worst = 0.0
    for t in range(steps):
        obs_t = {k: np.roll(v, t, axis=0) for k, v in obs.items()} if isinstance(obs, dict) else np.roll(obs, t, 0)
        start = np.zeros(n, bool) if t else np.ones(n, bool)
        if t == 2:
            start[::3] = True
        mask_t = None if masks is None else np.roll(masks, 2 * t, 0)
        expected = policy(obs_t, episode_start=start, action_mask=mask_t)
        inputs = observation_inputs(obs_t, observation_space, mask_key=False)
        *got, state = _outputs(run(*inputs, *([] if mask_t is None else [mask_t]), state, start))
        _check_legal(got, mask_t, policy.action_space)
        worst = max(worst, _compare(got, action_leaves(expected, policy.action_space), policy))
    return worst


def _compare(got: list[np.ndarray], expected: list[np.ndarray], policy: Policy) -> float:
    """The largest ``|got - expected|`` over the outputs (:func:`export_leaves`); raises ExportError past the
    tolerance (see check_exported)."""
    worst = 0.0
    for (name, space), g, e in zip(export_leaves(policy.action_space), got, expected, strict=True):
        which = "" if name == "action" else f" part {name!r}:"
        if g.shape != e.shape or g.dtype != e.dtype:
            raise ExportError(f"the exported policy returns{which} {g.dtype}{list(g.shape)}, the policy "
                              f"{e.dtype}{list(e.shape)}")
        diff = np.abs(g.astype(np.float64) - e.astype(np.float64))
        part = float(diff.max()) if diff.size else 0.0
        if isinstance(space, spaces.Box) and space.dtype.kind == "f":
            bound = float(np.max(np.abs(np.concatenate([space.low.ravel(), space.high.ravel()]))))
            tol = RTOL_BOX * max(1.0, bound)
        else:
            tol = 0.0
        if not part <= tol:  # also catches NaN
            rows = int((diff.reshape(len(diff), -1) > tol).any(axis=1).sum())
            raise ExportError(f"the exported policy differs from the checkpoint's{which} on {rows} of {len(diff)} "
                              f"observations (max |difference| {part:.3g}, allowed {tol:.3g})")
        worst = max(worst, part)
    return worst


def export_policy(target: str | Path, format: str = "onnx", out: str | Path | None = None,
                  env: Any = None, group: str | None = None) -> ExportResult:
    """Export the deterministic policy of a checkpoint (or of a run dir's newest one) to one file.

    See the module docstring for the exported function's inputs and output. The policy is exported
    on the CPU, with a dynamic batch dimension, and checked against :class:`shell.inference.Policy`
    before the file is put in place (it is written to a temporary file in the same folder and
    renamed, so ``out`` is never a half-written or unchecked file).

    Args:
        target: a run dir or a checkpoint file.
        format: ``"onnx"`` (through ``torch.onnx.export``, the dynamo-based exporter; needs the
            ``export`` extra) or ``"pt2"`` (``torch.export.export`` + ``torch.export.save``; load it
            with ``torch.export.load(path).module()``).
        out: the file to write; default: beside the checkpoint, named after it with the
            format's suffix (``checkpoints/ckpt_000000065536.onnx``).
        env: not needed: the checkpoint stores the spaces, and the check samples observations from
            them. Only a checkpoint written before the spaces were stored, of a run trained from an
            env factory (or a vector env), needs that env again for its spaces.
        group: a multi-agent run with several groups of agents has a policy per group: the one to
            export (default file ``ckpt_000000065536.<group>.onnx``); :func:`export_lanes` writes each.
            Its inputs are one agent's observation as the trainer saw it (shell/envs/pettingzoo/rows.py);
            a centralised critic's ``critic`` input is not read by the actor (pass zeros).

    Returns:
        ExportResult: the written file, its format, its input names and the parity check's result.

    Raises:
        ConfigError: an unknown format, a missing ``export`` extra (with the pip command), a bad
            target (no run dir or checkpoint, a corrupt checkpoint), an ``out`` that cannot be
            written, or a ``group`` the run does not have (or none named for a run with several).
        ExportError: the exporter failed, or the written file does not act as the policy does.
    """
    checkpoint, lanes, config, state = _load_lanes(target, format, env)
    if group not in lanes:
        if len(lanes) == 1:
            raise ConfigError(f"group={group!r}: the run has one policy; export it without a group")
        unknown = "" if group is None else f"; {group!r} is none of them"
        raise ConfigError(f"the run has a policy per group of agents {list(lanes)}: name one to export (group=...), "
                          f"or export each with export_lanes{unknown}")
    return _export_lane(lanes[group], group, checkpoint, config, state, format, out)


def export_lanes(target: str | Path, format: str = "onnx", out: str | Path | None = None,
                 env: Any = None) -> dict[str | None, ExportResult]:
    """:func:`export_policy` of every lane's policy, from one load of the checkpoint: ``{None: result}`` for a
    run of one policy (``out`` or ``ckpt_<steps>.<format>``), ``{group: result}`` for a multi-agent run with a
    policy per group of agents (each ``ckpt_<steps>.<group>.<format>`` beside the checkpoint).

    Raises:
        ConfigError: as :func:`export_policy`; ``out`` for a run of several policies (it names one file).
        ExportError: as :func:`export_policy`.
    """
    checkpoint, lanes, config, state = _load_lanes(target, format, env)
    if out is not None and len(lanes) > 1:
        raise ConfigError(f"{said('out')} names one file; a run with a policy per group of agents writes one per "
                          "group beside the checkpoint (ckpt_<steps>.<group>.<format>)")
    return {name: _export_lane(agent, name, checkpoint, config, state, format, out) for name, agent in lanes.items()}


def _load_lanes(target: str | Path, format: str, env: Any) -> tuple[Path, dict[str | None, Any], Any, dict]:
    """Check the format, load the checkpoint once: ``(checkpoint, {lane: policy}, config, state)``."""
    if format not in FORMATS:
        raise ConfigError(f"unknown export format {format!r}; choose one of {list(FORMATS)}")
    if format == "onnx":
        _require_onnx()
    checkpoint = resolve_checkpoint(target)
    agent, config, state = load_agent(checkpoint, "cpu", env)
    return checkpoint, agent.lanes(), config, state


def _export_lane(agent: Any, group: str | None, checkpoint: Path, config: Any, state: dict[str, Any], format: str,
                 out: str | Path | None) -> ExportResult:
    """Write and check one lane's policy (see :func:`export_policy`)."""
    suffix = f".{format}" if group is None else f".{group}.{format}"
    observation_space = agent.actor_observation_space  # policy.critic_keys are the critic's only: not an input
    policy = Policy(agent, observation_space)
    precision = config.policy.cnn_precision
    if format == "onnx" and uses_bfloat16(precision, torch.device("cpu")) and any(
            part.kind == "image" for part in obs_layout(observation_space).parts.values()):
        raise ConfigError(f"policy.cnn_precision = {precision!r} computes in bfloat16 on this CPU: onnxruntime "
                          f"has no bfloat16 convolutions on the CPU; export with {said('format', 'pt2')}")
    path = Path(out) if out is not None else checkpoint.with_suffix(suffix)
    if path.is_dir():
        raise ConfigError(f"{said('out', path)} is a folder; name the file to write")
    module = DeterministicPolicy(agent, observation_space).eval()
    space = policy.action_space
    metadata = {
        "env_id": state["config"]["env"]["id"],
        "checkpoint": str(checkpoint),
        "env_steps": state.get("env_steps"),
        "inputs": [{"name": name, "shape": ["batch", *part.space.shape], "dtype": str(_input_dtype(part))}
                   for name, part in zip(module.input_names, module.layout.parts.values(), strict=False)],
        "output": {"action_space": str(space), "action_links": config.policy.action_links, "outputs": [
            {"name": name, "path": list(part.path), "shape": ["batch", *part.space.shape],
             "dtype": str(part.space.dtype)} for name, part in zip(module.output_names, action_parts(space),
                                                                   strict=False)]} if module.composite  # "path":
        else {"name": "action", "shape": ["batch", *space.shape], "dtype": str(space.dtype),  # the structure
              "action_space": str(space)},
    }
    if module.masked:
        metadata["inputs"].append({"name": MASK_KEY, "shape": ["batch", module.mask_size], "dtype": "bool",
                                   "source": agent.action_mask_source})
    if module.recurrent:
        metadata["inputs"] += [{"name": "state", "shape": ["batch", module.state_size], "dtype": "float32"},
                               {"name": "episode_start", "shape": ["batch"], "dtype": "bool"}]
        metadata["state_out"] = {"name": "state_out", "shape": ["batch", module.state_size], "dtype": "float32"}
    example = _example(module, observation_space)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        # the temporary name keeps the suffix: torch.export.save and load insist on ".pt2"
        fd, name = tempfile.mkstemp(prefix=f".{path.stem}.tmp", suffix=f".{format}", dir=path.parent)
        os.close(fd)
    except OSError as exc:
        raise ConfigError(f"cannot write {path}: {exc.strerror}") from None
    tmp = Path(name)
    try:
        (_write_onnx if format == "onnx" else _write_pt2)(module, example, tmp, metadata)
        run = load_exported(tmp, format)
        obs = _check_observations(observation_space, CHECK_SAMPLES)
        single = {k: v[:1] for k, v in obs.items()} if isinstance(obs, dict) else obs[:1]
        masks = check_masks(space, 2 * CHECK_SAMPLES) if module.masked else None
        check = check_exported_recurrent if module.recurrent else check_exported
        worst = check(run, policy, obs, observation_space, masks)
        worst = max(worst, check(run, policy, single, observation_space,
                                 None if masks is None else masks[1:2]))  # a batch of one
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    checked = (2 * CHECK_SAMPLES + 1) * (RECURRENT_CHECK_STEPS if module.recurrent else 1)
    return ExportResult(path, format, module.input_names, worst, checked)


def export_summary(result: ExportResult) -> dict[str, Any]:
    """The ``export`` command's JSON line."""
    return {"export": str(result.path), "format": result.format, "inputs": result.input_names,
            "checked_observations": result.checked_observations, "checked_max_abs_diff": result.max_abs_diff}


__all__: Sequence[str] = ["DeterministicPolicy", "ExportResult", "action_leaves", "check_exported",
                          "check_exported_recurrent", "export_lanes", "export_leaves", "export_policy", "load_exported",
                          "observation_inputs"]
