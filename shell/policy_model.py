"""The trained policy as an MLflow pyfunc model ("models from code": MLflow copies this file into the
model and runs it on ``mlflow.pyfunc.load_model``; shell/tracking/mlflow_tracker.py saves it).

    model = mlflow.pyfunc.load_model(f"runs:/{run_id}/policy")
    actions = model.predict(obs)          # == shell.load_policy(run_dir).act(obs)

``predict`` takes a batch of observations as the env gives them (a numpy array ``[B, ...]``, or a dict
of arrays for a Dict space) and returns the deterministic actions as numpy (``[B, A]`` float for Box
actions, ``[B]`` int64 for Discrete). A policy trained with invalid-action masks takes its masks in the
input too: ``{"obs": obs [B, ...], "action_mask": mask [B, n] bool}``, or for a Dict space the dict of
its arrays with an ``"action_mask"`` key added (as the obs convention puts it there);
``model.predict(obs)`` without one raises ValueError, as ``load_policy`` does. The model's one artifact
is the checkpoint; this package must be installed where it is loaded.
Recurrent policies start from a zero state on every call.
"""

from __future__ import annotations

from typing import Any

import mlflow.models
import mlflow.pyfunc
import numpy as np

from shell.envs.masks import MASK_KEY
from shell.inference import load_policy


class PolicyModel(mlflow.pyfunc.PythonModel):
    """``predict(obs) -> load_policy(checkpoint).act(obs)``."""

    _skip_type_hint_validation = True  # MLflow's schema check: inputs are arrays or dicts of arrays, not list[...]

    def load_context(self, context: Any) -> None:
        self.policy = load_policy(context.artifacts["checkpoint"])

    def predict(self, context: Any, model_input: Any, params: Any = None) -> Any:
        if not isinstance(model_input, dict):
            return self.policy.act(np.asarray(model_input))
        arrays = {k: np.asarray(v) for k, v in model_input.items()}
        if set(arrays) <= {"obs", MASK_KEY} and "obs" in arrays:  # an array observation with its mask
            return self.policy.act(arrays["obs"], action_mask=arrays.get(MASK_KEY))
        return self.policy.act(arrays)  # a Dict observation; a mask under "action_mask" is read from it


mlflow.models.set_model(PolicyModel())
