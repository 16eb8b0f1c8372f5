"""Run an untrusted candidate program in its own process with limits.

Each candidate gets a fresh temporary directory holding only its source, its data file
(``data.npz``: training trials, metadata and the *inputs* of every forecast window, never a
target; see :func:`neuro.search.evaluate.candidate_inputs`) and the runner. The candidate
returns its forecasts; this (parent) process, which alone holds the targets, scores them, so
no walk over the candidate's own memory (``gc``, frames) can reach a held-out value. It
runs as ``python -I`` (isolated: no user site, no environment variables, script directory
not on the path), stdin closed, in a new session (its own process group). Limits: wall clock (the parent kills the whole process group with
SIGKILL on timeout), CPU seconds (``RLIMIT_CPU``), address space (``RLIMIT_AS``, so a
memory bomb raises ``MemoryError``), file size (``RLIMIT_FSIZE``).

Network: the runner first tries to enter a fresh network namespace (``unshare(CLONE_NEWNET)``,
possible as root or with unprivileged user namespaces), where no interface is up. Where the
OS refuses, the weaker guard remains: a ``sys.addaudithook`` hook installed before the
candidate runs, which raises on ``socket.connect/bind/sendto/getaddrinfo``, subprocesses,
``os.system``/``exec``/``fork`` (so a fork bomb never creates a process; as root ``RLIMIT_NPROC``
does not apply, so this hook is the fork guard), on writes, deletes and renames outside the
candidate's own folder, on *reads* and folder listings outside it except the standard library
and site-packages, on imports of the search's own packages (``neuro``, ``scimech``, ``ocean``,
``astro``), on signals to other processes, on ``setrlimit``, on native calls through
``ctypes`` and on loading extension modules from outside the standard library and
site-packages. Audit hooks cannot be removed from Python code; installed native code is
trusted (docs/neuro.md lists what is not guarded). ``SandboxResult.network_guard``
says which network guard was active.
Every failure (exception, non-finite output, timeout, memory) is returned as a failed
result with its error text, never raised.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..data.stores import ArrayStore
from ..tasks import quick_stage
from .evaluate import candidate_inputs, held_out, score_predictions

__all__ = ["SandboxLimits", "SandboxResult", "run_in_sandbox", "write_data", "save_data", "read_data"]

HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class SandboxLimits:
    """Limits of one candidate run: ``wall_seconds``, ``cpu_seconds``, ``memory_bytes``, ``file_bytes``."""

    wall_seconds: float = 60.0
    cpu_seconds: int = 60
    memory_bytes: int = 2 * 1024**3
    file_bytes: int = 256 * 1024**2


@dataclass
class SandboxResult:
    ok: bool
    status: str  # ok | error | timeout | memory | crashed
    error: str = ""
    metrics: dict = field(default_factory=dict)
    arrays: dict = field(default_factory=dict)
    wall_seconds: float = 0.0
    network_guard: str = ""
    stderr: str = ""


def write_data(arrays: dict, path: Path) -> Path:
    """Save a data dict for candidates (``np.savez``)."""
    np.savez(path, **arrays)
    return path


def save_data(full: dict, store: ArrayStore, stage: str = "full") -> Path:
    """A task's full data dict (:meth:`neuro.tasks.ForecastTask.data_arrays`) in a study's
    store, as the data file of one evaluation stage: its arrays are written once whatever
    the stage (the quick stage is cut from them when read, :func:`neuro.tasks.quick_stage`);
    returns the manifest's path (``data-<stage>-<hash>.json``)."""
    return store.save(f"data-{stage}", full, stage=stage)


def read_data(path: str | os.PathLike) -> dict:
    """The data dict of a data file: an ``.npz`` (:func:`write_data`), used as it is, or a
    store manifest (:func:`save_data`), cut to its stage."""
    if str(path).endswith(".json"):
        data, attrs = ArrayStore.load(path)
        return quick_stage(data) if attrs.get("stage") == "quick" else data
    with np.load(path) as z:
        return {k: z[k] for k in z.files}


