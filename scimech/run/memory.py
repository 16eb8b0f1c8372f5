"""A steady heap for the sweeps' tiled passes on Linux (glibc).

A tiled pass copies the batch once per site it carries (96 rows for 12 heads of a batch of
8), so the model's temporaries are tens of MB each. glibc serves blocks above its mmap
threshold (128 kB, raised on its own up to 32 MB as such blocks are freed) with fresh pages
and gives the top of its heap back to the system once more than its trim threshold is free
there: a forward pass of big temporaries then touches fresh pages again and again. At the
GPT-2-small shape that is 1.4-1.8 million page faults per 144-head sweep, about 15 % of its time
(``bench/RESULTS.md``), which the peers' one-row-of-samples passes never pay.

:func:`steady_heap` keeps what the block frees for reuse: it raises the mmap threshold to 32 MB
(the most glibc's own adjustment reaches) and the trim threshold past any working set for the
block; on leaving it gives the free heap back (``malloc_trim``) and sets the trim threshold to
64 MB (2 x 32 MB, again the value glibc's own adjustment reaches). The heap within the block holds
what the passes freed, fragments included, so its peak is a little higher (a 144-head sweep at
GPT-2-small shape: 1501 MB peak resident against 1450 MB without it, where the sweep adds ~300 MB);
nothing is held after it. Elsewhere than glibc, or with ``SCIMECH_STEADY_HEAP=0`` in the
environment, it does nothing.
"""

from __future__ import annotations

import ctypes
import functools
import os
import platform
import threading
from contextlib import contextmanager

__all__ = ["steady_heap"]

_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameters (malloc.h)
_MMAP_MAX = 32 * 1024 * 1024  # DEFAULT_MMAP_THRESHOLD_MAX on 64-bit systems
_HELD = 2**31 - 1  # the largest trim threshold mallopt takes (2 GB): past the working set of a pass
_lock = threading.Lock()
_depth = 0


@functools.cache
def _libc():
    """glibc's malloc controls, found once (``platform.libc_ver`` reads the interpreter's binary)."""
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return None
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt.argtypes, libc.malloc_trim.argtypes = [ctypes.c_int, ctypes.c_int], [ctypes.c_size_t]
        return libc
    except (OSError, AttributeError):
        return None


def _wanted() -> bool:
    return os.environ.get("SCIMECH_STEADY_HEAP", "1").strip().lower() not in ("0", "false", "no", "off")


@contextmanager
def steady_heap():
    """Within the block, memory freed by the process is kept for reuse, not handed back to the
    system and touched afresh (see the module docs); reentrant; a no-op off glibc."""
    global _depth
    libc = _libc() if _wanted() else None
    if libc is None:
        yield
        return
    with _lock:
        _depth += 1
        if _depth == 1:
            libc.mallopt(_M_MMAP_THRESHOLD, _MMAP_MAX)
            libc.mallopt(_M_TRIM_THRESHOLD, _HELD)
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                libc.malloc_trim(0)
                libc.mallopt(_M_TRIM_THRESHOLD, 2 * _MMAP_MAX)
