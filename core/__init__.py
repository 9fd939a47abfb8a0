"""Pure PPO maths: tensors in, tensors out.

No modules, optimisers, environments, global state or I/O. Imports only
``torch`` and the standard library, so it can be used on its own.
"""

from core.advantages import bootstrap_truncated, gae, turn_gae
from core.distributions import (
    categorical_sample,
    multi_discrete_entropy_coef,
    normalized_entropy_coef,
    squash,
    squashed_entropy,
    squashed_log_prob,
    tanh_log_abs_det_jacobian,
    unsquash,
)
from core.losses import MAX_LOG_RATIO, clip_loss, value_loss
from core.masks import (
    bernoulli_entropy,
    bernoulli_log_prob,
    bernoulli_logits,
    bernoulli_mask_as_categorical,
    bernoulli_mode,
    bernoulli_sample,
    entropy_weight,
    legal_log_count,
    masked_argmax,
    masked_categorical,
    masked_categorical_sample,
    masked_entropy,
    masked_log_prob,
    masked_log_prob_and_entropy,
    masked_logits,
    normalized_entropy_bonus,
)
from core.ratings import ELO_SCALE, elo_ratings
from core.schedules import linear_schedule
from core.stats import (
    approx_kl,
    batch_moments,
    clip_fraction,
    discounted_return_step,
    explained_variance,
    mean_std_from_sums,
    merge_moments,
    normalize_advantages,
    normalize_obs,
    scale_rewards,
)

__all__ = [
    "ELO_SCALE",
    "MAX_LOG_RATIO",
    "approx_kl",
    "batch_moments",
    "bernoulli_entropy",
    "bernoulli_log_prob",
    "bernoulli_logits",
    "bernoulli_mask_as_categorical",
    "bernoulli_mode",
    "bernoulli_sample",
    "bootstrap_truncated",
    "categorical_sample",
    "clip_fraction",
    "clip_loss",
    "discounted_return_step",
    "elo_ratings",
    "entropy_weight",
    "explained_variance",
    "gae",
    "legal_log_count",
    "linear_schedule",
    "masked_argmax",
    "masked_categorical",
    "masked_categorical_sample",
    "masked_entropy",
    "masked_log_prob",
    "masked_log_prob_and_entropy",
    "masked_logits",
    "mean_std_from_sums",
    "merge_moments",
    "multi_discrete_entropy_coef",
    "normalize_advantages",
    "normalize_obs",
    "normalized_entropy_bonus",
    "normalized_entropy_coef",
    "scale_rewards",
    "squash",
    "squashed_entropy",
    "squashed_log_prob",
    "tanh_log_abs_det_jacobian",
    "turn_gae",
    "unsquash",
    "value_loss",
]
