"""Run a page's code blocks in order in the current folder (``python run_page.py BLOCKS.json``).

python blocks share one namespace, bash blocks run with ``bash -e -o pipefail``; a block with a title
is written to that file; a toml block is checked as a config. See blocks.py for the rules. Prints
which block failed and exits 1 on the first failure.
"""

import json
import os
import subprocess
import sys
import time
import traceback
from pathlib import Path

import tomllib


def check_toml(text: str, where: str) -> None:
    from shell.config import TUNE_SECTION, config_from_dict

    data = tomllib.loads(text)
    tune = data.pop(TUNE_SECTION, None)
    config_from_dict(data)
    if isinstance(tune, dict) and "space" in tune:
        from shell.tune.space import parse_space

        parse_space(tune["space"], where)


def main() -> int:
    blocks = json.loads(Path(sys.argv[1]).read_text())
    namespace = {"__name__": "__main__"}
    for block in blocks:
        where = f"{block['page']}:{block['line']}"
        start = time.monotonic()
        try:
            if block["title"]:
                path = Path(block["title"])
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(block["code"])
            if block["lang"] == "toml":
                check_toml(block["code"], where)
            elif block["lang"] == "python" and not block["title"]:
                exec(compile(block["code"], where, "exec"), namespace)
            elif block["lang"] == "bash" and not block["title"]:
                proc = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", block["code"]], capture_output=True,
                                      text=True, timeout=block.get("timeout", 300), env=os.environ)
                if proc.returncode != 0:
                    print(f"{where}: bash block exited {proc.returncode}\n--- stdout\n{proc.stdout[-4000:]}"
                          f"\n--- stderr\n{proc.stderr[-4000:]}", file=sys.stderr)
                    return 1
        except Exception:
            print(f"{where}: {block['lang']} block failed\n{traceback.format_exc()}", file=sys.stderr)
            return 1
        print(f"{where}: {block['lang']} ok in {time.monotonic() - start:.1f} s", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
