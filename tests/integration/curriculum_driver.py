"""Runs the example of docs/guides/curricula.md for test_curricula.py, on one process or under torchrun:

    python curriculum_driver.py train|resume RUN_DIR RECORDS_DIR UPDATES

A recording callback (after the example's) writes, per rank, what every training sub-env's ``difficulty``
was after each update's callbacks and at the start of each process's training, and the example
callback's state at the end.
"""

import json
import re
import sys
import types
from pathlib import Path

import shell
from shell.distributed import init_distributed, shutdown

ROOT = Path(__file__).resolve().parents[2]


def example() -> types.ModuleType:
    """The page's code block as a module (its ``__main__`` part does not run)."""
    text = (ROOT / "docs" / "guides" / "curricula.md").read_text()
    (code,) = re.findall(r"```python\n(.*?)```", text, re.S)
    module = types.ModuleType("curricula_example")
    exec(compile(code, "docs/guides/curricula.md", "exec"), module.__dict__)
    return module


class Record:
    def __init__(self, path: Path):
        self.path = path

    def write(self, record: dict) -> None:
        with open(self.path, "a") as f:
            f.write(json.dumps(record) + "\n")

    def on_train_start(self, ctx) -> None:
        self.write({"start": ctx.update, "difficulty": list(ctx.env.get_attr("difficulty"))})

    def __call__(self, row, ctx) -> None:
        self.write({"update": row["update"], "difficulty": list(ctx.env.get_attr("difficulty")),
                    "eval_return": row["eval_return"], "rank": ctx.rank, "world_size": ctx.world_size})


def main() -> None:
    mode, run_dir, records, updates = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3]), int(sys.argv[4])
    dist, _ = init_distributed("cpu")
    ex = example()
    curriculum = ex.RaiseDifficulty()
    record = Record(records / f"rank{dist.rank}.jsonl")
    try:
        if mode == "train":
            shell.train(env=ex.Cue, overrides=ex.SETTINGS, total_timesteps=updates * 256 * dist.world_size,
                        run_dir=run_dir, callbacks=[curriculum, record], progress=False, dist=dist)
        else:
            shell.resume(run_dir, env=ex.Cue, callbacks=[curriculum, record], progress=False, dist=dist)
        record.write({"final": curriculum.state_dict()})
    finally:
        shutdown()


if __name__ == "__main__":
    main()
