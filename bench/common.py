"""Small helpers shared by the benchmarks: timing and writing a results section."""

from __future__ import annotations

import platform
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def best_of(fn, repeat: int = 5, number: int = 1) -> float:
    """Median seconds of ``number`` calls, over ``repeat`` rounds (after one warm-up)."""
    fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        times.append((time.perf_counter() - t0) / number)
    return statistics.median(times)


def write_section(name: str, title: str, lines: list[str]) -> Path:
    """Write ``bench/results/<name>.md``: the title, the command and the versions that produced it, ``lines``."""
    import scimech

    cmd = "python -m bench.bench_" + name
    text = "\n".join(
        [
            f"## {title}",
            "",
            f"Command: `{cmd}` (scimech {scimech.__version__}, Python {platform.python_version()})",
            "",
            *lines,
            "",
        ]
    )
    out = HERE / "results" / f"{name}.md"
    out.parent.mkdir(exist_ok=True)
    out.write_text(text)
    sys.stdout.write(text)
    return out
