"""Shared test set-up: one thread per process (CI has 2 cores), fixed seeds, a notebook runner, and
the device of the tests' tensors (SCIMECH_TEST_DEVICE, for a run on a GPU)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ.setdefault("MPLBACKEND", "Agg")
os.environ.setdefault("SCIMECH_QUIET", "1")

import numpy as np
import pytest
import torch
from torch.overrides import TorchFunctionMode
from torch.utils._device import _device_constructors

torch.set_num_threads(1)

# One BLAS thread too: with pytest-xdist using both cores, threaded BLAS oversubscribes them
# (a 256x256 solve was ~40x slower with 2 BLAS threads on a loaded 2-core machine).
from threadpoolctl import threadpool_limits  # noqa: E402

threadpool_limits(1)

REPO = Path(__file__).resolve().parents[1]

# -- the device of the tests' tensors: SCIMECH_TEST_DEVICE (unset: the CPU) -------------------------

_TOOLKIT = tuple(f"{REPO / name}{os.sep}" for name in ("scimech", "ocean", "astro", "neuro", "bench"))
_TESTS = f"{REPO / 'tests'}{os.sep}"


def _made_by_tests() -> bool:
    """Whether the innermost frame of this repository on the stack is a test's (then a tensor made
    there is the test's), not the toolkit's; frames of torch and other libraries are passed over."""
    frame = sys._getframe(2)
    while frame is not None:
        name = frame.f_code.co_filename
        if name.startswith(_TOOLKIT):
            return False
        if name.startswith(_TESTS):
            return True
        frame = frame.f_back
    return False


class OnDevice(TorchFunctionMode):
    """The tensors the tests make live on ``device``: models built by the fixtures, inputs, expected
    values (each made as on the CPU, with the same random numbers, then moved); what the toolkit
    makes is left where the toolkit puts it, so a verb that forgets the model's device fails as it
    would for a user. A test's ``.numpy()`` (or ``np.asarray``) of a device tensor reads it from the
    host. ``torch.from_numpy`` stays on the CPU, as a user's values read back from a Dataset do."""

    def __init__(self, device: str | torch.device):
        super().__init__()
        self.device = torch.device(device)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        if func in _FACTORIES and kwargs.get("device") is None and _made_by_tests():
            grad = kwargs.pop("requires_grad", False)
            out = func(*args, **kwargs)
            if isinstance(out, torch.Tensor) and out.device != self.device:
                out = out.to(self.device)
            return out.requires_grad_() if grad else out  # a leaf on the device, as if made there
        if func in _TO_HOST and args[0].device.type != "cpu" and _made_by_tests():
            return func(args[0].cpu(), *args[1:], **kwargs)
        return func(*args, **kwargs)


_FACTORIES = frozenset(_device_constructors())
_TO_HOST = frozenset({torch.Tensor.numpy, torch.Tensor.__array__})
TEST_DEVICE = torch.device(os.environ.get("SCIMECH_TEST_DEVICE") or "cpu")
if os.environ.get("SCIMECH_TEST_DEVICE"):  # from collection on: tensors made at a test module's import too
    OnDevice(TEST_DEVICE).__enter__()


@pytest.fixture(scope="session")
def test_device() -> torch.device:
    """The device the tests' tensors live on (``SCIMECH_TEST_DEVICE``, default the CPU)."""
    return TEST_DEVICE


@pytest.fixture
def device_mode():
    """:class:`OnDevice`: ``with device_mode("meta"): ...`` makes the tensors of the block's test code there."""
    return OnDevice


@pytest.fixture(autouse=True, scope="session")
def _one_thread_in_late_loaded_pools():
    """The limit above only reaches the pools loaded by then (numpy's OpenBLAS, torch's OpenMP).
    SciPy ships its own OpenBLAS and scikit-learn its own OpenMP, loaded on first import, so they
    kept one thread per core: small LAPACK calls (L-BFGS-B in every Gaussian-process fit, scipy
    solves) were then 5-10x slower on a loaded 2-core machine (a GP fit of 15 points: 0.28 s vs
    0.03 s). Load them and limit them too, once per test process."""
    import scipy.linalg  # noqa: F401  (loads scipy.libs/libscipy_openblas)
    import sklearn.linear_model  # noqa: F401  (loads scikit_learn.libs/libgomp)

    threadpool_limits(1)
    yield


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


@pytest.fixture(scope="module")
def candidate_data_file(tmp_path_factory):
    """A tiny task data file for neuro sandbox runs: target 1 everywhere on the val split,
    so an all-zero forecaster scores exactly MAE 1."""
    from neuro.search.sandbox import write_data

    rng = np.random.default_rng(0)
    d = {
        "train/series": rng.normal(size=(2, 20, 3)).astype(np.float32),
        "train/stim": np.zeros((2, 20, 5), np.float32),
        "val/context": rng.normal(size=(4, 4, 3)).astype(np.float32),
        "val/stim_context": np.zeros((4, 4, 5), np.float32),
        "val/stim_future": np.zeros((4, 2, 5), np.float32),
        "val/target": np.ones((4, 2, 3), np.float32),
    }
    return write_data(d, tmp_path_factory.mktemp("candidate") / "data.npz")


@pytest.fixture(scope="session")
def local_client():
    """A 2-worker Dask LocalCluster (``get_client("local", n_workers=2)``) shared by the tests of
    one test process that run a study on Dask: starting one and importing torch and the study's
    modules in its two workers costs ~10 CPU-seconds, paid once instead of once per file. The
    units of each study are separate tasks with their own inputs and output folders, so nothing
    one study leaves in the workers enters another's results."""
    from scimech.run.parallel import get_client

    client = get_client("local", n_workers=2)
    yield client
    client.close()
