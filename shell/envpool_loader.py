"""Moved to :mod:`shell.envs.envpool_import`; this module re-exports it for one release."""

from shell.envs.envpool_import import LIGHT_FAMILIES, envpool_registration

__all__ = ["LIGHT_FAMILIES", "envpool_registration"]
