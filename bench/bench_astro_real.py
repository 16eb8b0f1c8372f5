"""astro at the real size: the head study on a random-weight AION-1-B folder in the real layout
(astro.models.aion_folder: 12 + 12 blocks, width 768, 12 heads; the image codec turns each
(4, 96, 96) cut-out into 576 tokens), on the CPU: seconds and floating-point operations per
test galaxy for each phase, peak resident memory of the process, and a paper estimate for
100,000 galaxies on a GPU node.

Run: ``python -m bench.bench_astro_real`` (writes bench/results/astro_real.md; a few minutes
on 2 cores). ``--n-test`` sets the test galaxies (10 at least: the probes' 5 folds of 2).
Each measurement runs in a fresh subprocess (``--child``) whose peak RSS is
``resource.getrusage(RUSAGE_SELF).ru_maxrss`` at its end.

``--interventions --dtype float32 bfloat16`` measures instead, per dtype in a fresh process, the
forward passes and the two interventions one by one on a handful of galaxies: the prediction
(both modes), one head ablation sweep (zero, every head of the block, multimodal run) and the
activation patching sweep (photometry-only activations into the multimodal run, every head),
each as CPU seconds per galaxy (user + system, all threads: the machine is shared, so wall time
is not the cost) and the process's peak RSS once that phase has run. Written to
bench/results/astro_real_interventions.md.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import write_section

#: assumed sustained throughput of one data-centre GPU on this workload (float32 matmuls as TF32 and
#: the codec's convolutions; an H100 SXM peaks at 495 TFLOP/s dense TF32): about 20% of peak
GPU_FLOPS = 100e12
GPUS_PER_NODE = 4
N_PAPER = 100_000


def _cpu_seconds() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _phases(folder: Path, n_test: int, n_ref: int, block: int, threads: int, n_iv: int) -> dict:
    """Time each phase of the head study on ``n_test`` galaxies (run inside the child)."""
    import numpy as np
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from astro.data.catalog import read_legacy_survey
    from astro.measures import (
        head_probes,
        head_radial_structure,
        intervention_chunk,
        layer_probes,
        study_inputs,
    )
    from astro.models.aion import AIONRedshift
    from astro.models.aion_folder import n_parameters

    torch.set_num_threads(threads)
    out: dict = {"threads": threads, "n_test": n_test, "n_ref": n_ref, "block": block, "n_iv": n_iv, "blocks": None}
    t = time.perf_counter()
    ad = AIONRedshift.from_folder(folder / "model")
    out["load_s"] = time.perf_counter() - t
    out["params"] = n_parameters(ad.model)
    out["blocks"] = ad.num_blocks
    out["codec_params"] = n_parameters(ad.image_tokenizer.codec)
    out["rss_model_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    s = read_legacy_survey(folder / "data" / "catalog.fits", folder / "data" / "images.npy")
    train, test = s[n_test : n_test + n_ref], s[:n_test]
    box: dict = {}

    def interventions():
        few = [{k: v[:n_iv] for k, v in b.items()} for b in (box["inp"].multi, box["inp"].phot)]
        iv = intervention_chunk(ad, *few, box["inp"].reference, block)  # per galaxy alike: on n_iv of them
        assert np.isfinite(iv["z_ablated"].values).all()

    phases = {
        "tokenise": lambda: box.update(inp=study_inputs(ad, train, test)),  # + classical photo-z
        "predict": lambda: (ad.predict_z(box["inp"].multi), ad.predict_z(box["inp"].phot)),
        "layer probes": lambda: layer_probes(ad, box["inp"], n_bootstrap=20),
        "head probes + radial": lambda: (
            head_probes(ad, box["inp"], block, n_bootstrap=20),
            head_radial_structure(ad, box["inp"], block),
        ),
        "interventions": interventions,
    }
    out["seconds"], out["cpu_seconds"], out["flops"] = {}, {}, {}
    for name, fn in phases.items():  # torch's counter: matmuls, convolutions, attention (negligible overhead)
        with torch.no_grad(), FlopCounterMode(display=False) as fc:
            t, c = time.perf_counter(), _cpu_seconds()
            fn()
            out["seconds"][name] = time.perf_counter() - t
            out["cpu_seconds"][name] = _cpu_seconds() - c
        out["flops"][name] = fc.get_total_flops()
    out["rss_peak_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    out["load_avg"], out["cores"] = os.getloadavg()[1], os.cpu_count()
    return out


def _interventions(folder: Path, n_iv: int, n_ref: int, block: int, threads: int, dtype: str) -> dict:
    """CPU seconds and peak RSS of load, tokenise, predict, one ablation sweep and the patching sweep
    of ``block`` on ``n_iv`` galaxies, the transformer in ``dtype`` (run inside the child)."""
    import numpy as np
    import torch

    from astro.data.catalog import read_legacy_survey
    from astro.models.aion import AIONRedshift, rows_per_pass
    from scimech.causal.intervene import ablation_sweep, patching_sweep

    torch.set_num_threads(threads)
    out: dict = {
        "threads": threads,
        "n_iv": n_iv,
        "n_ref": n_ref,
        "block": block,
        "dtype": dtype,
        "cpu_seconds": {},
        "rss_mb": {},
    }

    def phase(name, fn):
        c = _cpu_seconds()
        with torch.no_grad():
            got = fn()
        out["cpu_seconds"][name] = _cpu_seconds() - c
        out["rss_mb"][name] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        return got

    ad = phase("load", lambda: AIONRedshift.from_folder(folder / "model", dtype=dtype))
    out["blocks"], out["heads"] = ad.num_blocks, ad.num_heads
    s = read_legacy_survey(folder / "data" / "catalog.fits", folder / "data" / "images.npy")[:n_iv]
    multi, phot = phase(
        "tokenise",
        lambda: (lambda t: (ad.batch(t), ad.batch(t, masked=["tok_image"])))(ad.tokenize(s.catalog, s.images)),
    )
    z = phase("predict", lambda: (ad.predict_z(multi), ad.predict_z(phot)))
    sites, metric, per = ad.head_sites(block), ad.z_metric(), rows_per_pass(multi)
    ab = phase(
        "ablation",
        lambda: ablation_sweep(
            ad.model, dict(multi), sites, metric, method="zero", forward=ad.forward, batch_size=per, max_rows=per
        ),
    )
    pt = phase(
        "patching",
        lambda: patching_sweep(
            ad.model,
            dict(multi),
            dict(phot),
            sites,
            metric,
            direction="noising",
            forward=ad.forward,
            batch_size=per,
            max_rows=per,
        ),
    )
    assert np.isfinite(ab["ablated"].values).all() and np.isfinite(pt["patched"].values).all()
    out["z_multi"], out["z_ablated"] = z[0].tolist(), ab["ablated"].values.tolist()
    out["z_patched"] = pt["patched"].values.tolist()
    out["load_avg"], out["cores"] = os.getloadavg()[1], os.cpu_count()
    return out


def _iv_lines(runs: list[dict], command: str) -> list[str]:
    r0 = runs[0]
    n = r0["n_iv"]
    lines = [
        f"Random-weight AION-1-B folder (real layout), {n} test galaxies (4 x 96 x 96 cut-outs, 8 + 576 tokens), "
        f"interventions on the {r0['heads']} heads of block {r0['block']} of {r0['blocks']} (each re-runs the "
        "encoder from that block on); CPU, "
        f"{r0['threads']} threads, one fresh process per dtype. CPU seconds (user + system, all threads) per galaxy: "
        "the machine was shared with other work, so wall time is not reported. Peak RSS: the process's "
        "ru_maxrss once the phase has run (it includes the phases before it). The image codec is float32 in "
        "every row.",
        "",
        f"Command: `{command}`",
        "",
        f"| dtype | load (CPU s) | tokenise | predict (both modes) | ablation sweep (zero, {r0['heads']} heads) | "
        f"patching sweep ({r0['heads']} heads) | peak RSS after load | after ablation | after patching |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in runs:
        c, m = r["cpu_seconds"], r["rss_mb"]
        lines.append(
            f"| {r['dtype']} | {c['load']:.1f} | {c['tokenise'] / n:.2f} | {c['predict'] / n:.2f} | "
            f"{c['ablation'] / n:.1f} | {c['patching'] / n:.1f} | {m['load'] / 1024:.2f} GiB | "
            f"{m['ablation'] / 1024:.2f} GiB | {m['patching'] / 1024:.2f} GiB |"
        )
    if len(runs) > 1:
        import numpy as np

        ref = runs[0]
        for r in runs[1:]:
            dz = max(float(np.max(np.abs(np.subtract(r[k], ref[k])))) for k in ("z_multi", "z_ablated", "z_patched"))
            lines += [
                "",
                f"{r['dtype']} against {ref['dtype']}: largest difference of an expected redshift "
                f"(clean, ablated or patched) {dz:.1e}; CPU time x{sum(r['cpu_seconds'].values()) / sum(ref['cpu_seconds'].values()):.2f} "
                f"of {ref['dtype']}'s over all phases (load avg {r['load_avg']:.1f} on {r['cores']} cores).",
            ]
    return lines


def _run_child(
    folder: Path, n_test: int, n_ref: int, block: int, threads: int, n_iv: int, dtype: str | None = None
) -> dict:
    cmd = [
        sys.executable,
        "-m",
        "bench.bench_astro_real",
        "--child",
        str(folder),
        "--n-test",
        str(n_test),
        "--n-ref",
        str(n_ref),
        "--block",
        str(block),
        "--threads",
        str(threads),
        "--n-iv",
        str(n_iv),
    ]
    if dtype is not None:
        cmd += ["--interventions", "--dtype", dtype]
    env = dict(os.environ, SCIMECH_QUIET="1", PYTHONWARNINGS="ignore")
    res = subprocess.run(
        cmd, capture_output=True, text=True, env=env, check=False, cwd=Path(__file__).resolve().parents[1]
    )
    if res.returncode != 0:
        raise RuntimeError(f"child failed:\n{res.stderr[-3000:]}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def _lines(r: dict, write_s: float | None) -> list[str]:
    n = r["n_test"]
    count = {"tokenise": n + r["n_ref"], "interventions": r["n_iv"]}  # galaxies each phase ran on
    per = {k: v / count.get(k, n) for k, v in r["seconds"].items()}
    total = sum(per.values())
    fl = {k: v / count.get(k, n) for k, v in r["flops"].items()}  # FLOPs per galaxy
    fl_all = sum(fl.values())
    lines = [
        f"Random-weight AION-1-B folder in the real layout ({r['params'] / 1e6:.0f} M transformer parameters, "
        f"image codec {r['codec_params'] / 1e6:.1f} M"
        + (f"; written in {write_s:.0f} s" if write_s else "")
        + f"), {n} test galaxies (4 x 96 x 96 cut-outs, 8 + 576 tokens each) and {r['n_ref']} reference "
        f"galaxies; head interventions (zero, mean, resample, patch; both modes) of block {r['block']} of "
        f"{r['blocks']} on {r['n_iv']} of the test galaxies (per galaxy alike; each intervention re-runs the "
        f"encoder from that block on, so block 0 costs about {r['blocks'] / (r['blocks'] - r['block']):.1f} "
        f"times as much, the last block a {r['blocks'] - r['block']}th); CPU, {r['threads']} threads; "
        "probes with 20 bootstrap resamples. Per galaxy: each phase's seconds over the galaxies it ran on.",
        "",
        "| phase | seconds | seconds per galaxy | CPU seconds per galaxy | GFLOP per galaxy |",
        "|---|---|---|---|---|",
    ]
    cpu = {k: v / count.get(k, n) for k, v in r["cpu_seconds"].items()}
    for k, v in r["seconds"].items():
        lines.append(f"| {k} | {v:.1f} | {per[k]:.2f} | {cpu[k]:.2f} | {fl[k] / 1e9:.0f} |")
    lines.append(
        f"| **total** | {sum(r['seconds'].values()):.1f} | **{total:.2f}** | **{sum(cpu.values()):.2f}** "
        f"| **{fl_all / 1e9:.0f}** |"
    )
    lines += [
        "",
        f"Seconds are wall-clock on a shared machine (load {r['load_avg']:.1f} on {r['cores']} cores while it "
        f"ran); CPU seconds (user + system, all threads) are what the work took, about {r['threads']} times "
        "the wall-clock time it would take alone.",
    ]
    node_s = N_PAPER * fl_all / (GPU_FLOPS * GPUS_PER_NODE)
    lines += [
        "",
        f"Peak resident memory: {r['rss_peak_mb'] / 1024:.2f} GiB (after loading the model and codecs: "
        f"{r['rss_model_mb'] / 1024:.2f} GiB); the probes hold pooled features (768 floats per block per "
        "galaxy) and the radial maps running sums, so it grows with the forward pass "
        "(`astro.models.aion.TOKENS_PER_PASS`: 28 galaxies of 584 tokens), not with the catalogue.",
        f"Model and codecs loading: {r['load_s']:.1f} s once per process (per Dask worker).",
        "",
        f"Paper estimate, {N_PAPER:,} galaxies on one GPU node: the counted FLOPs per galaxy "
        f"({fl_all / 1e12:.1f} TFLOP, the sum of the table's column) x {N_PAPER:,} at an assumed "
        f"{GPU_FLOPS / 1e12:.0f} TFLOP/s sustained per GPU (about 20% of an H100's dense TF32 peak) on "
        f"{GPUS_PER_NODE} GPUs, one Dask worker each: about {node_s / 3600:.1f} h ({node_s / N_PAPER * 1e3:.1f} ms "
        f"per galaxy per node), against {sum(cpu.values()) / r['threads'] * N_PAPER / 86400:.0f} days on these "
        f"{r['threads']} CPU cores alone. The ridge probes and bootstraps are CPU work on pooled features "
        "(seconds); the 256 reference galaxies' activations are recomputed per unit, so units of thousands of "
        "galaxies (`--chunk-size`) keep that below a few percent.",
    ]
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--child", type=Path, default=None, help=argparse.SUPPRESS)
    p.add_argument("--n-test", type=int, default=10)
    p.add_argument("--n-ref", type=int, default=2)
    p.add_argument("--block", type=int, default=6)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--n-iv", type=int, default=2, help="test galaxies of the head interventions")
    p.add_argument("--folder", type=Path, default=None, help="reuse (or write) the base folder here")
    p.add_argument(
        "--interventions",
        action="store_true",
        help="per dtype: CPU seconds and peak RSS of predict, one ablation sweep and the patching sweep",
    )
    p.add_argument(
        "--dtype",
        nargs="+",
        default=["float32"],
        choices=["float32", "bfloat16", "float16"],
        help="with --interventions: the transformer's dtypes, one fresh process each",
    )
    a = p.parse_args(argv)
    if a.child is not None:
        got = (
            _interventions(a.child, a.n_iv, a.n_ref, a.block, a.threads, a.dtype[0])
            if a.interventions
            else _phases(a.child, a.n_test, a.n_ref, a.block, a.threads, a.n_iv)
        )
        print(json.dumps(got))
        return 0
    from astro.models.aion_folder import write_galaxies, write_random_aion

    with tempfile.TemporaryDirectory(prefix="astro-real-") as tmp:
        folder = a.folder or Path(tmp)
        write_s = None
        if not (folder / "model" / "model.safetensors").is_file():
            t = time.perf_counter()
            write_random_aion(folder / "model", "base", seed=0)
            write_s = time.perf_counter() - t
        if not (folder / "data" / "catalog.fits").is_file():
            write_galaxies(folder / "data", a.n_test + a.n_ref, seed=3)
        if a.interventions:
            runs = [_run_child(folder, a.n_test, a.n_ref, a.block, a.threads, a.n_iv, dtype=d) for d in a.dtype]
            command = "python -m bench.bench_astro_real " + " ".join(argv if argv is not None else sys.argv[1:])
            import platform

            import scimech

            text = "\n".join(
                [
                    "## astro: AION-1-B interventions and dtypes, CPU",
                    "",
                    f"(scimech {scimech.__version__}, Python {platform.python_version()})",
                    "",
                    *_iv_lines(runs, command),
                    "",
                ]
            )
            path = Path(__file__).resolve().parent / "results" / "astro_real_interventions.md"
            path.parent.mkdir(exist_ok=True)
            path.write_text(text)
            sys.stdout.write(text)
            return 0
        r = _run_child(folder, a.n_test, a.n_ref, a.block, a.threads, a.n_iv)
    write_section(
        "astro_real", "astro: the head study on AION-1-B (random weights, real layout), CPU", _lines(r, write_s)
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
