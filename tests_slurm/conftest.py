"""Tests against a real SLURM (scripts/slurm_local.sh starts a one-node one; scripts/ci_slurm.sh
starts it and runs this folder). Not part of `make test`: `pytest` collects only tests/.

No SLURM answering is a failure, never a skip: these tests exist to be run against one.
"""

from __future__ import annotations

import getpass
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

os.environ.setdefault("SCIMECH_QUIET", "1")

REPO = Path(__file__).resolve().parents[1]
DRIVER = Path(__file__).with_name("driver.py")
USER = getpass.getuser()


def pytest_configure(config):
    config.addinivalue_line("markers", "slurm: needs a running SLURM (scripts/slurm_local.sh; scripts/ci_slurm.sh)")


def pytest_collection_modifyitems(items):
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.slurm)


def sh(*cmd: str, timeout: float = 30) -> str:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=True).stdout


def our_jobs() -> list[str]:
    """Jobs of this user that scimech submitted (their names start with scimech-)."""
    out = sh("squeue", "-h", "-u", USER, "-o", "%i %j %T")
    return [line for line in out.splitlines() if line.split()[1].startswith("scimech-")]


def wait_queue_empty(limit: float = 30.0) -> list[str]:
    """Our jobs still in the queue after at most ``limit`` s (COMPLETING ones leave within KillWait)."""
    deadline = time.monotonic() + limit
    while (left := our_jobs()) and time.monotonic() < deadline:
        time.sleep(1)
    return left


@pytest.fixture(scope="session")
def slurm() -> dict:
    """The SLURM to run on: its default partition and node size. Fails when none answers."""
    if not shutil.which("sinfo"):
        pytest.fail("sinfo not found: install and start SLURM with scripts/slurm_local.sh (eval its output)")
    try:
        rows = sh("sinfo", "-h", "-N", "-o", "%P %T %c %m", timeout=20).split()
    except (subprocess.SubprocessError, OSError) as err:
        pytest.fail(f'no SLURM answers ({err}); start one: eval "$(scripts/slurm_local.sh)"')
    if len(rows) < 4 or not rows[1].startswith(("idle", "mix", "alloc", "compl")):
        pytest.fail(f"no usable SLURM node: sinfo says {' '.join(rows) or 'nothing'}")
    return {"partition": rows[0].rstrip("*"), "cpus": int(rows[2]), "memory_mb": int(rows[3].rstrip("+"))}


@pytest.fixture(autouse=True)
def _empty_queue_around(slurm):
    left = wait_queue_empty()
    assert not left, f"scimech jobs left by an earlier run: {left}"
    yield
    left = wait_queue_empty()
    if left:
        subprocess.run(["scancel", "--quiet", *[x.split()[0] for x in left]], timeout=30)
    assert not left, f"jobs left in the queue after the test: {left}"


@pytest.fixture
def cluster_file(tmp_path, slurm):
    """Write a cluster file: 1 core and 1 GB per job (the CI machine has 2 shared cores)."""

    def write(**over) -> Path:
        cfg = {
            "kind": "slurm",
            "cores": 1,
            "memory": "1GB",
            "walltime": "00:10:00",
            "jobs": 2,
            "queue": slurm["partition"],
            "log_directory": str(tmp_path / "logs"),
            "start_timeout": 90,
        }
        cfg.update(over)
        lines = ["[cluster]"] + [f"{k} = {v!r}".replace("'", '"') for k, v in cfg.items() if v is not None]
        path = tmp_path / "cluster.toml"
        path.write_text("\n".join(lines) + "\n")
        return path

    return write


def run_driver(out: Path, *args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    """tests_slurm/driver.py (a tiny study) in a subprocess, under a timeout."""
    return subprocess.run(
        [sys.executable, str(DRIVER), "--out", str(out), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=out.parent,
    )


class _Tools:
    """The helpers above for the test module (conftest is not importable under importlib mode)."""

    driver = DRIVER
    our_jobs = staticmethod(our_jobs)
    wait_queue_empty = staticmethod(wait_queue_empty)
    run_driver = staticmethod(run_driver)


@pytest.fixture
def tools() -> type[_Tools]:
    return _Tools
