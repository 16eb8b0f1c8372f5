"""Layerwise probing: 12 layers x 256 features x 20k samples, seconds and peak memory."""

from __future__ import annotations

import time
import tracemalloc

import numpy as np

from bench.common import write_section
from scimech.probe import probe_sites


def main() -> None:
    rng = np.random.default_rng(0)
    n, d, L = 20_000, 256, 12
    w = rng.normal(size=d)
    feats = {}
    z = rng.normal(size=n)
    for layer in range(L):
        X = rng.normal(size=(n, d)).astype(np.float32)
        X[:, 0] += (layer / L) * z  # signal grows with depth
        feats[f"layer{layer}"] = X
    y = z + 0.1 * rng.normal(size=n)
    tracemalloc.start()
    t0 = time.perf_counter()
    res = probe_sites(feats, y, cv=5, seeds=[0], control=True, n_bootstrap=200)
    secs = time.perf_counter() - t0
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    inputs_mb = sum(x.nbytes for x in feats.values()) / 2**20
    lines = [f"{L} layers x {d} features x {n} samples, 5-fold ridge probes + control task + BCa (200 resamples).", "",
             "| quantity | value |", "|---|---|", f"| wall time | {secs:.1f} s |",
             f"| peak traced memory beyond inputs | {peak / 2**20:.0f} MiB (inputs {inputs_mb:.0f} MiB) |",
             f"| R2 first / last layer | {res.score_mean.values[0]:.3f} / {res.score_mean.values[-1]:.3f} |"]
    del w
    write_section("probing", "Layerwise probing", lines)


if __name__ == "__main__":
    main()
