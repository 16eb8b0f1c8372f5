"""Sweeps at 1, 2, 8, 48 and 144 head sites on a GPT-2-small-shaped model: scimech's
``patching_sweep`` and ``ablation_sweep`` against a naive hook loop, nnsight and
TransformerLens, in one run.

Run: ``python -m bench.bench_sweep_scaling`` (writes bench/results/sweep_scaling.md; about
10 CPU-minutes on one thread). Needs ``transformers`` (5.x), ``transformer-lens`` (4.x) and
``nnsight`` (0.8) next to scimech; no download (random weights from a ``GPT2Config``, the
model of :mod:`bench.bench_real_models`).

Each tool does the same work at each size: the clean and corrupted (or unablated) reference
runs, then one changed run per site (a head's slice of the input of ``attn.c_proj`` set to
the clean run's, or to zero), metric: the logit difference of two tokens at the last
position, per sample.

- naive loop: a ``forward_pre_hook`` on ``c_proj`` per site, one forward pass per site;
- nnsight: one trace per site setting the slice of ``c_proj.input``;
- TransformerLens: a bridge over a copy of the model, ``run_with_hooks`` per site on
  ``blocks.{l}.attn.hook_z`` (what ``get_act_patch_attn_head_out_all_pos`` runs per head);
- scimech: one call of the sweep over the sites (tiled passes, prefix reuse, its checks).

The sites are spread evenly over the 144 heads (layer-major order). The runs of one size
alternate round by round; medians of wall and process CPU time. Every tool's per-sample
values are compared with the naive loop's.
"""

from __future__ import annotations

import contextlib
import io
import os
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from bench.bench_real_models import (
    BATCH,
    HEADS,
    N_LAYERS,
    TOKEN_A,
    TOKEN_B,
    WIDTH,
    build,
    logit_diff,
)
from bench.bench_recording import interleaved
from bench.common import write_section

SIZES, ROUNDS, THREADS = (1, 2, 8, 48, 144), 3, 1
DH = WIDTH // HEADS


