"""The sweeps' steady heap (scimech.run.memory): within it, big temporaries freed by a pass are
reused rather than handed back to the system and paged in afresh. Counted in minor page faults
(the process's own count, from getrusage), from glibc's static defaults (128 kB thresholds) set
here first, under which every 16 MB block is fresh pages (4096 faults each)."""

from __future__ import annotations

import ctypes
import platform
import resource

import pytest
import torch

from scimech.run import memory
from scimech.run.memory import steady_heap

GLIBC = platform.system() == "Linux" and platform.libc_ver()[0] == "glibc"
BLOCK = 4 * 1024 * 1024  # float32 elements: 16 MB, 4096 pages of 4 kB


def _faults() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def _churn(rounds: int = 6) -> int:
    """Page faults of ``rounds`` passes that each fill and free three 16 MB temporaries."""
    before = _faults()
    for _ in range(rounds):
        a = torch.ones(BLOCK)
        b = a * 2.0
        c = b + a
        del a, b, c
    return _faults() - before


def _static_defaults() -> None:
    libc = ctypes.CDLL("libc.so.6")
    libc.mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    libc.mallopt(-3, 128 * 1024)  # M_MMAP_THRESHOLD
    libc.mallopt(-1, 128 * 1024)  # M_TRIM_THRESHOLD


@pytest.mark.skipif(not GLIBC, reason="the steady heap acts on glibc's malloc only (elsewhere it does nothing)")
def test_big_temporaries_are_reused_within_the_steady_heap(monkeypatch):
    monkeypatch.delenv("SCIMECH_STEADY_HEAP", raising=False)
    _static_defaults()
    fresh = _churn()
    assert fresh >= 6 * 3 * 4096 * 0.9  # every block paged in afresh (the count the heap saves)
    with steady_heap():
        _churn(2)  # the first rounds page the blocks in (the heap grows to the working set)
        kept = _churn()
    assert kept < 0.25 * fresh  # at most the working set paged in once more, not every round
    with steady_heap(), steady_heap():  # reentrant: the inner exit keeps the outer's heap
        _churn(1)
    monkeypatch.setenv("SCIMECH_STEADY_HEAP", "0")  # turned off by the environment: malloc is not touched
    monkeypatch.setattr(memory, "_libc", lambda: pytest.fail("steady_heap reached libc with SCIMECH_STEADY_HEAP=0"))
    with steady_heap():
        pass
