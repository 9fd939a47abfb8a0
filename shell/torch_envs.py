"""Moved to :mod:`shell.envs.torch_native`; this module re-exports it for one release."""

from shell.envs.torch_native import TORCH_ENVS, TorchCartPole, TorchPendulum, TorchVecEnv

__all__ = ["TORCH_ENVS", "TorchCartPole", "TorchPendulum", "TorchVecEnv"]
