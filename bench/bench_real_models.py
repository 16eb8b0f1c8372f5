"""Head patching and recording on a Hugging Face GPT-2 at GPT-2-small shape: scimech vs
TransformerLens 4 vs nnsight.

Run: ``python -m bench.bench_real_models`` (writes bench/results/real_models.md; about 6
CPU-minutes on one thread, longer in wall time on a loaded machine). Needs
``transformers`` (5.x), ``transformer-lens`` (4.x) and ``nnsight`` (0.8) next to scimech;
no download: the model is built from a ``GPT2Config`` with random weights.

- the model: ``transformers.GPT2LMHeadModel`` with GPT-2-small's shape (12 layers x 12
  heads, width 768) and a small vocabulary, eager attention, no KV cache, in eval mode;
- (a) denoising head patching of all 144 heads (the corrupted run with one head's clean
  output, the head's slice of the input of ``attn.c_proj``, patched in), metric: the
  logit difference of two tokens at the last position, per sample, three ways:
  ``scimech.patching_sweep`` on sites ``transformer.h.{l}.attn.heads[{h}]``;
  ``transformer_lens.patching.get_act_patch_attn_head_out_all_pos`` (``hook_z``) on a
  TransformerLens 4 ``TransformerBridge`` built over a copy of the same model (no hub:
  ``model_bridge.sources.build_bridge_from_module``); and nnsight, one trace per head
  setting the head's slice of ``c_proj``'s input. The runs alternate round by round;
  each includes its clean and corrupted reference runs.
- (b) recording every block output and every attention head input (``c_proj``'s input,
  split into heads): plain forward vs ``scimech.record`` / ``scimech.Recorder`` vs an
  nnsight trace saving the same tensors vs the bridge's ``run_with_cache`` with a names
  filter (``hook_resid_post``, ``attn.hook_z``).

Every figure is a median of interleaved rounds in one process; the ratios, not the
seconds, carry over to other machines. Results of the three tools are compared value by
value (float32).
"""

from __future__ import annotations

import contextlib
import copy
import io
import os
from collections.abc import Callable
from importlib.metadata import version
from typing import Any

import numpy as np
import torch

from bench.bench_recording import interleaved
from bench.common import write_section

N_LAYERS, HEADS, WIDTH, VOCAB, BATCH, TOKENS, ROUNDS, REC_ROUNDS, THREADS = 12, 12, 768, 1000, 8, 16, 3, 15, 1
TOKEN_A, TOKEN_B = 11, 17  # the logit difference logit[A] - logit[B] at the last position


