"""Neuro benchmarks: simulator throughput and search node evaluations per minute.

Run as ``python -m bench.bench_neuro``; writes ``bench/results/neuro.md``.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent


def sim_rate(batch: int, duration: float = 0.3) -> float:
    from neuro.sim import Simulator, stack_stimuli

    sim = Simulator(seed=0)
    stim = stack_stimuli([dict(condition="grating_fwd", onset=0.0)] * batch, duration, sim.dt)
    t0 = time.perf_counter()
    sim.run(stim, record_every=5)
    return batch * duration / (time.perf_counter() - t0)


def node_rate(task, workers: int, nodes: int = 6) -> float:
    from neuro.search.offline import OfflineProposer
    from neuro.search.tree import TreeSearch

    with tempfile.TemporaryDirectory() as d:
        ts = TreeSearch(task, OfflineProposer(priors=True), d, max_nodes=nodes, n_drafts=nodes, workers=workers,
                        quick_threshold=1e9)
        t0 = time.perf_counter()
        ts.run()
        return nodes / ((time.perf_counter() - t0) / 60.0)


def main() -> int:
    from neuro.tasks import build_task

    r1 = sim_rate(1)
    r64 = sim_rate(64)
    task = build_task(True, duration=1.0, max_windows=60)
    n1 = node_rate(task, 1)
    n2 = node_rate(task, 2)
    lines = [
        "## neuro",
        "",
        "Command: `python -m bench.bench_neuro` "
        f"({os.cpu_count()} cores, shared; numpy simulator at dt = 1 ms, RK4 body).",
        "",
        "| measure | value |",
        "|---|---|",
        f"| simulated s per wall s, 1 trial | {r1:.3f} |",
        f"| simulated s per wall s, 64 parallel trials (total over trials) | {r64:.3f} |",
        f"| node evaluations per minute, 1 worker (quick + full stage, sandboxed) | {n1:.1f} |",
        f"| node evaluations per minute, 2 workers | {n2:.1f} |",
        "",
    ]
    text = "\n".join(lines)
    print(text)
    (HERE / "results").mkdir(exist_ok=True)
    (HERE / "results" / "neuro.md").write_text(text)
    _ = np
    return 0


if __name__ == "__main__":
    sys.exit(main())
