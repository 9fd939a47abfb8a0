"""Every tensor function of ``core`` keeps its inputs' dtype and device.

``core`` never moves data (no ``.to(device)``, no CPU tensors made on the side). Running each
function on the ``meta`` device checks that without a GPU: a tensor created on the CPU inside a
function would meet a meta tensor and raise, and outputs must come back on ``meta``.
"""

from __future__ import annotations

import inspect

import pytest
import torch

import core

T, N, B, A, S = 5, 3, 6, 2, 4


def _cases(dtype: torch.dtype):
    def m(*shape, dt=dtype):
        return torch.zeros(shape, dtype=dt, device="meta")

    flag = torch.zeros(T, N, dtype=torch.bool, device="meta")
    mask = torch.ones(B, A, dtype=torch.bool, device="meta")
    index = torch.zeros(B, dtype=torch.long, device="meta")
    return {
        "gae": (lambda: core.gae(m(T, N), m(T, N), flag, m(N), 0.99, 0.95), (T, N)),
        "gae_flat": (lambda: core.gae(m(T), m(T), m(T), m(), 0.99, 0.95), (T,)),
        "turn_gae": (lambda: core.turn_gae(m(T, N), m(T, N), flag, flag, m(N), flag[0], 0.99, 0.95)[0], (T, N)),
        "turn_gae_flat": (lambda: core.turn_gae(m(T), m(T), m(T), m(T), m(), m(), 0.99, 0.95)[0], (T,)),
        "bootstrap_truncated": (
            lambda: core.bootstrap_truncated(m(T, N), flag, m(T, N), m(T, N), 0.99),
            (T, N),
        ),
        "squash": (lambda: core.squash(m(B, A), m(A), m(A)), (B, A)),
        "unsquash": (lambda: core.unsquash(m(B, A), 2.0, 0.5), (B, A)),
        "tanh_log_abs_det_jacobian": (lambda: core.tanh_log_abs_det_jacobian(m(B, A), m(A)), (B, A)),
        "squashed_log_prob": (lambda: core.squashed_log_prob(m(B, A), m(B, A), m(A), 2.0), (B,)),
        "squashed_entropy": (lambda: core.squashed_entropy(m(B, A), m(A), m(B, A), m(A)), (B,)),
        "clip_loss": (lambda: core.clip_loss(m(B), m(B), m(B), 0.2), ()),
        "value_loss": (lambda: core.value_loss(m(B), m(B), m(B), 0.2), ()),
        "normalize_advantages": (lambda: core.normalize_advantages(m(B)), (B,)),
        "approx_kl": (lambda: core.approx_kl(m(B), m(B)), ()),
        "clip_fraction": (lambda: core.clip_fraction(m(B), m(B), 0.2), ()),
        "explained_variance": (lambda: core.explained_variance(m(B), m(B)), ()),
        "batch_moments": (lambda: core.batch_moments(m(B, S))[:2], (S,)),
        "merge_moments": (lambda: core.merge_moments(m(S), m(S), 3, m(S), m(S), 4)[:2], (S,)),
        "normalize_obs": (lambda: core.normalize_obs(m(B, S), m(S), m(S)), (B, S)),
        "mean_std_from_sums": (lambda: core.mean_std_from_sums(m(), m(), m()), ()),
        "scale_rewards": (lambda: core.scale_rewards(m(B), m()), (B,)),
        "discounted_return_step": (lambda: core.discounted_return_step(m(N), m(N), flag[0], 0.99), (N,)),
        "elo_ratings": (lambda: core.elo_ratings(m(A, A), m(A, A), iterations=3), (A,)),
        "categorical_sample": (lambda: core.categorical_sample(m(B, A), m(B, A)), (B,), torch.long),
        # core/masks.py: bool masks [B, A] on the same device
        "masked_logits": (lambda: core.masked_logits(m(B, A), mask), (B, A)),
        "masked_categorical": (lambda: core.masked_categorical(m(B, A), mask).logits, (B, A)),
        "masked_log_prob": (lambda: core.masked_log_prob(m(B, A), mask, index), (B,)),
        "masked_entropy": (lambda: core.masked_entropy(m(B, A), mask), (B,)),
        "masked_probs": (lambda: core.masked_probs(m(B, A), mask), (B, A)),
        "magnet_kl": (lambda: core.magnet_kl(m(B, A), m(B, A), mask), (B,)),
        "linked_active": (lambda: core.linked_active(index, mask), (B, A), torch.bool),
        "linked_sum": (lambda: core.linked_sum(m(B, A), mask, m(A)), (B,)),
        "masked_log_prob_and_entropy": (lambda: core.masked_log_prob_and_entropy(m(B, A), mask, index), (B,)),
        "masked_categorical_sample": (lambda: core.masked_categorical_sample(m(B, A), mask, m(B, A)), (B,),
                                      torch.long),
        "masked_argmax": (lambda: core.masked_argmax(m(B, A), mask), (B,), torch.long),
        "legal_log_count": (lambda: core.legal_log_count(mask, [A]), (B,), torch.float32),
        "entropy_weight": (lambda: core.entropy_weight(mask, [A]), (B,), torch.float32),
        "normalized_entropy_bonus": (lambda: core.normalized_entropy_bonus(m(B), mask, [A]), (B,)),
        "bernoulli_logits": (lambda: core.bernoulli_logits(m(B, A), mask), (B, A)),
        "bernoulli_log_prob": (lambda: core.bernoulli_log_prob(m(B, A), m(B, A), mask), (B,)),
        "bernoulli_entropy": (lambda: core.bernoulli_entropy(m(B, A), mask), (B,)),
        "bernoulli_sample": (lambda: core.bernoulli_sample(m(B, A), m(B, A), mask), (B, A), torch.long),
        "bernoulli_mode": (lambda: core.bernoulli_mode(m(B, A), mask), (B, A), torch.long),
        "bernoulli_mask_as_categorical": (lambda: core.bernoulli_mask_as_categorical(mask), (B, 2 * A), torch.bool),
        # the refinements (ppo.rpo_alpha, ppo.desired_kl, ppo.value_norm)
        "rpo_mean": (lambda: core.rpo_mean(m(B, A), m(B, A), 0.5), (B, A)),
        "adaptive_learning_rate": (lambda: core.adaptive_learning_rate(m(), m(), 0.01), ()),
        "normalize_value": (lambda: core.normalize_value(m(B), m(), m()), (B,)),
        "denormalize_value": (lambda: core.denormalize_value(m(B), m(), m()), (B,)),
    }


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("name", sorted(_cases(torch.float32)))
def test_core_keeps_dtype_and_device(name: str, dtype: torch.dtype) -> None:
    fn, shape, *out_dtype = _cases(dtype)[name]
    out = fn()
    for tensor in out if isinstance(out, tuple) else (out,):
        assert tensor.device.type == "meta", (name, tensor.device)
        assert tensor.dtype == (out_dtype[0] if out_dtype else dtype), (name, tensor.dtype)
        assert tuple(tensor.shape) == shape, (name, tuple(tensor.shape))


def _public_functions() -> set[str]:
    return {name for name, obj in vars(core).items() if not name.startswith("_") and inspect.isfunction(obj)}


def test_every_public_tensor_function_is_covered() -> None:
    scalars = {"normalized_entropy_coef", "multi_discrete_entropy_coef", "linear_schedule"}
    covered = {name.removesuffix("_flat") for name in _cases(torch.float32)}
    assert _public_functions() - scalars == covered


def test_every_public_function_is_exported_in_all() -> None:
    """``from core import *`` must give every function ``core/__init__.py`` imports."""
    assert _public_functions() - set(core.__all__) == set()
