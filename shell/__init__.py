"""The stateful half: config, envs, networks, storage, the PPO update, the runner, and the Python API.

``shell.train``, ``shell.resume``, ``shell.evaluate``, ``shell.play``, ``shell.StopOnReward``, ``shell.TrainResult``
(shell/api.py) and ``shell.load_policy`` and ``shell.Policy`` (shell/inference.py) are the entry points for your
own programs.
Importing it registers ``CartPoleNoVel-v1`` and ``PendulumNoVel-v1`` (shell/envs/pomdp.py) and ``Platform-v0``
(shell/envs/platform.py) with gymnasium.
"""

from typing import Any

from shell.envs.platform import register as _register_platform
from shell.envs.pomdp import register as _register_pomdp

_register_pomdp()
_register_platform()

_API = {"train": "shell.api", "resume": "shell.api", "evaluate": "shell.api", "play": "shell.api",
        "StopOnReward": "shell.api", "TrainResult": "shell.api",
        "load_policy": "shell.inference", "Policy": "shell.inference", "CallbackContext": "shell.callbacks"}
__all__ = sorted(_API)


def __getattr__(name: str) -> Any:
    """The API's names, imported on first use (``import shell.errors`` stays free of torch)."""
    if name in _API:
        import importlib

        return getattr(importlib.import_module(_API[name]), name)
    raise AttributeError(f"module 'shell' has no attribute {name!r}")
