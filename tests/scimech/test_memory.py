"""The sweeps' steady heap (scimech.run.memory): within it, big temporaries freed by a pass stay in
the heap for reuse instead of being handed back to the system (and paged in afresh by the next
pass); on leaving, the free heap is given back. Read from glibc's own accounting of the main arena
(``mallinfo2``) and the process's resident memory, starting from glibc's static defaults (128 kB thresholds) set here, under which a
16 MB block is mapped for itself and unmapped when freed. The speed this buys is measured in
bench/RESULTS.md (page faults and seconds of a 144-head sweep), not here."""

from __future__ import annotations

import ctypes
import os
import platform
import resource
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from scimech.run import memory
from scimech.run.memory import steady_heap

GLIBC = platform.system() == "Linux" and platform.libc_ver()[0] == "glibc"
MB = 1024 * 1024
ROOT = Path(__file__).resolve().parents[2]
BLOCK = 4 * MB  # float32 elements: 16 MB


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost"
        )
    ]  # fmt: skip


def _info() -> _MallInfo2:
    libc = ctypes.CDLL("libc.so.6")
    libc.mallinfo2.restype = _MallInfo2
    return libc.mallinfo2()


def _resident() -> int:
    """Resident bytes of this process."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize()


def _static_defaults() -> None:
    libc = ctypes.CDLL("libc.so.6")
    libc.mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    libc.mallopt(-3, 128 * 1024)  # M_MMAP_THRESHOLD
    libc.mallopt(-1, 128 * 1024)  # M_TRIM_THRESHOLD
    libc.malloc_trim(0)


def _three_blocks() -> tuple[int, int]:
    """Bytes mapped for their own (``hblkhd``) while three 16 MB temporaries live, and bytes free
    in the heap (``fordblks``) once they are freed."""
    a, b = torch.ones(BLOCK), torch.full((BLOCK,), 2.0)
    c = a + b
    mapped = _info().hblkhd
    del a, b, c
    return mapped, _info().fordblks


def _in_a_fresh_process() -> None:
    """The checks, run in a process of their own: a heap that earlier tests fragmented would serve
    16 MB blocks from its free lists under any thresholds."""
    _static_defaults()
    mapped_before = _info().hblkhd
    mapped, free = _three_blocks()
    assert mapped - mapped_before >= 48 * MB  # glibc's static defaults: each block mapped for itself...
    assert free < 16 * MB  # ...and handed back when freed: the next pass pages it in afresh
    with steady_heap():
        mapped, free = _three_blocks()
        assert mapped - mapped_before < 16 * MB  # from the heap, not mapped for themselves
        assert free >= 48 * MB  # kept in the heap once freed
        for _ in range(10):  # the heap grows to a bound (freed blocks too small for an aligned 16 MB one)...
            _three_blocks()
        arena = _info().arena
        for _ in range(10):
            _three_blocks()
        assert _info().arena == arena  # ...and then every pass reuses it: 10 passes, not a byte more
        with steady_heap():  # reentrant: the inner exit keeps the outer's heap
            pass
        assert _info().fordblks >= 48 * MB
        held = _resident()
    assert _resident() < held - 32 * MB  # given back to the system on leaving (malloc_trim)


@pytest.mark.skipif(not GLIBC, reason="the steady heap acts on glibc's malloc only (elsewhere it does nothing)")
def test_freed_temporaries_stay_in_the_heap_within_the_steady_heap_and_are_given_back_after():
    env = {k: v for k, v in os.environ.items() if k != "SCIMECH_STEADY_HEAP"}
    code = "import tests.scimech.test_memory as t; t._in_a_fresh_process(); print('ok')"
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stderr[-3000:]


def test_the_environment_turns_it_off(monkeypatch):
    monkeypatch.setenv("SCIMECH_STEADY_HEAP", "0")
    monkeypatch.setattr(memory, "_libc", lambda: pytest.fail("steady_heap reached libc with SCIMECH_STEADY_HEAP=0"))
    with steady_heap():
        pass
