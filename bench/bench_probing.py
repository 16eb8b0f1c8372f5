"""Layerwise probing: 12 layers x 256 features x 20k samples, seconds and peak memory.

Run: ``python -m bench.bench_probing`` (``--quick`` for a 2k-sample smoke run). Writes
``bench/results/probing.md``.

What is timed: :func:`scimech.analysis.probe.probe_sites` on 12 float32 layers of 20 000 x 256
features with a planted signal that grows with depth: 5-fold ridge probes, the
Hewitt & Liang control task on every fold, a full fit per layer (weights, SNR) and, in a
second run, the BCa bootstrap interval of the out-of-fold R2. Peak memory is measured two
ways: Python-traced allocations beyond the inputs (``tracemalloc``; numpy reports its
buffers to it) and the process RSS sampled every 10 ms (``psutil``).
"""

from __future__ import annotations

import argparse
import os
import threading
import time
import tracemalloc

import numpy as np
import psutil
from threadpoolctl import threadpool_limits

from bench.common import write_section
from scimech.analysis.probe import probe_sites


class PeakRSS:
    """Sample the process resident set size in a thread; ``peak`` in bytes."""

    def __init__(self, interval: float = 0.01):
        self.interval = interval
        self.proc = psutil.Process(os.getpid())
        self.peak = 0
        self._stop = threading.Event()

    def __enter__(self):
        self.start = self.proc.memory_info().rss
        self.peak = self.start
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()
        return self

    def _run(self):
        while not self._stop.is_set():
            self.peak = max(self.peak, self.proc.memory_info().rss)
            time.sleep(self.interval)

    def __exit__(self, *exc):
        self._stop.set()
        self._t.join()
        self.peak = max(self.peak, self.proc.memory_info().rss)


def make_layers(n: int, d: int, n_layers: int, seed: int = 0) -> tuple[dict[str, np.ndarray], np.ndarray]:
    rng = np.random.default_rng(seed)
    z = rng.normal(size=n)
    feats = {}
    for layer in range(n_layers):
        X = rng.normal(size=(n, d)).astype(np.float32)
        X[:, 0] += (layer / n_layers) * z  # signal grows with depth
        feats[f"layer{layer}"] = X
    return feats, z + 0.1 * rng.normal(size=n)


def timed(feats, y, **kw):
    tracemalloc.start()
    with PeakRSS() as rss:
        t0 = time.perf_counter()
        res = probe_sites(feats, y, cv=5, seeds=[0], control=True, dim="layer", coords=list(range(len(feats))), **kw)
        secs = time.perf_counter() - t0
    _, traced = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return res, secs, traced, rss.peak


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="2 000 samples instead of 20 000 (smoke run)")
    ap.add_argument("--n-bootstrap", type=int, default=200)
    ap.add_argument(
        "--threads",
        type=int,
        default=1,
        help="BLAS threads (threadpoolctl); 0 = library default. On shared cores 1 is much faster.",
    )
    args = ap.parse_args(argv)
    if args.threads:
        with threadpool_limits(args.threads):
            run(args)
    else:
        run(args)


def run(args) -> None:
    load0 = os.getloadavg()[0]
    n, d, L = (2_000 if args.quick else 20_000), 256, 12
    feats, y = make_layers(n, d, L)
    inputs_mb = sum(x.nbytes for x in feats.values()) / 2**20
    rows = []
    res, secs, traced, rss = timed(feats, y, n_bootstrap=0)
    rows.append(("probes + controls", secs, traced, rss))
    res_b, *m = timed(feats, y, n_bootstrap=args.n_bootstrap, ci_method="BCa")
    rows.append((f"+ BCa interval ({args.n_bootstrap} resamples)", *m))
    res_p, *m = timed(feats, y, n_bootstrap=args.n_bootstrap, ci_method="percentile")
    rows.append((f"+ percentile interval ({args.n_bootstrap} resamples)", *m))
    fits = L * (5 * 2 + 1)
    mib = 2**20
    lines = [
        f"{L} layers x {d} features (float32) x {n} samples; 5-fold StandardScaler+Ridge probes, control task on "
        f"every fold, one full fit per layer ({fits} ridge fits); BLAS threads: {args.threads or 'default'}"
        f", CPUs visible: {os.cpu_count()}, load average at start {load0:.1f} (a machine shared with other jobs).",
        "",
        "| run | wall time | peak traced memory (beyond inputs) | peak process RSS |",
        "|---|---|---|---|",
        *[f"| {name} | {t:.1f} s | {tr / mib:.0f} MiB | {r / mib:.0f} MiB |" for name, t, tr, r in rows],
        "",
        f"Inputs: {inputs_mb:.0f} MiB. R2 first / last layer: {res.score_mean.values[0]:.3f} / "
        f"{res.score_mean.values[-1]:.3f}; selectivity last layer {res.selectivity_mean.values[-1]:.3f}; "
        f"95% interval last layer BCa [{res_b.score_ci_low.values[-1]:.3f}, {res_b.score_ci_high.values[-1]:.3f}], "
        f"percentile [{res_p.score_ci_low.values[-1]:.3f}, {res_p.score_ci_high.values[-1]:.3f}].",
        "",
        "BCa's jackknife is O(n^2) per site (scipy resamples n leave-one-out sets), so at 20k samples it "
        'dominates; `ci_method="percentile"` costs O(resamples x n).',
    ]
    write_section("probing", "Layerwise probing", lines)


if __name__ == "__main__":
    main()
