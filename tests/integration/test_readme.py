"""The README's "Use it from Python" section runs as one script, from a folder outside the checkout."""

import re
import subprocess
import sys

from .conftest import ROOT


def python_blocks(section: str) -> list[str]:
    text = (ROOT / "README.md").read_text()
    start = text.index(f"## {section}\n")
    end = text.find("\n## ", start + 1)
    return re.findall(r"```python\n(.*?)```", text[start:end if end != -1 else None], re.S)


def test_use_it_from_python_runs_as_one_script(tmp_path):
    blocks = python_blocks("Use it from Python")
    assert len(blocks) >= 2 and any("export_policy" in b for b in blocks) and any("shell.train" in b for b in blocks)
    script = tmp_path / "readme_script.py"
    script.write_text("\n".join(blocks))
    # a clean environment of this interpreter: the package as installed, not the checkout on sys.path
    proc = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout == ""  # the API prints nothing to stdout
    assert any((tmp_path / "runs").iterdir())  # the run dir was made under the caller's folder
    assert list((tmp_path / "runs").glob("*/checkpoints/*.onnx"))
