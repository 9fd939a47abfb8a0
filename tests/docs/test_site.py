"""The docs site's build-time pieces: not-run notes left out, the CLI help, and a new guide finding its place."""

import importlib.util
import shutil
import subprocess
import sys

import pytest

from .blocks import ROOT

spec = importlib.util.spec_from_file_location("docs_generate", ROOT / "docs" / "hooks" / "generate.py")
generate = importlib.util.module_from_spec(spec)
spec.loader.exec_module(generate)


def test_a_not_run_marker_is_left_out_of_the_site():
    """The reason is for the people who test the pages (CI, .ci/run, test files): users never see it."""
    page = "Text.\n\n<!-- not-run: needs a GPU; CI runs tests/x.py -->\n```bash\nppo-core --device cuda\n```\n"
    out = generate.render_not_run(page)
    assert "not-run" not in out and "needs a GPU" not in out and "!!!" not in out
    marker = "<!-- not-run: needs a GPU; CI runs tests/x.py -->"
    assert out.replace("\n", "") == page.replace("\n", "").replace(marker, "")
    # inside a list item too; a marker quoted inside a code block is left alone
    assert generate.render_not_run("- x\n\n    <!-- not-run: why -->\n") == "- x\n\n\n"
    quoted = "````text\n<!-- not-run: why -->\n```bash\nls\n```\n````\n"
    assert generate.render_not_run(quoted) == quoted


def test_cli_help_is_the_parsers_own():
    text = generate.render_cli_help("<!-- cli-help: tune -->\n")
    assert text.startswith("```text\nusage: ppo-core tune") and "--trials" in text and "--heartbeat" in text
    with pytest.raises(KeyError):
        generate.cli_help("no-such-command")


def test_a_new_guide_appears_in_the_nav_without_an_edit_of_mkdocs_yml(tmp_path):
    pytest.importorskip("mkdocs", reason="the docs extra builds the site: pip install -e '.[docs]'")
    site = tmp_path / "repo"
    for name in ("docs", "bench", "mkdocs.yml"):
        src = ROOT / name
        (shutil.copytree if src.is_dir() else shutil.copy)(src, site / name)
    (site / "docs" / "guides" / "zz-new-feature.md").write_text("# A new feature\n\nIt works.\n")
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "--site-dir",
                           str(tmp_path / "site")], cwd=site, capture_output=True, text=True, timeout=300,
                          env={"NO_MKDOCS_2_WARNING": "1", "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    home = (tmp_path / "site" / "index.html").read_text()
    assert "A new feature" in home and "guides/zz-new-feature/" in home
    start = (tmp_path / "site" / "getting-started" / "index.html").read_text()
    assert "Not run by the tests" not in start and "tests/integration/test_wheel.py" not in start
    config = (tmp_path / "site" / "reference" / "config" / "index.html").read_text()
    assert 'id="ppo.gamma"' in config and 'id="env.num_envs"' in config
    bench = (tmp_path / "site" / "benchmarks" / "index.html").read_text()
    assert (tmp_path / "site" / "benchmarks" / "log" / "index.html").is_file()  # the dated log, under the results
    assert 'src="results/speed_vs_sb3.png"' in bench and (tmp_path / "site" / "benchmarks" / "results"
                                                          / "speed_vs_sb3.png").is_file()
