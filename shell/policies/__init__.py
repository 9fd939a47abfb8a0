"""The policy stack (DESIGN.md, "The policy stack"): encoders, actor and critic heads, and the module joining them.

- :mod:`shell.policies.encoders`: observation -> features ``[B, F]`` (flat, image CNNs, Dict).
- :mod:`shell.policies.heads`: features -> action distributions (squashed Gaussian, categorical).
- :mod:`shell.policies.actor_critic`: :class:`ActorCritic`, what the runner, the update and the
  evaluation use.
- :mod:`shell.policies.layers`: MLPs, a fast tanh, orthogonal initialisation.
- :mod:`shell.policies.groups`: :class:`AgentGroups`, one ActorCritic per group of agents.
"""

from shell.policies.actor_critic import ActorCritic
from shell.policies.encoders import make_encoder
from shell.policies.groups import AgentGroups, lane_spaces, lanes_policy
from shell.policies.heads import ActionSample, CategoricalActor, SquashedGaussianActor, default_ent_coef, make_actor
from shell.policies.layers import ACTIVATIONS, Tanh, mlp

__all__ = ["ACTIVATIONS", "ActionSample", "ActorCritic", "AgentGroups", "CategoricalActor", "SquashedGaussianActor",
           "Tanh", "default_ent_coef", "lane_spaces", "lanes_policy", "make_actor", "make_encoder", "mlp"]
