"""The trained policy as an MLflow pyfunc model ("models from code": MLflow copies this file into the
model and runs it on ``mlflow.pyfunc.load_model``; shell/tracking/mlflow_tracker.py saves it).

    model = mlflow.pyfunc.load_model(f"runs:/{run_id}/policy")
    actions = model.predict(obs)          # == shell.load_policy(run_dir).act(obs)

``predict`` takes a batch of observations as the env gives them (a numpy array ``[B, ...]``, or a dict
of arrays for a Dict space) and returns the deterministic actions as numpy (``[B, A]`` float for Box
actions, ``[B]`` int64 for Discrete). The model's one artifact is the checkpoint; this package must be
installed where it is loaded. Recurrent policies start from a zero state on every call.
"""

from __future__ import annotations

from typing import Any

import mlflow.models
import mlflow.pyfunc
import numpy as np

from shell.inference import load_policy


class PolicyModel(mlflow.pyfunc.PythonModel):
    """``predict(obs) -> load_policy(checkpoint).act(obs)``."""

    _skip_type_hint_validation = True  # MLflow's schema check: inputs are arrays or dicts of arrays, not list[...]

    def load_context(self, context: Any) -> None:
        self.policy = load_policy(context.artifacts["checkpoint"])

    def predict(self, context: Any, model_input: Any, params: Any = None) -> Any:
        if isinstance(model_input, dict):
            return self.policy.act({k: np.asarray(v) for k, v in model_input.items()})
        return self.policy.act(np.asarray(model_input))


mlflow.models.set_model(PolicyModel())
