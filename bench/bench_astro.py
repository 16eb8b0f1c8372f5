"""astro benchmarks: synthetic galaxies per second; per-head ablation sweep vs a naive loop.

Run: ``python -m bench.bench_astro`` (writes bench/results/astro.md).
"""

from __future__ import annotations

import os
import time

import numpy as np
import torch

from bench.common import best_of, write_section


def main() -> None:
    torch.set_num_threads(int(os.environ.get("BENCH_THREADS", "1")))
    from astro import synthetic as S
    from astro.models import aion as A
    from astro.models import standin as M
    from scimech.intervene import ablate, ablation_sweep

    lines = []
    S.make_galaxies(20, seed=0)                          # warm caches (templates, filters)
    rows = []
    for images in (False, True):
        n = 400
        t0 = time.perf_counter()
        S.make_galaxies(n, seed=1, images=images)
        dt = time.perf_counter() - t0
        rows.append((images, n, dt, n / dt))
    lines += ["### Synthetic galaxies", "", "| images (4 x 24 x 24) | galaxies | seconds | galaxies/s |",
              "|---|---|---|---|"]
    lines += [f"| {'yes' if im else 'no (catalogue only)'} | {n} | {dt:.2f} | {r:.0f} |" for im, n, dt, r in rows]

    train = S.make_galaxies(300, seed=2)
    test = S.make_galaxies(256, seed=3)
    codecs = M.fit_codecs(train.catalog)
    ad = A.AIONRedshift(M.build(codecs=codecs).eval(), codecs, M.PatchTokenizer().fit(train.images))
    batch = ad.batch(ad.tokenize(test.catalog, test.images))
    sites = ad.head_sites()                               # every head of every encoder block
    metric = ad.z_metric()

    def sweep():
        ablation_sweep(ad.model, batch, sites, metric, method="zero", forward=ad.forward, batch_size=256,
                       max_rows=1024)

    def naive():
        with torch.no_grad():
            ad.expected_z(ad.forward(ad.model, batch))
            for s in sites:
                with ablate(ad.model, [s], method="zero"):
                    ad.expected_z(ad.forward(ad.model, batch))

    t_sweep = best_of(sweep, repeat=3)
    t_naive = best_of(naive, repeat=3)
    res = ablation_sweep(ad.model, batch, sites, metric, method="zero", forward=ad.forward, max_rows=1024)
    ref = []
    with torch.no_grad():
        for s in sites:
            with ablate(ad.model, [s], method="zero"):
                ref.append(ad.expected_z(ad.forward(ad.model, batch)).numpy())
    err = float(np.abs(res["ablated"].values - np.stack(ref)).max())
    lines += ["", f"### Per-head zero-ablation sweep ({len(sites)} heads, {len(test)} test galaxies, "
              f"stand-in dim 32 x 3 blocks, 44 tokens, torch threads {torch.get_num_threads()})", "",
              "| method | seconds | speed-up |", "|---|---|---|",
              f"| naive loop: one forward per head (+ baseline) | {t_naive:.2f} | 1.0 |",
              f"| `scimech.ablation_sweep` (heads tiled into shared forwards) | {t_sweep:.2f} | {t_naive / t_sweep:.2f} |",
              "", f"Max |z difference| between the two: {err:.2e}.",
              "", "Machine shared with other jobs while measured; read ratios, not absolute times."]
    write_section("astro", "astro: synthetic data and head sweeps", lines)


if __name__ == "__main__":
    main()
