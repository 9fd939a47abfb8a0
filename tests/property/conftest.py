"""Hypothesis profiles for the property tests of ``core``.

``ci`` (the default) runs a fixed number of examples per test with no deadline,
so the suite is quick and its cost does not depend on the machine. Pick another
profile with ``HYPOTHESIS_PROFILE=thorough pytest tests/property`` to search harder
before a release or after changing ``core``.

There is no ``__init__.py`` here: pytest's default (prepend) import mode puts this
folder on ``sys.path``, which is how the tests import ``property_helpers``. The
repository root is added too, so ``core`` imports without ``pip install -e .``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from hypothesis import HealthCheck, settings

_HERE = Path(__file__).resolve().parent
_ROOT = _HERE.parents[1]
for _path in (str(_HERE), str(_ROOT)):
    if _path not in sys.path:
        sys.path.insert(0, _path)

for _name, _examples in (("ci", 60), ("thorough", 2000)):
    settings.register_profile(_name, max_examples=_examples, deadline=None, print_blob=True,
                              suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