@functools.lru_cache(maxsize=4)
def _split_data(path: str, stamp: tuple) -> tuple[dict, dict]:
    """(candidate inputs, held-out targets) of a data file, cached per file version."""
    data = read_data(path)
    return candidate_inputs(data), held_out(data)


def run_in_sandbox(
    code: str, data_file: str | os.PathLike, limits: SandboxLimits | None = None, stage: str = "full"
) -> SandboxResult:
    """Run ``code`` (a program defining ``Model``) on ``data_file`` under ``limits``.

    ``data_file`` is a task data file, targets included (:func:`write_data` of
    :meth:`neuro.tasks.ForecastTask.data_arrays`, or a study store's :func:`save_data`;
    read by :func:`read_data`). Only its inputs are given
    to the candidate; its forecasts are scored here against the targets (``metrics``: split ->
    MAE in z units; ``arrays``: MAE per step and the faithfulness read-outs).
    """
    limits = limits or SandboxLimits()
    st = os.stat(data_file)
    inputs, targets = _split_data(os.path.realpath(data_file), (st.st_mtime_ns, st.st_size))
    tmp = Path(tempfile.mkdtemp(prefix="scimech-cand-"))
    t0 = time.perf_counter()
    try:
        (tmp / "candidate.py").write_text(code)
        shutil.copy(HERE / "_runner.py", tmp / "_runner.py")
        shutil.copy(HERE / "evaluate.py", tmp / "evaluate.py")
        np.savez(tmp / "data.npz", **inputs)
        cfg = dict(
            cpu_seconds=limits.cpu_seconds, memory_bytes=limits.memory_bytes, file_bytes=limits.file_bytes, stage=stage
        )
        (tmp / "config.json").write_text(json.dumps(cfg))
        env = {
            "PATH": "/usr/bin:/bin",
            "HOME": str(tmp),
            "OMP_NUM_THREADS": "1",
            "OPENBLAS_NUM_THREADS": "1",
            "MKL_NUM_THREADS": "1",
            "TMPDIR": str(tmp),
        }
        proc = subprocess.Popen(
            [sys.executable, "-I", str(tmp / "_runner.py"), str(tmp)],
            cwd=tmp,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        try:
            _, err = proc.communicate(timeout=limits.wall_seconds)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.communicate()
            return SandboxResult(
                False,
                "timeout",
                f"timed out after {limits.wall_seconds:.0f} s wall clock (the process group was killed)",
                wall_seconds=time.perf_counter() - t0,
            )
        wall = time.perf_counter() - t0
        stderr = err.decode(errors="replace")[-2000:]
        res_path = tmp / "result.json"
        if not res_path.exists():
            why = "crashed"
            if proc.returncode in (-signal.SIGXCPU, -signal.SIGKILL):
                why = "timeout"
            return SandboxResult(
                False,
                why,
                f"candidate process ended with code {proc.returncode} and no result"
                f"{' (CPU limit)' if proc.returncode == -signal.SIGXCPU else ''}: {stderr[-500:]}",
                wall_seconds=wall,
                stderr=stderr,
            )
        res = json.loads(res_path.read_text())
        if not res.get("ok"):
            return SandboxResult(
                False,
                res.get("status", "error"),
                res.get("error", "") + "\n" + res.get("traceback", ""),
                wall_seconds=wall,
                network_guard=res.get("network_guard", ""),
                stderr=stderr,
            )
        guard = res.get("network_guard", "")
        try:  # the candidate's output is untrusted: plain arrays only, checked again while scoring
            with np.load(tmp / "out.npz", allow_pickle=False) as z:
                arrays = {k: z[k] for k in z.files}
            metrics, arrays = score_predictions(arrays, targets)
        except Exception as err:  # noqa: BLE001 - a forged or missing output is a failed node
            return SandboxResult(
                False, "error", f"{type(err).__name__}: {err}", wall_seconds=wall, network_guard=guard, stderr=stderr
            )
        return SandboxResult(
            True, "ok", metrics=metrics, arrays=arrays, wall_seconds=wall, network_guard=guard, stderr=stderr
        )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
