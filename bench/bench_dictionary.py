"""Sparse dictionaries on planted activations: scimech's TopK / BatchTopK / JumpReLU vs
scikit-learn's MiniBatchDictionaryLearning, on the same activations.

Run: ``python -m bench.bench_dictionary`` (writes bench/results/dictionary.md; about 3 minutes).

The activations: 20 000 rows of width 64, each a non-negative sum of 4 of 128 planted unit
directions plus noise 0.01. Each method runs in its own process (so its peak resident
memory is its own) on one thread, and is scored on the same rows: throughput (training
rows processed per second: rows x epochs / wall seconds), peak resident memory, variance
explained by the reconstruction, and the planted directions recovered (a learned
direction at cosine > 0.9). SAELens 6 could not be the peer (it pins TransformerLens 3,
scimech supports 4), sparsify 1.7 does not build here, and dictionary_learning pins a CUDA
torch: scikit-learn's dictionary learning (sparse coding by orthogonal matching pursuit)
is the well-kept library that takes arbitrary activations.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time

N, D, N_TRUE, K, NOISE = 20_000, 64, 128, 4, 0.01
N_FEATURES, EPOCHS, BATCH = 256, 5, 256


def activations():
    import torch

    g = torch.Generator().manual_seed(0)
    directions = torch.randn(N_TRUE, D, generator=g)
    directions /= directions.norm(dim=1, keepdim=True)
    idx = torch.stack([torch.randperm(N_TRUE, generator=g)[:K] for _ in range(N)])
    codes = torch.zeros(N, N_TRUE).scatter(1, idx, torch.empty(N, K).exponential_(generator=g) + 0.5)
    return codes @ directions + NOISE * torch.randn(N, D, generator=g), directions


def run_one(method: str) -> dict:
    import numpy as np
    import torch

    torch.set_num_threads(1)
    x, directions = activations()
    t0 = time.perf_counter()
    if method == "sklearn":
        from sklearn.decomposition import MiniBatchDictionaryLearning

        model = MiniBatchDictionaryLearning(
            n_components=N_FEATURES,
            batch_size=BATCH,
            max_iter=EPOCHS,
            transform_algorithm="omp",
            transform_n_nonzero_coefs=K,
            fit_algorithm="cd",
            random_state=0,
        )
        model.fit(x.numpy())
        seconds = time.perf_counter() - t0
        atoms = torch.as_tensor(model.components_, dtype=torch.float32)
        recon = torch.as_tensor(model.transform(x.numpy()) @ model.components_, dtype=torch.float32)
    else:
        from scimech.analysis.dictionary import train_dictionary

        dic, _ = train_dictionary(x, kind=method, n_features=N_FEATURES, k=K, epochs=EPOCHS, batch_size=BATCH, lr=3e-3)
        seconds = time.perf_counter() - t0
        atoms = dic.W_dec.detach()
        with torch.no_grad():
            recon = dic(x)
    atoms = atoms / atoms.norm(dim=1, keepdim=True)
    cos = (directions @ atoms.T).max(1).values
    fve = 1 - float((x - recon).pow(2).sum() / (x - x.mean(0)).pow(2).sum())
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {
        "method": method,
        "seconds": seconds,
        "rows_per_s": N * EPOCHS / seconds,
        "peak_mib": peak_mib,
        "fve": fve,
        "recovered": int((cos > 0.9).sum()),
        "median_cos": float(np.median(cos.numpy())),
    }


LABELS = {
    "topk": "scimech TopK",
    "batchtopk": "scimech BatchTopK",
    "jumprelu": "scimech JumpReLU",
    "sklearn": "scikit-learn MiniBatchDictionaryLearning (OMP, 4 atoms)",
}


def main() -> None:
    from bench.common import write_section

    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
    rows = []
    for method in ("topk", "batchtopk", "jumprelu", "sklearn"):
        out = subprocess.run(
            [sys.executable, "-m", "bench.bench_dictionary", "--one", method],
            capture_output=True,
            text=True,
            env=env,
            check=True,
        )
        rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
    base = next(r for r in rows if r["method"] == "sklearn")
    lines = [
        f"{N} rows of width {D}, each a non-negative sum of {K} of {N_TRUE} planted unit directions (+ noise "
        f"{NOISE}); {N_FEATURES} dictionary features, {EPOCHS} epochs (scikit-learn: max_iter={EPOCHS}) in "
        f"batches of {BATCH}; one thread, each method in its own process (peak resident memory includes the "
        "interpreter, torch and the activations).",
        "",
        "| method | wall s | rows/s | vs scikit-learn | peak MiB | variance explained | planted recovered "
        "(cos > 0.9) | median best cosine |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {LABELS[r['method']]} | {r['seconds']:.1f} | {r['rows_per_s']:.0f} | "
            f"{r['rows_per_s'] / base['rows_per_s']:.1f}x | {r['peak_mib']:.0f} | {r['fve']:.3f} | "
            f"{r['recovered']} / {N_TRUE} | {r['median_cos']:.3f} |"
        )
    lines += ["", f"1-minute load average at the end: {os.getloadavg()[0]:.1f} (2 shared cores: read the ratios)."]
    write_section("dictionary", "Sparse dictionaries: throughput, memory and recovery vs scikit-learn", lines)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--one":
        print(json.dumps(run_one(sys.argv[2])))
    else:
        main()
