"""The env layer: one interface (:mod:`shell.envs.base`), one module per backend (gymnasium, torch_native,
ale, envpool, pettingzoo), and a registry that maps ``env.backend`` names to them (:mod:`shell.envs.registry`).

This ``__init__`` only re-exports the names other code imports from ``shell.envs``; modules of the
package import their siblings directly.
"""

from shell.envs.base import LaneEnv, LaneSpec, OneLane, Rows, StepResult, VecEnv, check_action_space
from shell.envs.gymnasium import (
    GymVecEnv,
    atari_wrappers,
    autoreset_mode,
    import_object,
    sub_env_wrappers,
    user_wrappers,
    vec_from_factory,
)
from shell.envs.registry import (
    BACKENDS,
    backend,
    check_config,
    check_eval_env,
    env_package_versions,
    eval_env_config,
    factory_backend,
    make_env,
    make_game,
    make_lanes,
)

__all__ = ["BACKENDS", "GymVecEnv", "LaneEnv", "LaneSpec", "OneLane", "Rows", "StepResult", "VecEnv",
           "atari_wrappers", "autoreset_mode", "backend", "check_action_space", "check_config", "check_eval_env",
           "env_package_versions", "eval_env_config", "factory_backend", "import_object", "make_env", "make_game",
           "make_lanes", "sub_env_wrappers", "user_wrappers", "vec_from_factory"]
