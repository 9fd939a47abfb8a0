"""Atomic checkpoint files, loaded with ``weights_only=True`` so they cannot run code, and the plain-data
form in which they hold the env's spaces (:func:`space_to_data`)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium import spaces

from shell.errors import ConfigError
from shell.files import atomic_write

FORMAT_VERSION = 1
CHECKPOINT_SUFFIXES = (".pt", ".pth")  # a file with one of these that torch cannot load is a damaged checkpoint
# What a file that is not a checkpoint is, by its suffix (the files a run dir and its exports hold).
FILE_KINDS = {".toml": "a TOML file", ".csv": "a CSV file", ".json": "a JSON file", ".onnx": "an ONNX export",
              ".pt2": "a torch.export archive", ".png": "a PNG image", ".mp4": "a video", ".txt": "a text file"}


def save_checkpoint(path: Path, state: dict[str, Any], on_written: Callable[[], None] | None = None) -> Path:
    """Write ``state`` (plus the format version) to ``path`` atomically.

    The bytes go to a temporary file in the same folder, are fsynced, then
    renamed over ``path``: a reader sees the old file or the new one, never a
    partial one. ``on_written`` is called between the fsync and the rename (the
    fault-injection point of shell/faults.py).
    """
    return atomic_write(path, lambda f: torch.save({"format_version": FORMAT_VERSION, **state}, f), on_written)


def latest_checkpoint(folder: Path) -> Path:
    """The newest ``ckpt_*.pt`` in ``folder`` (names sort by env step).

    Raises:
        ConfigError: if there is none.
    """
    found = sorted(Path(folder).glob("ckpt_*.pt"))
    if not found:
        raise ConfigError(f"no checkpoint (ckpt_*.pt) in {folder}")
    return found[-1]


def load_checkpoint(path: Path, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    """Load a checkpoint written by :func:`save_checkpoint`.

    Raises:
        ConfigError: missing, truncated or corrupt file (a damaged ``.pt``), a file that is not a checkpoint
            (another suffix: a TOML, CSV, ... file; the message says what to give instead), or an unknown
            format version.
    """
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"checkpoint {path} not found")
    try:
        state = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as exc:
        if path.suffix.lower() not in CHECKPOINT_SUFFIXES:  # another file: say what it is and what is expected
            raise ConfigError(f"{path} is not a checkpoint ({_what_file(path)}); expected a run dir or a "
                              f"checkpoint file{_run_dir_hint(path)}") from None
        raise ConfigError(f"checkpoint {path} is truncated or corrupt ({type(exc).__name__})") from None
    if not isinstance(state, dict) or state.get("format_version") != FORMAT_VERSION:
        version = state.get("format_version") if isinstance(state, dict) else None
        raise ConfigError(f"checkpoint {path} has format version {version!r}; this library reads {FORMAT_VERSION}")
    return state


def space_to_data(space: gym.Space) -> dict[str, Any]:
    """A gymnasium space as plain data (dicts, lists, str, int, float, bool) that a checkpoint loaded
    with ``weights_only=True`` can hold; :func:`space_from_data` rebuilds the same space.

    - Box: ``shape``, ``dtype`` (numpy's name) and ``low`` / ``high``: one number where every bound
      is the same (inf included), else nested lists in the space's shape; exact for every dtype.
    - Discrete: ``n``, ``start``, ``dtype``. MultiDiscrete: ``nvec``, ``start`` (nested lists),
      ``dtype``. MultiBinary: ``n`` (an int or a list of ints).
    - Dict: ``spaces``, a list of ``[key, data]`` pairs in the space's key order (the policy's order).
      Tuple: ``spaces``, a list of data.

    Raises:
        ValueError: any other space (the policies serve no other).
    """
    kind = type(space).__name__
    if isinstance(space, spaces.Box):
        return {"type": "Box", "shape": list(space.shape), "dtype": space.dtype.name,
                "low": _bound_to_data(space.low), "high": _bound_to_data(space.high)}
    if isinstance(space, spaces.Discrete):
        return {"type": "Discrete", "n": int(space.n), "start": int(space.start), "dtype": space.dtype.name}
    if isinstance(space, spaces.MultiDiscrete):
        return {"type": "MultiDiscrete", "nvec": space.nvec.tolist(), "start": space.start.tolist(),
                "dtype": space.dtype.name}
    if isinstance(space, spaces.MultiBinary):
        return {"type": "MultiBinary", "n": np.asarray(space.n).tolist()}
    if isinstance(space, spaces.Dict):
        return {"type": "Dict", "spaces": [[key, space_to_data(sub)] for key, sub in space.spaces.items()]}
    if isinstance(space, spaces.Tuple):
        return {"type": "Tuple", "spaces": [space_to_data(sub) for sub in space.spaces]}
    raise ValueError(f"a checkpoint cannot store a {kind} space ({space}); it stores Box, Discrete, "
                     "MultiDiscrete, MultiBinary and Dict or Tuple of those")


def space_from_data(data: dict[str, Any]) -> gym.Space:
    """The space that :func:`space_to_data` wrote (same type, shape, dtype, bounds and key order).

    Raises:
        ValueError: data that no version of :func:`space_to_data` writes.
    """
    kind = data.get("type") if isinstance(data, dict) else None
    if kind == "Box":
        dtype, shape = np.dtype(data["dtype"]), tuple(data["shape"])
        low, high = (np.array(data[k], dtype=dtype) if isinstance(data[k], list) else np.full(shape, data[k], dtype)
                     for k in ("low", "high"))
        return spaces.Box(low, high, shape, dtype)
    if kind == "Discrete":
        dtype = {} if data["dtype"] == "int64" else {"dtype": data["dtype"]}  # gymnasium 1.0's Discrete has no dtype
        return spaces.Discrete(data["n"], start=data["start"], **dtype)
    if kind == "MultiDiscrete":
        dtype = np.dtype(data["dtype"])
        return spaces.MultiDiscrete(np.array(data["nvec"], dtype), dtype, start=np.array(data["start"], dtype))
    if kind == "MultiBinary":
        return spaces.MultiBinary(data["n"])
    if kind == "Dict":
        return spaces.Dict([(key, space_from_data(sub)) for key, sub in data["spaces"]])
    if kind == "Tuple":
        return spaces.Tuple([space_from_data(sub) for sub in data["spaces"]])
    raise ValueError(f"not a stored space: {data!r}")


def _bound_to_data(bound: np.ndarray) -> Any:
    """One number when every element is the same to the bit (as a float, down to the sign of a zero),
    else nested lists; ``tolist`` gives Python numbers that convert back to the dtype exactly."""
    first = bound.flat[0] if bound.size else None
    if first is not None and (bound == first).all() and (bound.dtype.kind != "f" or
                                                         (np.signbit(bound) == np.signbit(first)).all()):
        return first.item()
    return bound.tolist()


def _what_file(path: Path) -> str:
    """What a file torch cannot load is: by its suffix, else by its first bytes (torch.save writes a zip)."""
    if path.suffix.lower() in FILE_KINDS:
        return FILE_KINDS[path.suffix.lower()]
    try:
        with open(path, "rb") as f:
            head = f.read(4)
    except OSError as exc:
        return f"unreadable: {exc.strerror}"
    return "an empty file" if not head else "a zip file torch cannot load" if head == b"PK\x03\x04" \
        else "not a torch zip file"


def _run_dir_hint(path: Path) -> str:
    """The checkpoint files' pattern, with the run dir ``path`` sits in when it is one."""
    for folder in (path.parent, path.parent.parent):
        if (folder / "checkpoints").is_dir():
            return f" (RUN_DIR/checkpoints/ckpt_*.pt), e.g. {folder}"
    return " (RUN_DIR/checkpoints/ckpt_*.pt)"
