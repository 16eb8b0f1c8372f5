"""Run an untrusted candidate program in its own process with limits.

Each candidate gets a fresh temporary directory holding only its source, its data file
(``data.npz``) and the runner, and runs as ``python -I`` (isolated: no user site, no
environment variables, script directory not on the path) in a new session (its own
process group). Limits: wall clock (the parent kills the whole process group with
SIGKILL on timeout), CPU seconds (``RLIMIT_CPU``), address space (``RLIMIT_AS``, so a
memory bomb raises ``MemoryError``), file size (``RLIMIT_FSIZE``).

Network: the runner first tries to enter a fresh network namespace (``unshare(CLONE_NEWNET)``,
possible as root or with unprivileged user namespaces), where no interface is up. Where the
OS refuses, the weaker guard remains: a ``sys.addaudithook`` hook installed before the
candidate runs, which raises on ``socket.connect/bind/sendto/getaddrinfo``, subprocesses,
``os.system``/``exec``/``fork`` (so a fork bomb never creates a process), on writes, deletes and
renames outside the candidate's own folder, and on imports of the search's own packages
(``neuro``, ``scimech``, ``ocean``, ``astro``). Audit hooks cannot be removed from Python code, but native
code (ctypes) could bypass them; ``SandboxResult.network_guard`` says which guard was active.
Every failure (exception, non-finite output, timeout, memory) is returned as a failed
result with its error text, never raised.
"""

from __future__ import annotations

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

__all__ = ["SandboxLimits", "SandboxResult", "run_in_sandbox", "write_data"]

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
    status: str                      # ok | error | timeout | memory | crashed
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


def run_in_sandbox(code: str, data_file: str | os.PathLike, limits: SandboxLimits | None = None,
                   stage: str = "full") -> SandboxResult:
    """Run ``code`` (a program defining ``Model``) on ``data_file`` under ``limits``."""
    limits = limits or SandboxLimits()
    tmp = Path(tempfile.mkdtemp(prefix="scimech-cand-"))
    t0 = time.perf_counter()
    try:
        (tmp / "candidate.py").write_text(code)
        shutil.copy(HERE / "_runner.py", tmp / "_runner.py")
        shutil.copy(HERE / "evaluate.py", tmp / "evaluate.py")
        try:
            os.link(data_file, tmp / "data.npz")
        except OSError:
            shutil.copy(data_file, tmp / "data.npz")
        cfg = dict(cpu_seconds=limits.cpu_seconds, memory_bytes=limits.memory_bytes,
                   file_bytes=limits.file_bytes, stage=stage)
        (tmp / "config.json").write_text(json.dumps(cfg))
        env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp), "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
               "MKL_NUM_THREADS": "1", "TMPDIR": str(tmp)}
        proc = subprocess.Popen([sys.executable, "-I", str(tmp / "_runner.py"), str(tmp)], cwd=tmp, env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
        try:
            _, err = proc.communicate(timeout=limits.wall_seconds)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.communicate()
            return SandboxResult(False, "timeout", f"timed out after {limits.wall_seconds:.0f} s wall clock "
                                 "(the process group was killed)", wall_seconds=time.perf_counter() - t0)
        wall = time.perf_counter() - t0
        stderr = err.decode(errors="replace")[-2000:]
        res_path = tmp / "result.json"
        if not res_path.exists():
            why = "crashed"
            if proc.returncode in (-signal.SIGXCPU, -signal.SIGKILL):
                why = "timeout"
            return SandboxResult(False, why, f"candidate process ended with code {proc.returncode} and no result"
                                 f"{' (CPU limit)' if proc.returncode == -signal.SIGXCPU else ''}: {stderr[-500:]}",
                                 wall_seconds=wall, stderr=stderr)
        res = json.loads(res_path.read_text())
        if not res.get("ok"):
            return SandboxResult(False, res.get("status", "error"), res.get("error", "") + "\n" + res.get("traceback", ""),
                                 wall_seconds=wall, network_guard=res.get("network_guard", ""), stderr=stderr)
        arrays = {}
        if (tmp / "out.npz").exists():
            with np.load(tmp / "out.npz") as z:
                arrays = {k: z[k] for k in z.files}
        return SandboxResult(True, "ok", metrics=res["metrics"], arrays=arrays, wall_seconds=wall,
                             network_guard=res.get("network_guard", ""), stderr=stderr)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
