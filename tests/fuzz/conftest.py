"""Hypothesis profiles of the fuzzer, and its tally of outcomes.

``PPO_FUZZ_PROFILE=ci`` (the default) draws a fixed, derandomised set of cases: the same cases on every run
and machine, sized for CI. ``PPO_FUZZ_PROFILE=long`` searches at random with many more cases per test and a
longer time limit per case, run by hand after a change of the env or config layer (docs/reliability.md)::

    PPO_FUZZ_PROFILE=long pytest -q -p no:cacheprovider tests/fuzz

The profiles are registered here and applied per test (:func:`tests.fuzz.profile.fuzz_settings`), so the
property tests' own profile (tests/property/conftest.py) is left alone. At the end of a session, the number
of cases per test and exit code is printed.
"""

from __future__ import annotations

from tests.fuzz.outcomes import TALLY


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if not TALLY:
        return
    terminalreporter.section("fuzz cases by exit code")
    tests = sorted({test for test, _ in TALLY})
    for test in tests:
        counts = ", ".join(f"exit {code}: {TALLY[test, code]}" for code in (0, 1, 2) if TALLY[test, code])
        terminalreporter.write_line(f"{test}: {sum(TALLY[test, c] for c in (0, 1, 2))} cases ({counts})")
