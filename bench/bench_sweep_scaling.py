"""Sweeps at 1, 2, 8, 48 and 144 head sites on a GPT-2-small-shaped model: scimech's
``patching_sweep`` and ``ablation_sweep`` against a naive hook loop, nnsight and
TransformerLens, in one run.

Run: ``python -m bench.bench_sweep_scaling`` (writes bench/results/sweep_scaling.md; about
30 CPU-minutes on one thread). Needs ``transformers`` (5.x) and ``transformer-lens`` (4.x,
it also builds the model's bridge) next to scimech, and ``nnsight`` (0.8) for its column; no
download (random weights from a ``GPT2Config``, the model of :mod:`bench.bench_real_models`).

Options: ``--device cuda`` runs every tool's model and inputs on that device (and checks the
largest sweep against a naive loop on the CPU); ``--sizes 1 2`` and ``--rounds 1`` make a
short run, ``--verbs ablation`` one sweep only; ``--out DIR`` writes ``DIR/sweep_scaling.md`` and ``DIR/sweep_scaling.json``
instead of bench/results/sweep_scaling.md (``scripts/device_check.sh`` uses all four); ``--passes`` prints
only where the CPU seconds of one ``patching_sweep`` at the largest size go (each forward pass, and the rest).

Each tool does the same work at each size: the clean and corrupted (or unablated) reference
runs, then one changed run per site (a head's slice of the input of ``attn.c_proj`` set to
the clean run's, or to zero), metric: the logit difference of two tokens at the last
position, per sample.

- naive loop: a ``forward_pre_hook`` on ``c_proj`` per site, one forward pass per site;
- nnsight: one trace per site setting the slice of ``c_proj.input``;
- TransformerLens: a bridge over a copy of the model, ``run_with_hooks`` per site on
  ``blocks.{l}.attn.hook_z`` (what ``get_act_patch_attn_head_out_all_pos`` runs per head);
- scimech: one call of the sweep over the sites (tiled passes, prefix reuse, its checks; the
  metric reads the last position alone, so the last block's norm and MLP, the final norm and
  ``lm_head`` compute that position only, checked once by an unchanged copy: attrs ``sweep_tail``).

The sites are spread evenly over the 144 heads (layer-major order). The runs of one size
alternate round by round; medians of wall and process CPU time. Every tool's per-sample
values are compared with the naive loop's.

Last, the checks a verb pays once: on a fresh copy of the model, the forward passes (calls
of ``lm_head`` and the rows they carry) of a first ``patching_sweep``, then of
``ablation_sweep`` on the same model and inputs (a second verb), and of each again.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import io
import json
import os
import platform
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
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
TOOLS = ("naive loop", "scimech", "nnsight", "TransformerLens")
TITLE = "Sweeps at 1, 2, 8, 48 and 144 sites vs a naive loop, nnsight and TransformerLens"


def spread(n: int) -> list[tuple[int, int]]:
    """``n`` (layer, head) pairs spread evenly over the model's heads, layer-major."""
    idx = np.unique(np.linspace(0, N_LAYERS * HEADS - 1, n).round().astype(int))
    return [(int(i) // HEADS, int(i) % HEADS) for i in idx]


def host(t: torch.Tensor) -> np.ndarray:
    """A result as numpy on the host (from any device: the copy also waits for the device)."""
    return t.detach().cpu().numpy()


def missing_peers() -> dict[str, str]:
    """The peer tools that cannot run here, each with the reason (its import error)."""
    out = {}
    for tool, module in (("nnsight", "nnsight"), ("TransformerLens", "transformer_lens")):
        try:
            __import__(module)
        except Exception as err:  # report, do not hide: the column says why it is empty
            out[tool] = f"{type(err).__name__}: {err}"
    return out


def runs(
    m: dict[str, Any], heads: list[tuple[int, int]], verb: str, tools: Sequence[str] = TOOLS
) -> dict[str, Callable[[], np.ndarray]]:
    """The ways of one sweep named in ``tools``; each returns the changed runs' metric, (site, sample)."""
    from scimech import ablation_sweep, patching_sweep
    from scimech.causal import metrics

    hf, clean, corrupted = m["hf"], m["clean"], m["corrupted"]
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
        return host(torch.stack(out))

    if "nnsight" in tools:
        import nnsight

        wrapped = nnsight.NNsight(hf)

    def nnsight_loop():
        z, vals = {}, []
        with torch.no_grad():
            if verb == "patching":
                with wrapped.trace(clean):
                    for li in layers:
                        z[li] = wrapped.transformer.h[li].attn.c_proj.input.save()
            with wrapped.trace(base):
                logit_diff(wrapped.output.logits).save()
            for li, h in heads:
                sl = slice(h * DH, (h + 1) * DH)
                with wrapped.trace(base):
                    wrapped.transformer.h[li].attn.c_proj.input[:, :, sl] = (
                        z[li][:, :, sl] if verb == "patching" else 0.0
                    )
                    vals.append(logit_diff(wrapped.output.logits).save())
        return host(torch.stack(vals))

    @torch.no_grad()
    def transformer_lens():
        tl = m["tl"]
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
        return host(torch.stack(out))

    ways = {"naive loop": naive, "scimech": ours, "nnsight": nnsight_loop, "TransformerLens": transformer_lens}
    return {k: ways[k] for k in tools}


def measure(
    m: dict[str, Any],
    verb: str,
    sizes: Sequence[int],
    rounds: int,
    tools: Sequence[str],
    cpu_ref: dict[str, Any] | None,
) -> tuple[list[str], list[dict[str, Any]]]:
    """One verb's table: every size, the tools alternating round by round; the rows as records too."""
    peers = [k for k in ("nnsight", "TransformerLens") if k in tools]
    head = "| sites | naive loop wall / CPU s | scimech wall / CPU s | naive / scimech (wall, CPU) | "
    head += "".join(f"{k} / scimech (wall, CPU) | " for k in peers) + "max diff vs naive |"
    lines = [
        f"**{verb}_sweep** (GPT-2-small shape, batch {BATCH}; "
        + (
            "denoising: clean head outputs into the corrupted run"
            if verb == "patching"
            else "zero ablation of each head"
        )
        + f"). Wall and CPU seconds per sweep (medians of {rounds} interleaved rounds after a warm-up); ratios "
        "are this tool's time over scimech's (above 1: scimech is faster).",
        "",
        head,
        "|" + "---|" * (head.count("|") - 1),
    ]
    records = []
    for n in sizes:
        heads = spread(n)
        fns = runs(m, heads, verb, tools)
        got: dict[str, np.ndarray] = {}
        rows = len(heads)

        def keeping(name, fn, got=got, rows=rows):
            def run():
                got.setdefault(name, np.asarray(fn()).reshape(rows, BATCH))

            return run

        t = interleaved({k: keeping(k, fn) for k, fn in fns.items()}, rounds=rounds)
        s = t["scimech"]

        def ratio(k, t=t, s=s):
            return f"{t[k]['wall'] / s['wall']:.2f}x, {t[k]['cpu'] / s['cpu']:.2f}x"

        diffs = {k: float(np.abs(got[k] - got["naive loop"]).max()) for k in got}
        rec = {
            "verb": verb,
            "sites": rows,
            "times": {k: {"wall": v["wall"], "cpu": v["cpu"]} for k, v in t.items()},
            "max_diff_vs_naive": diffs,
            "effect_span": [float(np.abs(got["scimech"]).min()), float(np.abs(got["scimech"]).max())],
        }
        if cpu_ref is not None and n == max(sizes):  # the device's values against the CPU's, largest size
            threads = torch.get_num_threads()
            torch.set_num_threads(os.cpu_count() or 1)  # untimed: the CPU's values, every core
            try:
                ref = np.asarray(runs(cpu_ref, heads, verb, ("naive loop",))["naive loop"]()).reshape(rows, BATCH)
            finally:
                torch.set_num_threads(threads)
            rec["max_diff_vs_cpu_naive"] = {k: float(np.abs(v - ref).max()) for k, v in got.items()}
            rec["cpu_naive_scale"] = float(np.abs(ref).max())
        records.append(rec)
        print(f"{verb} {rows} sites:", json.dumps(rec), flush=True)  # each size as it ends (a long run)
        lines.append(
            f"| {rows} | {t['naive loop']['wall']:.2f} / {t['naive loop']['cpu']:.2f} | "
            f"{s['wall']:.2f} / {s['cpu']:.2f} | {ratio('naive loop')} | "
            + "".join(f"{ratio(k)} | " for k in peers)
            + f"{max(diffs.values()):.1e} |"
        )
    lines.append("")
    ref = [r for r in records if "max_diff_vs_cpu_naive" in r]
    for r in ref:
        worst = max(r["max_diff_vs_cpu_naive"].values())
        lines += [
            f"On {m['device']} against the naive loop on the CPU ({r['sites']} sites): every tool's per-sample "
            f"values within {worst:.1e} (values up to {r['cpu_naive_scale']:.2f}; "
            + ", ".join(f"{k} {v:.1e}" for k, v in r["max_diff_vs_cpu_naive"].items())
            + ").",
            "",
        ]
    return lines, records


def targets(records: list[dict[str, Any]], tools: Sequence[str]) -> list[str]:
    """The issue's speed targets read off the rows: met or missed, by how much."""
    out = []
    for verb in ("patching", "ablation"):
        rows = [r for r in records if r["verb"] == verb]
        if not rows:
            continue
        t2 = [r for r in rows if r["sites"] >= 2]
        if t2:
            worst = min(t2, key=lambda r: r["times"]["naive loop"]["wall"] / r["times"]["scimech"]["wall"])
            w = worst["times"]["naive loop"]["wall"] / worst["times"]["scimech"]["wall"]
            c = worst["times"]["naive loop"]["cpu"] / worst["times"]["scimech"]["cpu"]
            out.append(
                f"- {verb}_sweep no slower than the naive loop from 2 sites on: "
                f"{'met' if w >= 1 else 'missed'} (lowest naive / scimech {w:.2f}x wall, {c:.2f}x CPU, at "
                f"{worst['sites']} sites)"
            )
        big = max(rows, key=lambda r: r["sites"])
        for k in ("nnsight", "TransformerLens"):
            if k in tools and big["sites"] == N_LAYERS * HEADS:
                w = big["times"][k]["wall"] / big["times"]["scimech"]["wall"]
                c = big["times"][k]["cpu"] / big["times"]["scimech"]["cpu"]
                out.append(
                    f"- {verb}_sweep at least 2x {k} at 144 heads: {'met' if w >= 2 else 'missed'} "
                    f"({w:.2f}x wall, {c:.2f}x CPU)"
                )
    return out


def second_verb(m: dict[str, Any], n: int) -> tuple[list[str], dict[str, Any]]:
    """Forward passes of a first sweep on a fresh copy of the model, of a second verb on the same
    model and inputs, and of each again: the profile's checks are paid once, by the first verb."""
    from scimech import ablation_sweep, patching_sweep
    from scimech.causal import metrics

    hf = copy.deepcopy(m["hf"])
    clean, corrupted = m["clean"], m["corrupted"]
    metric = metrics.logit_difference(TOKEN_A, TOKEN_B, key="logits")
    sites = [f"transformer.h.{li}.attn.heads[{h}]" for li, h in spread(n)]
    seen = {"calls": 0, "rows": 0}

    def count(mod, args):
        seen["calls"] += 1
        seen["rows"] += int(args[0].shape[0])

    steps = {
        "patching_sweep, first verb on a fresh model": lambda: patching_sweep(
            hf, clean, corrupted, sites, metric, batch_size=BATCH
        ),
        "ablation_sweep, second verb, same model and inputs": lambda: ablation_sweep(
            hf, clean, sites, metric, method="zero", batch_size=BATCH
        ),
        "ablation_sweep again": lambda: ablation_sweep(hf, clean, sites, metric, method="zero", batch_size=BATCH),
        "patching_sweep again": lambda: patching_sweep(hf, clean, corrupted, sites, metric, batch_size=BATCH),
    }
    handle = hf.lm_head.register_forward_pre_hook(count)
    got = {}
    try:
        for name, fn in steps.items():
            seen.update(calls=0, rows=0)
            t0 = time.perf_counter()
            fn()
            got[name] = {**seen, "wall": time.perf_counter() - t0}
    finally:
        handle.remove()
    lines = [
        f"**Checks paid once** ({len(sites)} sites, a fresh copy of the model): forward passes through `lm_head` "
        "(calls and the rows they carry) and wall seconds of each call, in this order.",
        "",
        "| call | passes | rows | wall s |",
        "|---|---|---|---|",
        *(f"| {k} | {v['calls']} | {v['rows']} | {v['wall']:.2f} |" for k, v in got.items()),
        "",
    ]
    names = list(got)
    p1, a1, a2, p2 = (got[k] for k in names)
    same = (a1["calls"], a1["rows"]) == (a2["calls"], a2["rows"])
    lines += [
        f"The first verb pays the profile's checks ({p1['rows'] - p2['rows']} rows in "
        f"{p1['calls'] - p2['calls']} passes more than the same sweep again); the second verb on the same model "
        f"and inputs runs {'exactly the passes of its own repeat: no check again' if same else 'other passes than its own repeat'}"
        f" ({a1['calls']} passes / {a1['rows']} rows vs {a2['calls']} / {a2['rows']}).",
        "",
    ]
    return lines, {"sites": len(sites), "calls": got, "second_verb_pays_no_check": same}


def passes(m: dict[str, Any], n: int) -> tuple[list[str], dict[str, Any]]:
    """Where the CPU seconds of one ``patching_sweep`` over ``n`` heads go (after a warm-up sweep):
    each forward pass (the source and unchanged runs of batch 8, the tiled passes) and the rest
    (Python per tile and site, hooks, metric values, the Dataset)."""
    from scimech import patching_sweep
    from scimech.capture import session
    from scimech.causal import metrics, sweep

    hf, clean, corrupted = m["hf"], m["clean"], m["corrupted"]
    metric = metrics.logit_difference(TOKEN_A, TOKEN_B, key="logits")
    sites = [f"transformer.h.{li}.attn.heads[{h}]" for li, h in spread(n)]
    patching_sweep(hf, clean, corrupted, sites, metric, batch_size=BATCH)  # warm-up: the profile's checks
    got: list[tuple[str, int, float]] = []

    def timing(fn, kind):
        def run(*args, **kwargs):
            c0 = time.process_time()
            out = fn(*args, **kwargs)
            rows = next((int(a.shape[0]) for a in args if isinstance(a, torch.Tensor)), 0)
            got.append((kind, rows, time.process_time() - c0))
            return out

        return run

    tiled, folded = sweep.run_forward, session.forward_folded
    sweep.run_forward, session.forward_folded = timing(tiled, "tiled pass"), timing(folded, "source / unchanged run")
    try:
        c0 = time.process_time()
        res = patching_sweep(hf, clean, corrupted, sites, metric, batch_size=BATCH)
        total = time.process_time() - c0
    finally:
        sweep.run_forward, session.forward_folded = tiled, folded
    in_passes = sum(t for _, _, t in got)
    lines = [
        f"**Where the CPU seconds go** (one `patching_sweep` over {len(sites)} heads after a warm-up sweep; "
        f"process CPU seconds of each forward pass): {total:.2f} s in all, {in_passes:.2f} s in {len(got)} "
        f"forward passes, {total - in_passes:.2f} s ({(total - in_passes) / total:.1%}) outside them (Python per "
        "tile and site, hooks, metric values, the Dataset).",
        "",
        "| pass | rows | CPU s |",
        "|---|---|---|",
        *(f"| {k} | {r} | {t:.2f} |" for k, r, t in got),
        "",
        f"`sweep_tail`: {res.attrs.get('sweep_tail', 'none')}.",
        "",
    ]
    return lines, {"total_cpu": total, "passes": got}


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.bench_sweep_scaling", description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cpu", help="torch device of every tool's model and inputs (default cpu)")
    p.add_argument(
        "--sizes", type=int, nargs="+", default=list(SIZES), help="numbers of head sites (default 1 2 8 48 144)"
    )
    p.add_argument("--rounds", type=int, default=ROUNDS, help=f"timed rounds after the warm-up (default {ROUNDS})")
    p.add_argument(
        "--verbs", nargs="+", choices=("patching", "ablation"), default=["patching", "ablation"], help="the sweeps"
    )
    p.add_argument("--threads", type=int, default=THREADS, help=f"torch CPU threads (default {THREADS})")
    p.add_argument("--out", type=Path, help="write sweep_scaling.md and .json here, not to bench/results")
    p.add_argument(
        "--passes", action="store_true", help="only where the CPU seconds of one patching sweep go (largest size)"
    )
    args = p.parse_args(argv)
    if any(not 1 <= n <= N_LAYERS * HEADS for n in args.sizes):
        p.error(f"--sizes: each between 1 and {N_LAYERS * HEADS} (the model's heads)")
    if args.rounds < 1:
        p.error("--rounds: at least 1")
    return args


def main(argv: Sequence[str] | None = None) -> None:
    from importlib.metadata import version

    args = parse(argv)
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    missing = missing_peers()
    if "TransformerLens" in missing:  # bench_real_models.build makes the bridge beside the HF model
        raise SystemExit(f"the sweep bench needs transformer-lens to build its model: {missing['TransformerLens']}")
    tools = [k for k in TOOLS if k not in missing]
    m = build()
    if args.passes:  # one sweep's passes, printed; no table
        torch.set_num_threads(args.threads)
        print("\n".join(passes(m, max(args.sizes))[0]))
        return
    cpu_ref = None
    if device.type != "cpu":
        cpu_ref = dict(hf=copy.deepcopy(m["hf"]), clean=m["clean"], corrupted=m["corrupted"])
        m["hf"].to(device)
        m["tl"].to(device, print_details=False)
        m["clean"], m["corrupted"] = m["clean"].to(device), m["corrupted"].to(device)
    where = (
        f"{device}: {torch.cuda.get_device_name(device)}"
        if device.type == "cuda"
        else f"CPU, torch threads {args.threads}"
    )
    m["device"] = str(device)
    load0 = os.getloadavg()[0]
    versions = {"torch": torch.__version__, "transformers": version("transformers"), "scimech": version("scimech")}
    versions.update(
        {
            d: version(d)
            for k, d in (("TransformerLens", "transformer-lens"), ("nnsight", "nnsight"))
            if k not in missing
        }
    )
    lines = [
        f"Model: `transformers.GPT2LMHeadModel` at GPT-2-small shape ({N_LAYERS} layers x {HEADS} heads, width "
        f"{WIDTH}), random weights, eager attention; {where}. Versions: "
        + ", ".join(f"{k} {v}" for k, v in versions.items())
        + ".",
        "",
    ]
    if "nnsight" in missing:
        lines += [f"nnsight not run: {missing['nnsight']}.", ""]
    records: list[dict[str, Any]] = []
    for verb in args.verbs:
        more, recs = measure(m, verb, args.sizes, args.rounds, tools, cpu_ref)
        lines += more
        records += recs
    check_lines, check = second_verb(m, min(8, max(args.sizes)))
    lines += check_lines
    load1 = os.getloadavg()[0]
    goals = targets(records, tools)
    if goals:
        lines += ["Targets:", "", *goals, ""]
    lines.append(f"1-minute load average {load0:.1f} before, {load1:.1f} after, on {os.cpu_count()} cores.")
    if args.out is None:
        write_section("sweep_scaling", TITLE, lines)
        return
    args.out.mkdir(parents=True, exist_ok=True)
    cmd = "python -m bench.bench_sweep_scaling " + " ".join(argv if argv is not None else sys.argv[1:])
    text = "\n".join(
        [f"## {TITLE} ({m['device']})", "", f"Command: `{cmd.strip()}` (Python {platform.python_version()})", ""]
        + lines
        + [""]
    )
    (args.out / "sweep_scaling.md").write_text(text)
    summary = {
        "device": m["device"],
        "where": where,
        "versions": versions,
        "peers_missing": missing,
        "rows": records,
        "checks_paid_once": check,
        "targets": goals,
        "load": [load0, load1],
    }
    (args.out / "sweep_scaling.json").write_text(json.dumps(summary, indent=1))
    sys.stdout.write(text)


if __name__ == "__main__":
    main()