def build() -> dict[str, Any]:
    """The HF model, a TransformerLens bridge over a copy of it, and one clean / corrupted pair of batches."""
    from transformer_lens.model_bridge.sources import build_bridge_from_module
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    cfg = GPT2Config(
        vocab_size=VOCAB,
        n_positions=64,
        n_embd=WIDTH,
        n_layer=N_LAYERS,
        n_head=HEADS,
        attn_pdrop=0.0,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        use_cache=False,
        bos_token_id=0,
        eos_token_id=0,
    )
    cfg._attn_implementation = "eager"  # what the bridge runs (its hooks need the attention pattern)
    hf = GPT2LMHeadModel(cfg).eval()
    # the bridge replaces the wrapped model's submodules in place: give it its own copy
    tl = build_bridge_from_module(copy.deepcopy(hf), "GPT2LMHeadModel", hf_config=hf.config).eval()
    gen = torch.Generator().manual_seed(1)
    clean = torch.randint(0, VOCAB, (BATCH, TOKENS), generator=gen)
    corrupted = clean.clone()
    corrupted[:, : TOKENS // 2] = torch.randint(0, VOCAB, (BATCH, TOKENS // 2), generator=gen)
    with torch.no_grad():
        tl_vs_hf = float((tl(clean) - hf(clean).logits).abs().max())
    return dict(hf=hf, tl=tl, clean=clean, corrupted=corrupted, tl_vs_hf=tl_vs_hf)


def logit_diff(logits: torch.Tensor) -> torch.Tensor:
    return logits[:, -1, TOKEN_A] - logits[:, -1, TOKEN_B]


def head_sites() -> list[str]:
    return [f"transformer.h.{li}.attn.heads[{h}]" for li in range(N_LAYERS) for h in range(HEADS)]


def sweeps(m: dict[str, Any]) -> dict[str, Callable[[], dict[str, np.ndarray]]]:
    """The three head-patching sweeps; each returns ``patched`` (layer, head, sample), ``clean``, ``corrupted``."""
    import nnsight
    from transformer_lens import patching as tl_patching

    from scimech import patching_sweep
    from scimech.causal import metrics

    hf, tl, clean, corrupted = m["hf"], m["tl"], m["clean"], m["corrupted"]
    sites = head_sites()
    metric = metrics.logit_difference(TOKEN_A, TOKEN_B, key="logits")

    def ours():
        res = patching_sweep(hf, clean, corrupted, sites, metric, batch_size=BATCH)
        m["sweep_path_note"] = res.attrs.get("sweep_path_note", "")
        m["row_check"] = res.attrs.get("row_check", "")  # the check that tiling does not mix rows (timed with it)
        return dict(
            patched=res.patched.values.reshape(N_LAYERS, HEADS, BATCH),
            clean=res.clean.values,
            corrupted=res.corrupted.values,
        )

    @torch.no_grad()
    def transformer_lens():
        logits, cache = tl.run_with_cache(clean, names_filter=lambda n: n.endswith("attn.hook_z"))
        with contextlib.redirect_stderr(io.StringIO()):  # its progress bar
            res = tl_patching.get_act_patch_attn_head_out_all_pos(
                tl, corrupted, cache, logit_diff, reduce="none", baseline=True
            )
        return dict(patched=res.values.numpy(), clean=logit_diff(logits).numpy(), corrupted=res.baseline.numpy())

    wrapped = nnsight.NNsight(hf)
    dh = WIDTH // HEADS

    @torch.no_grad()
    def nnsight_loop():
        # nnsight >= 0.5 runs a trace body apart from this frame: save into lists made outside it
        z, ref, vals = [], [], []
        with wrapped.trace(clean):
            for li in range(N_LAYERS):
                z.append(wrapped.transformer.h[li].attn.c_proj.input.save())
            ref.append(logit_diff(wrapped.output.logits).save())
        with wrapped.trace(corrupted):
            ref.append(logit_diff(wrapped.output.logits).save())
        for li in range(N_LAYERS):
            for h in range(HEADS):
                sl = slice(h * dh, (h + 1) * dh)
                with wrapped.trace(corrupted):
                    wrapped.transformer.h[li].attn.c_proj.input[:, :, sl] = z[li][:, :, sl]
                    vals.append(logit_diff(wrapped.output.logits).save())
        patched = torch.stack(vals).reshape(N_LAYERS, HEADS, BATCH)
        return dict(patched=patched.numpy(), clean=ref[0].numpy(), corrupted=ref[1].numpy())

    return {"scimech": ours, "transformer_lens": transformer_lens, "nnsight": nnsight_loop}


def measure_sweeps(m: dict[str, Any]) -> list[str]:
    runs = sweeps(m)
    got: dict[str, dict[str, np.ndarray]] = {}

    def keeping(name, fn):
        def run():
            out = fn()
            got.setdefault(name, out)  # the warm-up call's results are the ones compared

        return run

    load0 = os.getloadavg()[0]
    t = interleaved({k: keeping(k, fn) for k, fn in runs.items()}, rounds=ROUNDS)
    load1 = os.getloadavg()[0]

    def diff(a, b):
        return max(float(np.abs(got[a][k] - got[b][k]).max()) for k in ("patched", "clean", "corrupted"))

    effect = np.abs(got["scimech"]["patched"] - got["scimech"]["corrupted"]).mean(axis=-1)
    names = {
        "scimech": "`scimech.patching_sweep` (tiled, prefix reused)",
        "transformer_lens": "TransformerLens `get_act_patch_attn_head_out_all_pos` (bridge, `hook_z`)",
        "nnsight": "nnsight, one trace per head",
    }
    s = t["scimech"]
    lines = [
        f"**(a) Head patching, all {N_LAYERS * HEADS} heads** (denoising; metric: logit[{TOKEN_A}] - "
        f"logit[{TOKEN_B}] at the last position, per sample). Medians of {ROUNDS} interleaved rounds after a "
        "warm-up round: wall seconds per sweep (25th-75th percentile) and process CPU seconds.",
        "",
        "| run | wall s | wall: this / scimech | CPU s | CPU: this / scimech |",
        "|---|---|---|---|---|",
    ]
    for k, r in t.items():
        lines.append(
            f"| {names[k]} | {r['wall']:.2f} [{r['lo']:.2f}-{r['hi']:.2f}] | {r['wall'] / s['wall']:.2f}x | "
            f"{r['cpu']:.2f} | {r['cpu'] / s['cpu']:.2f}x |"
        )
    tw, nw = t["transformer_lens"]["wall"] / s["wall"], t["nnsight"]["wall"] / s["wall"]
    lines += [
        "",
        f"scimech is {tw:.2f}x faster than TransformerLens (target 1.5x: "
        f"{'met' if tw >= 1.5 else 'not met'}) and {nw:.2f}x faster than nnsight (target 1.2x: "
        f"{'met' if nw >= 1.2 else 'not met'}) in wall time; CPU time "
        f"{t['transformer_lens']['cpu'] / s['cpu']:.2f}x and {t['nnsight']['cpu'] / s['cpu']:.2f}x.",
        f"Max |difference| of the per-sample patched, clean and corrupted metrics: scimech vs TransformerLens "
        f"{diff('scimech', 'transformer_lens'):.1e}, scimech vs nnsight {diff('scimech', 'nnsight'):.1e}, "
        f"TransformerLens vs nnsight {diff('transformer_lens', 'nnsight'):.1e} (float32); mean |patched - "
        f"corrupted| per head spans {effect.min():.1e} to {effect.max():.1e}. scimech's sweep path: "
        f"{m.get('sweep_path_note', '?')}; row check (inside the timed sweep): {m.get('row_check', '?')}. "
        f"1-minute load average {load0:.1f} before the timed rounds, "
        f"{load1:.1f} after, on {os.cpu_count()} cores.",
        "",
    ]
    return lines


def recordings(m: dict[str, Any]) -> dict[str, Callable[[], list[torch.Tensor]]]:
    """Record every block output and every head input; each returns the 2 x 12 tensors in one order."""
    import nnsight

    from scimech import Recorder, record

    hf, tl, x = m["hf"], m["tl"], m["clean"]
    sites = [f"transformer.h.{li}" for li in range(N_LAYERS)] + [
        f"transformer.h.{li}.attn.heads" for li in range(N_LAYERS)
    ]
    tl_names = [f"blocks.{li}.hook_resid_post" for li in range(N_LAYERS)] + [
        f"blocks.{li}.attn.hook_z" for li in range(N_LAYERS)
    ]
    wanted = set(tl_names)
    wrapped = nnsight.NNsight(hf)

    @torch.no_grad()
    def plain():
        hf(x)
        return []

    @torch.no_grad()
    def ours_record():
        ds = record(hf, x, sites, batch_size=BATCH)
        return [torch.from_numpy(ds[s].values) for s in sites]

    @torch.no_grad()
    def ours_recorder():
        with Recorder(hf, sites) as rec:
            hf(x)
        return [rec.activations[s] for s in sites]

    @torch.no_grad()
    def nnsight_save():
        blocks, heads = [], []
        with wrapped.trace(x):
            for li in range(N_LAYERS):
                heads.append(wrapped.transformer.h[li].attn.c_proj.input.save())
                blocks.append(wrapped.transformer.h[li].output.save())
        return blocks + [h.reshape(*h.shape[:-1], HEADS, -1) for h in heads]

    @torch.no_grad()
    def tl_cache():
        _, cache = tl.run_with_cache(x, names_filter=lambda n: n in wanted)
        return [cache[n] for n in tl_names]

    return {
        "plain": plain,
        "record": ours_record,
        "recorder": ours_recorder,
        "nnsight": nnsight_save,
        "transformer_lens": tl_cache,
    }


def measure_recording(m: dict[str, Any]) -> list[str]:
    runs = recordings(m)
    got = {k: fn() for k, fn in runs.items() if k != "plain"}
    ref = got["recorder"]
    diffs = {
        k: max(float((a.float() - b.float()).abs().max()) for a, b in zip(v, ref, strict=True))
        for k, v in got.items()
        if k != "recorder"
    }
    load0 = os.getloadavg()[0]
    t = interleaved(runs, rounds=REC_ROUNDS)
    load1 = os.getloadavg()[0]
    n = 2 * N_LAYERS
    names = {
        "plain": "plain forward (HF model)",
        "record": f"`scimech.record`: {n} sites into an xarray Dataset",
        "recorder": f"`scimech.Recorder`: {n} sites, tensors",
        "nnsight": f"nnsight trace, {n} tensors saved",
        "transformer_lens": f"TransformerLens bridge `run_with_cache`, names filter of {n} hooks",
    }
    p = t["plain"]
    lines = [
        f"**(b) Recording {N_LAYERS} block outputs and {N_LAYERS} attention-head inputs** (the input of "
        f"`c_proj` as (head, head_dim); TransformerLens: `hook_resid_post`, `attn.hook_z`). Medians of "
        f"{REC_ROUNDS} interleaved rounds, per forward.",
        "",
        "| run | wall ms | wall ratio to plain | CPU ms | CPU ratio to plain |",
        "|---|---|---|---|---|",
    ]
    for k, r in t.items():
        lines.append(
            f"| {names[k]} | {r['wall'] * 1e3:.1f} [{r['lo'] * 1e3:.1f}-{r['hi'] * 1e3:.1f}] | "
            f"{r['wall'] / p['wall']:.3f} | {r['cpu'] * 1e3:.1f} | {r['cpu'] / p['cpu']:.3f} |"
        )
    lines += [
        "",
        "Max |difference| of the recorded tensors to scimech's Recorder: "
        + ", ".join(f"{k} {v:.1e}" for k, v in diffs.items())
        + f". 1-minute load average {load0:.1f} before, {load1:.1f} after.",
        "",
    ]
    return lines


def main() -> None:
    torch.set_num_threads(THREADS)
    m = build()
    tl_kind = type(m["tl"]).__name__
    head = [
        f"Model: `transformers.GPT2LMHeadModel` at GPT-2-small shape ({N_LAYERS} layers x {HEADS} heads, width "
        f"{WIDTH}, vocabulary {VOCAB}), random weights from `GPT2Config` (seed 0), eager attention, no KV cache; "
        f"batch {BATCH} x {TOKENS} tokens (corrupted: the first {TOKENS // 2} tokens redrawn). CPU, torch threads "
        f"{THREADS}. Versions: torch {torch.__version__}, transformers {version('transformers')}, "
        f"transformer-lens {version('transformer-lens')}, nnsight {version('nnsight')}.",
        "",
        f"TransformerLens model: a `{tl_kind}` built with `transformer_lens.model_bridge.sources."
        "build_bridge_from_module(copy.deepcopy(hf), 'GPT2LMHeadModel', hf_config=hf.config)` (no hub access; "
        "the bridge wraps the HF modules and replaces them in place, hence the copy), default mode: the HF "
        "weights as they are, no LayerNorm folding. Its logits equal the HF model's to "
        f"{m['tl_vs_hf']:.1e} (max |difference|). The machine is shared with other jobs: wall times carry that "
        "noise, CPU times less.",
        "",
    ]
    body = measure_sweeps(m) + measure_recording(m)
    write_section(
        "real_models", "GPT-2-small shape: head patching and recording vs TransformerLens and nnsight", head + body
    )


if __name__ == "__main__":
    main()
