"""bench/RESULTS.md, the benchmark summary, against the raw files it links.

Every link resolves; every row of the speed table quotes its file's own summary (ours, the peer's, the
ratio); the chart is drawn from files the table links; and the Backends page quotes the table.
"""

from __future__ import annotations

import importlib.util
import json
import re

import pytest

from .blocks import ROOT

BENCH = ROOT / "bench"
RESULTS = (BENCH / "RESULTS.md").read_text(encoding="utf-8")
LINK = re.compile(r"\]\((?P<target>[^)#\s]+)(?:#[^)]*)?\)")

# the fields of each kind of raw file: (ours, peer, ratio)
FIELDS = [
    ("ours_median_wall_s", "sb3_1thread_median_wall_s", "speedup_median_vs_1thread"),  # bench/vs_sb3.py
    ("ours_median_wall_s", "sb3_median_wall_s", "median_ratio"),  # bench/masks_vs_sb3.py
    ("ours_median_wall_s", "benchmarl_median_wall_s", "median_ratio"),  # bench/multiagent_vs_benchmarl.py
    ("ours_sps", "sb3_sps", "sps_ratio"),  # bench/atari_throughput.py: one row per repeat
]


def _section(title: str) -> str:
    return RESULTS.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]


def _rows(text: str) -> list[list[str]]:
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in text.splitlines() if line.startswith("|")]
    return [r for r in rows[2:] if r]  # after the header and its rule


def test_every_link_of_the_results_resolves():
    targets = [m.group("target") for m in LINK.finditer(RESULTS) if "://" not in m.group("target")]
    assert len(targets) > 20
    missing = [t for t in targets if not (BENCH / t).is_file()]
    assert not missing, f"bench/RESULTS.md links files that do not exist: {missing}"


def _quoted(number: str) -> float:
    return float(number.replace(",", "").strip("*x "))


@pytest.mark.parametrize("row", _rows(_section("Speed against each peer")), ids=lambda r: r[0])
def test_each_speed_row_quotes_its_raw_file(row):
    config, _peer, ours, peer, ratio, _when, raw = row
    path = BENCH / LINK.search(raw).group("target")
    data = json.loads(path.read_text())
    summary = data[0] if isinstance(data, list) else data["summary"]
    for fields in FIELDS:
        if all(f in summary for f in fields):
            expected = [summary[f] for f in fields]
            break
    else:
        pytest.fail(f"{path.name}: none of the known summary fields {FIELDS}")
    assert [_quoted(ours), _quoted(peer), _quoted(ratio)] == pytest.approx(expected), (config, path.name)


def test_the_chart_is_drawn_from_files_the_table_links():
    spec = importlib.util.spec_from_file_location("plot_speed", BENCH / "plot_speed.py")
    plot_speed = importlib.util.module_from_spec(spec)
    pytest.importorskip("matplotlib")
    spec.loader.exec_module(plot_speed)
    speed = _section("Speed against each peer")
    for _label, name in plot_speed.SOURCES:
        assert f"(results/{name})" in speed, f"the chart reads {name}, which the speed table does not link"


def test_the_backends_page_quotes_the_speed_table():
    """Backends and speed repeats some rows of the speed table; its ratios and seconds are the table's, rounded
    (an older measurement quoted there once contradicted the README and this page)."""
    latest = {row[0].split()[0]: row for row in _rows(_section("Speed against each peer"))}
    page = (ROOT / "docs" / "guides" / "backends.md").read_text(encoding="utf-8")
    table = page.split("## How fast each is\n", 1)[1].split("\n## ", 1)[0]
    rows = _rows(table)
    assert len(rows) >= 5
    for config, _backend, ours, peer, ratio in rows:
        name = config.removesuffix(".toml")
        assert name in latest, f"backends.md quotes {config}, which the speed table lacks"
        _c, _p, r_ours, r_peer, r_ratio, _when, _raw = latest[name]
        for quoted, figure in ((ours, r_ours), (peer, r_peer), (ratio, r_ratio)):
            digits = len(quoted.split()[0].strip("x").partition(".")[2])
            assert _quoted(quoted.split()[0]) == round(_quoted(figure.split()[0]), digits), (config, quoted, figure)
