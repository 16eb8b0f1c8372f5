"""Head-patching sweep over all 48 heads of a 6-layer, 8-head model: batched vs naive.

Run: ``python -m bench.bench_patching`` (writes bench/results/patching.md).
The naive loop runs one forward pass (and one host synchronisation) per head; the batched
``patching_sweep`` tiles the batch so that several heads share one forward pass. Both are
timed in the same process, alternating round by round.
"""

from __future__ import annotations

import os

import numpy as np
import torch

from bench.bench_recording import interleaved
from bench.common import write_section
from scimech import metrics
from scimech.attention import decompose_attention
from scimech.intervene import patch, patching_sweep
from scimech.record import Recorder

N_LAYERS, HEADS, WIDTH, BATCH, TOKENS, ROUNDS, THREADS = 6, 8, 64, 16, 32, 5, 2


def main() -> None:
    torch.set_num_threads(THREADS)
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(WIDTH, HEADS, 2 * WIDTH, batch_first=True, dropout=0.0)
    model = decompose_attention(torch.nn.TransformerEncoder(layer, N_LAYERS, enable_nested_tensor=False).eval())
    clean, corrupt = torch.randn(BATCH, TOKENS, WIDTH), torch.randn(BATCH, TOKENS, WIDTH)
    sites = [f"layers.{li}.self_attn.heads[{h}]" for li in range(N_LAYERS) for h in range(HEADS)]
    metric = metrics.output()
    n = len(sites)

    def batched(max_rows):
        return lambda: patching_sweep(model, clean, corrupt, sites, metric, batch_size=BATCH, max_rows=max_rows)

    @torch.no_grad()
    def naive():
        with Recorder(model, sites) as rec:
            model(clean)
        acts = dict(rec.activations)
        model(corrupt)  # the unpatched corrupted run, as the sweep does
        vals = []
        for s in sites:
            with patch(model, {s: acts[s]}):
                vals.append(metric(model(corrupt)).tolist())  # one forward and one host sync per head
        return np.array(vals)

    variants = {"default": 256, "all": BATCH * n}  # max_rows: the default tile budget, and all 48 at once
    runs = {f"batched_{k}": batched(v) for k, v in variants.items()}
    runs["naive"] = naive
    ref = naive()
    err = max(float(np.abs(runs[k]().patched.values - ref).max()) for k in runs if k != "naive")
    t = interleaved(runs, rounds=ROUNDS)
    nv = t["naive"]

    def row(label: str, r: dict) -> str:
        return (f"| {label} | {r['wall']:.3f} [{r['lo']:.3f}-{r['hi']:.3f}] | {nv['wall'] / r['wall']:.2f}x | "
                f"{r['cpu']:.3f} | {nv['cpu'] / r['cpu']:.2f}x |")

    rows = []
    for k, v in variants.items():
        per = max(1, min(n, v // BATCH))
        rows.append(row(f"batched patching_sweep, max_rows={v} ({per} heads per forward, {-(-n // per)} patched "
                        "forwards)", t[f"batched_{k}"]))
    rows.append(row(f"naive loop, one forward + host sync per head ({n} patched forwards)", nv))
    lines = [f"{N_LAYERS} layers x {HEADS} heads = {n} sites (denoising, metric = mean output), batch {BATCH} x "
             f"{TOKENS} tokens, width {WIDTH}, nn.TransformerEncoder after decompose_attention, CPU, {THREADS} "
             f"threads; medians of {ROUNDS} interleaved rounds: wall seconds (25th-75th percentile) and process CPU "
             "seconds (all threads; less disturbed by the other jobs on this shared machine). Both sides include "
             "the clean and corrupted reference runs.", "",
             "| sweep | wall s / sweep | wall speed-up | CPU s / sweep | CPU speed-up |", "|---|---|---|---|---|",
             *rows, "",
             f"Max |difference| between batched and naive patched metrics: {err:.1e} (float32; any difference "
             "would come from differently-sized GEMMs). Load average during the run: "
             f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores."]
    write_section("patching", "Head-patching sweep", lines)


if __name__ == "__main__":
    main()
