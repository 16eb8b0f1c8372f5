"""Run every benchmark in bench/ and merge their sections into bench/RESULTS.md.

Usage: ``python -m bench.run_all [name ...]`` (names like ``recording``, ``ocean``).
Each ``bench/bench_<name>.py`` writes ``bench/results/<name>.md``; this script runs them
one after another (never concurrently: timings on a 2-core machine) and rebuilds
RESULTS.md from all sections present.
"""

from __future__ import annotations

import platform
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main(argv: list[str]) -> int:
    names = argv or sorted(p.stem.removeprefix("bench_") for p in HERE.glob("bench_*.py"))
    failed = []
    for name in names:
        print(f"== bench {name}", flush=True)
        t0 = time.perf_counter()
        rc = subprocess.call([sys.executable, "-m", f"bench.bench_{name}"], cwd=HERE.parent)
        print(f"== bench {name}: rc={rc} in {time.perf_counter() - t0:.0f} s", flush=True)
        if rc:
            failed.append(name)
    merge()
    return 1 if failed else 0


def merge() -> Path:
    import os

    sections = sorted((HERE / "results").glob("*.md"))
    head = [
        "# Benchmark results",
        "",
        f"Machine: {os.cpu_count()} cores, Python {platform.python_version()}, {platform.machine()}. "
        "Each section names the command that produced it; `make bench` reruns them all.",
        "",
    ]
    body = [s.read_text().strip() + "\n" for s in sections]
    out = HERE / "RESULTS.md"
    out.write_text("\n".join(head + body))
    return out


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
