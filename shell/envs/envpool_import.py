"""Import only the part of EnvPool that an env id needs.

``import envpool`` (1.2.5) registers every family EnvPool ships before it returns: Atari, MuJoCo,
MyoSuite, Procgen, Jumanji (whose renderer imports ``matplotlib.pyplot``) and more. That took
0.7-1.3 s here, 15-25% of a whole CartPole-v1 run on the envpool backend as it was (4.7-5.2 s),
for one family of five classic-control envs whose own registration and C++ module load, with a pool built, in about
0.04 s (bench/BENCHMARKS.md, "EnvPool backend").

:func:`envpool_registration` loads EnvPool's ``registration`` module (``make_gymnasium`` and
``list_all_envs`` live there) with only the families in :data:`LIGHT_FAMILIES` registered, under
an ``envpool`` package module whose ``__init__`` has not run yet. That module stays in
``sys.modules``: the first attribute anyone asks of it that it lacks (``envpool.make``,
``envpool.__version__``, ...) runs EnvPool's real ``__init__`` in it, which registers the other
families into the same registry. So ``import envpool`` elsewhere in the process behaves as
always, and an id outside the light families is looked up after the full import.

This relies on EnvPool's private layout (a registry module, one ``<family>.registration`` module
per family, an ``__init__`` that only imports them), so it runs only for the version it was written
against, :data:`WRITTEN_FOR`. Any other version, or any error on the way, falls back to a plain
``import envpool``, with nothing of the light attempt left in ``sys.modules``.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import sys
import threading
import types
from typing import Any

# EnvPool families registered without the rest: those whose runs take seconds, so that the full
# import would be a large share of them.
LIGHT_FAMILIES = ("classic_control",)
WRITTEN_FOR = "1.2.5"
"""The EnvPool release whose layout the light import was written against and checked on."""

_lock = threading.RLock()
_MISSING = object()


class _DeferredPackage(types.ModuleType):
    """The ``envpool`` package before its ``__init__`` ran: the first missing attribute runs it."""

    def __getattr__(self, name: str) -> Any:
        # Only reached for attributes the module does not have. __path__, __spec__ and the
        # submodules loaded so far are there, so submodule imports do not end up here.
        with _lock:
            if type(self) is _DeferredPackage:
                self.__class__ = types.ModuleType  # from here on a plain module, as after `import envpool`
                try:
                    self.__spec__.loader.exec_module(self)
                except BaseException:
                    sys.modules.pop("envpool", None)  # as a failed import leaves it
                    raise
        return getattr(self, name)


def _deferred_package() -> types.ModuleType | None:
    """``sys.modules["envpool"]``, created as a :class:`_DeferredPackage` if it is not imported yet;
    None where envpool is not an installed package (absent, or a single-module stand-in)."""
    loaded = sys.modules.get("envpool")
    if loaded is not None:
        return loaded
    spec = importlib.util.find_spec("envpool")  # None when missing (or sys.modules["envpool"] is None)
    if spec is None or not spec.submodule_search_locations:
        return None
    package = importlib.util.module_from_spec(spec)  # __path__ and __spec__ set, __init__ not run
    package.__class__ = _DeferredPackage
    sys.modules["envpool"] = package
    return package


def envpool_registration(env_id: str) -> Any:
    """EnvPool's ``envpool.registration`` module, with ``env_id`` registered if EnvPool has it.

    Args:
        env_id: an EnvPool task id, e.g. ``"CartPole-v1"``.

    Returns:
        A module whose ``list_all_envs()`` and ``make_gymnasium(...)`` are EnvPool's: the package
        itself where it was imported in full already. The full package is imported unless
        ``env_id`` belongs to one of :data:`LIGHT_FAMILIES`.

    Raises:
        ImportError: envpool is not installed (or ``sys.modules["envpool"]`` is None).
    """
    with _lock:
        loaded = sys.modules.get("envpool", _MISSING)
        if loaded is None:  # blocked (an ImportError, as ``import envpool`` gives)
            return importlib.import_module("envpool")
        if loaded is not _MISSING and type(loaded) is not _DeferredPackage:
            return loaded  # imported in full already (or a stand-in module)
        if loaded is _MISSING and not _light_import_applies():
            return importlib.import_module("envpool")
        try:
            return _light_registration(env_id)
        except Exception:
            _forget_envpool()  # nothing half-imported stays behind
            return importlib.import_module("envpool")


def _light_import_applies() -> bool:
    """True where the installed envpool is the version :func:`_light_registration` was written for."""
    try:
        return importlib.metadata.version("envpool") == WRITTEN_FOR
    except Exception:  # not installed as a distribution (a stand-in), or unreadable metadata
        return False


def _light_registration(env_id: str) -> Any:
    package = _deferred_package()
    if package is None:  # not installed (ImportError), or a single-module stand-in
        return importlib.import_module("envpool")
    if type(package) is not _DeferredPackage:  # imported in full already
        return package
    registration = importlib.import_module("envpool.registration")
    for family in LIGHT_FAMILIES:
        importlib.import_module(f"envpool.{family}.registration")
    if env_id not in registration.list_all_envs():
        getattr(package, "__version__", None)  # the full __init__: every family registered
    return registration


def _forget_envpool() -> None:
    """Drop ``envpool`` and its submodules from ``sys.modules``."""
    for name in [n for n in sys.modules if n == "envpool" or n.startswith("envpool.")]:
        del sys.modules[name]
