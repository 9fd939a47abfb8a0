"""shell/envs/envpool_import.py against a package laid out as EnvPool 1.2.5 is: an ``__init__`` that
imports ``envpool.entry`` (every family's registration), a registry in ``envpool.registration``
whose ``make_gymnasium`` imports the family package it names, and a heavy family whose import
should be avoided for a classic-control id."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from shell.envs.envpool_import import _DeferredPackage, envpool_registration

FILES = {
    "__init__.py": """
        import envpool.entry  # noqa: F401
        from envpool.registration import list_all_envs, make_gymnasium

        __version__ = "0.0-fake"
        INIT_RUNS = getattr(__import__("sys"), "_fake_envpool_init_runs", 0) + 1
        __import__("sys")._fake_envpool_init_runs = INIT_RUNS
    """,
    "entry.py": """
        import envpool.classic_control.registration  # noqa: F401
        import envpool.heavy.registration  # noqa: F401
    """,
    "registration.py": """
        import importlib

        registry = {}


        class FakePool:
            def __init__(self, task_id, num_envs):
                self.task_id, self.num_envs = task_id, num_envs

        def register(task_id, import_path, cls):
            assert task_id not in registry, task_id  # EnvPool asserts the same
            registry[task_id] = (import_path, cls)

        def list_all_envs():
            return list(registry)

        def make_gymnasium(task_id, num_envs=1, **kwargs):
            import_path, cls = registry[task_id]
            return getattr(importlib.import_module(import_path), cls)(task_id, num_envs)
    """,
    "classic_control/__init__.py": """
        from envpool.registration import FakePool as CartPoleGymnasiumEnvPool  # noqa: F401
    """,
    "classic_control/registration.py": """
        from envpool.registration import register

        register("CartPole-v1", "envpool.classic_control", "CartPoleGymnasiumEnvPool")
    """,
    "heavy/__init__.py": """
        from envpool.registration import FakePool as HeavyGymnasiumEnvPool  # noqa: F401
    """,
    "../envpool-1.2.5.dist-info/METADATA": """
        Metadata-Version: 2.1
        Name: envpool
        Version: 1.2.5
    """,
    "heavy/registration.py": """
        import envpool.heavy  # noqa: F401 - as Jumanji's registration imports its renderer
        from envpool.registration import register

        register("Heavy-v0", "envpool.heavy", "HeavyGymnasiumEnvPool")
    """,
}


@pytest.fixture
def fake_envpool(tmp_path, monkeypatch):
    """The fake package on sys.path, and sys.modules free of any envpool before and after."""
    for name, text in FILES.items():
        path = tmp_path / "envpool" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip())
    monkeypatch.syspath_prepend(str(tmp_path))
    saved = {k: v for k, v in sys.modules.items() if k == "envpool" or k.startswith("envpool.")}
    for k in saved:
        del sys.modules[k]
    sys._fake_envpool_init_runs = 0
    yield tmp_path
    for k in [k for k in sys.modules if k == "envpool" or k.startswith("envpool.")]:
        del sys.modules[k]
    sys.modules.update(saved)
    del sys._fake_envpool_init_runs


def test_a_classic_control_id_loads_its_family_alone(fake_envpool):
    registration = envpool_registration("CartPole-v1")
    assert registration.list_all_envs() == ["CartPole-v1"]
    env = registration.make_gymnasium("CartPole-v1", num_envs=4)
    assert (env.task_id, env.num_envs) == ("CartPole-v1", 4)
    assert type(sys.modules["envpool"]) is _DeferredPackage
    assert sys._fake_envpool_init_runs == 0 and "envpool.heavy" not in sys.modules


def test_import_envpool_afterwards_is_the_whole_package_with_one_registry(fake_envpool):
    registration = envpool_registration("CartPole-v1")
    import envpool

    assert envpool.__version__ == "0.0-fake"  # the first missing attribute runs __init__
    assert sys._fake_envpool_init_runs == 1
    assert sorted(envpool.list_all_envs()) == ["CartPole-v1", "Heavy-v0"]  # CartPole registered once
    assert envpool.list_all_envs is registration.list_all_envs
    assert type(envpool) is not _DeferredPackage
    assert envpool.make_gymnasium("Heavy-v0").task_id == "Heavy-v0"
    with pytest.raises(AttributeError):
        envpool.no_such_name  # noqa: B018
    assert sys._fake_envpool_init_runs == 1
    assert envpool_registration("Heavy-v0") is envpool  # imported in full already: the package itself


def test_an_id_outside_the_light_families_imports_everything(fake_envpool):
    registration = envpool_registration("Heavy-v0")
    assert sorted(registration.list_all_envs()) == ["CartPole-v1", "Heavy-v0"]
    assert sys._fake_envpool_init_runs == 1
    assert registration.make_gymnasium("Heavy-v0", num_envs=2).num_envs == 2
    assert envpool_registration("NotThere-v0").list_all_envs() == registration.list_all_envs()


def test_a_failing_init_is_an_import_error_as_usual(fake_envpool):
    (fake_envpool / "envpool" / "entry.py").write_text("raise ImportError('broken family')\n")
    envpool_registration("CartPole-v1")
    with pytest.raises(ImportError, match="broken family"):
        import envpool

        envpool.make_gymnasium  # noqa: B018
    assert "envpool" not in sys.modules


def test_missing_envpool_is_an_import_error(fake_envpool, monkeypatch):
    monkeypatch.setitem(sys.modules, "envpool", None)
    with pytest.raises(ImportError):
        envpool_registration("CartPole-v1")


def test_a_single_module_stand_in_is_imported_as_it_is(fake_envpool, tmp_path_factory, monkeypatch):
    folder = tmp_path_factory.mktemp("standin")
    (folder / "envpool.py").write_text("def list_all_envs():\n    return ['X-v0']\n")
    monkeypatch.syspath_prepend(str(folder))
    module = envpool_registration("X-v0")
    assert Path(module.__file__).parent == folder and module.list_all_envs() == ["X-v0"]


def test_another_version_is_imported_in_full(fake_envpool):
    dist_info = fake_envpool / "envpool-1.2.5.dist-info"
    dist_info.rename(fake_envpool / "envpool-1.3.0.dist-info")
    (fake_envpool / "envpool-1.3.0.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: envpool\nVersion: 1.3.0\n")
    registration = envpool_registration("CartPole-v1")
    assert type(registration) is not _DeferredPackage and sys._fake_envpool_init_runs == 1
    assert sorted(registration.list_all_envs()) == ["CartPole-v1", "Heavy-v0"]


def test_a_light_import_that_fails_falls_back_to_the_full_import(fake_envpool):
    """A layout the light path does not expect (here a family registration that cannot be imported
    alone) ends in a plain ``import envpool``, with no module of the attempt left behind."""
    (fake_envpool / "envpool" / "classic_control" / "registration.py").write_text(
        "import envpool.missing_helper  # noqa: F401\n")
    (fake_envpool / "envpool" / "entry.py").write_text("import envpool.heavy.registration  # noqa: F401\n")
    registration = envpool_registration("CartPole-v1")
    assert type(registration) is not _DeferredPackage and sys._fake_envpool_init_runs == 1
    assert registration.list_all_envs() == ["Heavy-v0"]  # the full package's registry, registered once
    assert "envpool.classic_control.registration" not in sys.modules
