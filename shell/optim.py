"""Adam through torch's functional API, without ``torch.optim.Optimizer``'s start-up cost.

``torch.optim.Adam`` computes exactly what this computes (both call ``torch.optim.adam.adam``,
fused kernels on CPU and CUDA), but constructing or stepping any ``torch.optim.Optimizer``
imports ``torch._dynamo`` (``add_param_group`` is wrapped in ``torch._disable_dynamo`` and
``step`` in ``_use_grad_for_differentiable``): 0.75-1.0 s of every process on this project's
machine, 10-15% of a whole CartPole run (bench/BENCHMARKS.md). This class keeps the state and
the ``state_dict`` layout of ``torch.optim.Adam`` and leaves the maths to torch.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from typing import Any

import torch

# ``torch.optim.adam`` is the module (``torch.optim.Adam`` the class); import it by name because
# ``torch.optim.__init__`` rebinds the attribute ``adam``.
_adam = importlib.import_module("torch.optim.adam").adam


class Adam:
    """Adam (Kingma and Ba, 2015: arXiv:1412.6980) over one group of parameters.

    Same update, defaults and ``state_dict`` layout as ``torch.optim.Adam(params, lr,
    betas, eps, fused=True)`` with no weight decay and no AMSGrad: a checkpoint of one
    loads into the other. Moments are tensors of their parameter's shape, dtype and
    device; ``step`` counts are 0-d ``float32`` tensors on that device.

    Raises:
        ValueError: for ``lr <= 0``, ``eps <= 0``, betas outside ``[0, 1)``, no
            parameters, or parameters that are not floating point.
    """

    def __init__(self, params: Iterable[torch.nn.Parameter], lr: float = 1e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8):
        self.params = list(params)
        if not self.params:
            raise ValueError("Adam got no parameters")
        if not all(p.is_floating_point() for p in self.params):
            raise ValueError("Adam needs floating-point parameters")
        if not lr > 0 or not eps > 0 or not all(0.0 <= b < 1.0 for b in betas):
            raise ValueError(f"Adam needs lr > 0, eps > 0 and betas in [0, 1); got {lr}, {eps}, {betas}")
        self.lr, self.betas, self.eps = float(lr), (float(betas[0]), float(betas[1])), float(eps)
        self.exp_avgs = [torch.zeros_like(p, memory_format=torch.preserve_format) for p in self.params]
        self.exp_avg_sqs = [torch.zeros_like(p, memory_format=torch.preserve_format) for p in self.params]
        self.steps = [torch.zeros((), dtype=torch.float32, device=p.device) for p in self.params]

    def zero_grad(self) -> None:
        """Drop the gradients (``set_to_none``)."""
        for p in self.params:
            p.grad = None

    @torch.no_grad()
    def step(self) -> None:
        """One Adam step for every parameter that has a gradient."""
        index = [i for i, p in enumerate(self.params) if p.grad is not None]
        if not index:
            return
        _adam([self.params[i] for i in index], [self.params[i].grad for i in index],
              [self.exp_avgs[i] for i in index], [self.exp_avg_sqs[i] for i in index], [],
              [self.steps[i] for i in index], fused=True, amsgrad=False, beta1=self.betas[0],
              beta2=self.betas[1], lr=self.lr, weight_decay=0.0, eps=self.eps, maximize=False)

    def _group(self) -> dict[str, Any]:
        return {"lr": self.lr, "betas": self.betas, "eps": self.eps, "weight_decay": 0.0, "amsgrad": False,
                "maximize": False, "foreach": None, "capturable": False, "differentiable": False, "fused": True,
                "decoupled_weight_decay": False, "params": list(range(len(self.params)))}

    def state_dict(self) -> dict[str, Any]:
        """``{"state": {i: {"step", "exp_avg", "exp_avg_sq"}}, "param_groups": [...]}``, as torch.optim.Adam's."""
        state = {i: {"step": s, "exp_avg": m, "exp_avg_sq": v}
                 for i, (s, m, v) in enumerate(zip(self.steps, self.exp_avgs, self.exp_avg_sqs, strict=True))
                 if float(s) > 0}
        return {"state": state, "param_groups": [self._group()]}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Load a state dict of this class or of ``torch.optim.Adam`` over the same parameters.

        Raises:
            ValueError: if it holds more than one group, another number of parameters, or
                moments whose shapes differ from the parameters'.
        """
        groups = state_dict["param_groups"]
        if len(groups) != 1 or len(groups[0]["params"]) != len(self.params):
            raise ValueError(f"optimizer state for {[len(g['params']) for g in groups]} parameters in "
                             f"{len(groups)} group(s); this Adam has one group of {len(self.params)}")
        group = groups[0]
        self.lr, self.betas, self.eps = float(group["lr"]), tuple(map(float, group["betas"])), float(group["eps"])
        for slot, key in enumerate(group["params"]):
            saved = state_dict["state"].get(key)
            p = self.params[slot]
            if saved is None:
                self.steps[slot].zero_()
                self.exp_avgs[slot].zero_()
                self.exp_avg_sqs[slot].zero_()
                continue
            if saved["exp_avg"].shape != p.shape or saved["exp_avg_sq"].shape != p.shape:
                raise ValueError(f"optimizer moments of shape {list(saved['exp_avg'].shape)} for a parameter "
                                 f"of shape {list(p.shape)}")
            self.steps[slot].copy_(torch.as_tensor(saved["step"], dtype=torch.float32))
            self.exp_avgs[slot].copy_(saved["exp_avg"])
            self.exp_avg_sqs[slot].copy_(saved["exp_avg_sq"])
