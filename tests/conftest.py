"""Shared test set-up: one thread per process (CI has 2 cores), fixed seeds, a notebook runner."""

from __future__ import annotations

import os
from pathlib import Path

os.environ.setdefault("MPLBACKEND", "Agg")
os.environ.setdefault("SCIMECH_QUIET", "1")

import numpy as np
import pytest
import torch

torch.set_num_threads(1)

# One BLAS thread too: with pytest-xdist using both cores, threaded BLAS oversubscribes them
# (a 256x256 solve was ~40x slower with 2 BLAS threads on a loaded 2-core machine).
from threadpoolctl import threadpool_limits  # noqa: E402

threadpool_limits(1)

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _fixed_seeds():
    np.random.seed(0)
    torch.manual_seed(0)
    yield


@pytest.fixture
def run_notebook(tmp_path):
    """Execute a notebook top to bottom in a fresh kernel; fail on the first error cell."""

    def _run(path: str | Path, timeout: int = 600):
        import nbformat
        from nbclient import NotebookClient

        path = Path(path)
        if not path.is_absolute():
            path = REPO / path
        nb = nbformat.read(path, as_version=4)
        client = NotebookClient(
            nb, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
        )
        client.execute()
        return nb

    return _run