def spread(n: int) -> list[tuple[int, int]]:
    """``n`` (layer, head) pairs spread evenly over the model's heads, layer-major."""
    idx = np.unique(np.linspace(0, N_LAYERS * HEADS - 1, n).round().astype(int))
    return [(int(i) // HEADS, int(i) % HEADS) for i in idx]


def runs(m: dict[str, Any], heads: list[tuple[int, int]], verb: str) -> dict[str, Callable[[], np.ndarray]]:
    """The four ways of one sweep; each returns the changed runs' metric, (site, sample)."""
    import nnsight

    from scimech import ablation_sweep, patching_sweep
    from scimech.causal import metrics

    hf, tl, clean, corrupted = m["hf"], m["tl"], m["clean"], m["corrupted"]
    base = corrupted if verb == "patching" else clean  # the run that is changed
    metric = metrics.logit_difference(TOKEN_A, TOKEN_B, key="logits")
    sites = [f"transformer.h.{li}.attn.heads[{h}]" for li, h in heads]
    layers = sorted({li for li, _ in heads})

    def ours():
        if verb == "patching":
            return patching_sweep(hf, clean, corrupted, sites, metric, batch_size=BATCH).patched.values
        return ablation_sweep(hf, clean, sites, metric, method="zero", batch_size=BATCH).ablated.values

    @torch.no_grad()
    def naive():
        cache: dict[int, torch.Tensor] = {}
        if verb == "patching":
            hooks = [
                hf.transformer.h[li].attn.c_proj.register_forward_pre_hook(
                    lambda mod, a, li=li: cache.__setitem__(li, a[0].clone())
                )
                for li in layers
            ]
            try:
                hf(clean)
            finally:
                for h in hooks:
                    h.remove()
        logit_diff(hf(base).logits)  # the unchanged run's metric
        out = []
        for li, h in heads:
            sl = slice(h * DH, (h + 1) * DH)

            def change(mod, args, li=li, sl=sl):
                x = args[0].clone()
                x[..., sl] = cache[li][..., sl] if verb == "patching" else 0.0
                return (x, *args[1:])

            handle = hf.transformer.h[li].attn.c_proj.register_forward_pre_hook(change)
            try:
                out.append(logit_diff(hf(base).logits))
            finally:
                handle.remove()
        return torch.stack(out).numpy()

    wrapped = nnsight.NNsight(hf)

    @torch.no_grad()
    def nnsight_loop():
        z, vals = {}, []
        if verb == "patching":
            with wrapped.trace(clean):
                for li in layers:
                    z[li] = wrapped.transformer.h[li].attn.c_proj.input.save()
        with wrapped.trace(base):
            logit_diff(wrapped.output.logits).save()
        for li, h in heads:
            sl = slice(h * DH, (h + 1) * DH)
            with wrapped.trace(base):
                wrapped.transformer.h[li].attn.c_proj.input[:, :, sl] = z[li][:, :, sl] if verb == "patching" else 0.0
                vals.append(logit_diff(wrapped.output.logits).save())
        return torch.stack(vals).numpy()

    @torch.no_grad()
    def transformer_lens():
        names = {f"blocks.{li}.attn.hook_z" for li in layers}
        cache = tl.run_with_cache(clean, names_filter=lambda n: n in names)[1] if verb == "patching" else None
        logit_diff(tl(base))
        out = []
        for li, h in heads:

            def change(z, hook, li=li, h=h):
                sel = (slice(None), slice(None), h) if z.ndim == 4 else (..., slice(h * DH, (h + 1) * DH))
                z[sel] = cache[f"blocks.{li}.attn.hook_z"][sel] if verb == "patching" else 0.0
                return z

            with contextlib.redirect_stderr(io.StringIO()):
                out.append(logit_diff(tl.run_with_hooks(base, fwd_hooks=[(f"blocks.{li}.attn.hook_z", change)])))
        return torch.stack(out).numpy()

    return {"naive loop": naive, "scimech": ours, "nnsight": nnsight_loop, "TransformerLens": transformer_lens}


def measure(m: dict[str, Any], verb: str) -> list[str]:
    lines = [
        f"**{verb}_sweep** (GPT-2-small shape, batch {BATCH}; {'denoising: clean head outputs into the corrupted run' if verb == 'patching' else 'zero ablation of each head'}). Wall and CPU seconds per sweep "
        f"(medians of {ROUNDS} interleaved rounds after a warm-up); ratios are this tool's time over scimech's "
        "(above 1: scimech is faster).",
        "",
        "| sites | naive loop wall / CPU s | scimech wall / CPU s | naive / scimech (wall, CPU) | "
        "nnsight / scimech (wall, CPU) | TransformerLens / scimech (wall, CPU) | max diff vs naive |",
        "|---|---|---|---|---|---|---|",
    ]
    for n in SIZES:
        heads = spread(n)
        fns = runs(m, heads, verb)
        got: dict[str, np.ndarray] = {}
        rows = len(heads)

        def keeping(name, fn, got=got, rows=rows):
            def run():
                got.setdefault(name, np.asarray(fn()).reshape(rows, BATCH))

            return run

        t = interleaved({k: keeping(k, fn) for k, fn in fns.items()}, rounds=ROUNDS)
        s = t["scimech"]

        def ratio(k, t=t, s=s):
            return f"{t[k]['wall'] / s['wall']:.2f}x, {t[k]['cpu'] / s['cpu']:.2f}x"

        diff = max(float(np.abs(got[k] - got["naive loop"]).max()) for k in got)
        lines.append(
            f"| {len(heads)} | {t['naive loop']['wall']:.2f} / {t['naive loop']['cpu']:.2f} | "
            f"{s['wall']:.2f} / {s['cpu']:.2f} | {ratio('naive loop')} | {ratio('nnsight')} | "
            f"{ratio('TransformerLens')} | {diff:.1e} |"
        )
    return lines + [""]


def main() -> None:
    from importlib.metadata import version

    torch.set_num_threads(THREADS)
    m = build()
    load0 = os.getloadavg()[0]
    lines = [
        f"Model: `transformers.GPT2LMHeadModel` at GPT-2-small shape ({N_LAYERS} layers x {HEADS} heads, width "
        f"{WIDTH}), random weights, eager attention; CPU, torch threads {THREADS}. Versions: torch "
        f"{torch.__version__}, transformers {version('transformers')}, transformer-lens "
        f"{version('transformer-lens')}, nnsight {version('nnsight')}, scimech {version('scimech')}.",
        "",
    ]
    for verb in ("patching", "ablation"):
        lines += measure(m, verb)
    lines.append(
        f"1-minute load average {load0:.1f} before, {os.getloadavg()[0]:.1f} after, on {os.cpu_count()} cores."
    )
    write_section(
        "sweep_scaling", "Sweeps at 1, 2, 8, 48 and 144 sites vs a naive loop, nnsight and TransformerLens", lines
    )


if __name__ == "__main__":
    main()
