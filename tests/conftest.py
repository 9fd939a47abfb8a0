"""Settings for every test process.

Each test computes on one torch thread, as the CLI does (shell/cli.py sets it for its processes):
pytest-xdist runs one worker per core, and a second intra-op thread per worker would only compete for
the same cores. A test that sets its own thread count (test_api does) leaves no trace on the next.
"""

import os

# Before torch is imported here, and inherited by every process a test starts (main.py, tune workers,
# the docs pages' scripts): one OpenMP thread each.
os.environ["OMP_NUM_THREADS"] = "1"

import pytest
import torch


@pytest.fixture(autouse=True)
def _one_torch_thread():
    torch.set_num_threads(1)
