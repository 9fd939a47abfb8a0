"""Moved to :mod:`shell.envs.pomdp`; this module re-exports it for one release."""

from shell.envs.pomdp import HIDDEN, make_cartpole_novel, make_pendulum_novel, register

__all__ = ["HIDDEN", "make_cartpole_novel", "make_pendulum_novel", "register"]
