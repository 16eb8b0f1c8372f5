"""Recording overhead: plain forward vs scimech recording at every block (``record`` into an
xarray Dataset, and the ``Recorder`` of tensors) vs nnsight.

Run: ``python -m bench.bench_recording`` (writes bench/results/recording.md); ``--profile``
prints where ``record``'s fixed cost per call goes (a cProfile on a small input).
Same model, same batch, same process; the runs alternate round by round so that
background load hits them alike, and the reported time is the median per forward. ``record``
runs twice: on one batch per call (its fixed cost per call included in the one forward), and
on four batches in one call, against four plain forwards (what a recording of a dataset
pays per forward, the copy of each batch into the Dataset's arrays included). The
measurement runs twice, each time in a fresh process: with glibc's default allocator
settings, and with freed memory kept for reuse (``MALLOC_MMAP_THRESHOLD_`` /
``MALLOC_TRIM_THRESHOLD_``), which tells the cost of the hooks apart from the page
faults of the memory that kept activations occupy.
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable

import torch
from torch import nn

from bench.common import write_section
from scimech.capture.record import Recorder, record

N_BLOCKS, WIDTH, HEADS, BATCH, TOKENS, ROUNDS, THREADS = 6, 128, 8, 64, 64, 30, 1
#: batches per call of the dataset-sized run
BATCHES = 4


def model_and_batch(batches: int = 1) -> tuple[nn.Module, torch.Tensor]:
    """The model and ``batches`` batches of inputs, one tensor (the first batch is the same for any ``batches``)."""
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(WIDTH, HEADS, 2 * WIDTH, batch_first=True, dropout=0.0)
    model = nn.TransformerEncoder(layer, N_BLOCKS, enable_nested_tensor=False).eval()
    return model, torch.randn(batches * BATCH, TOKENS, WIDTH)


def interleaved(runs: dict[str, Callable[[], object]], rounds: int) -> dict[str, dict[str, float]]:
    """Per-call wall and CPU seconds, alternating the runs every round.

    Returns, per run, ``wall`` (median), ``lo``/``hi`` (25th/75th percentile of wall),
    ``cpu`` (median process CPU time, all threads: the work done, which contention from
    other processes on a shared machine disturbs much less than wall time), ``cpu_rounds``
    (the CPU time of every round, in order: runs of one round met the same load, so their
    ratios pair) and ``faults`` (median minor page faults: fresh memory touched, unaffected by
    other processes).
    """
    for fn in runs.values():  # warm-up
        fn()
    wall: dict[str, list[float]] = {k: [] for k in runs}
    cpu: dict[str, list[float]] = {k: [] for k in runs}
    faults: dict[str, list[int]] = {k: [] for k in runs}
    for _ in range(rounds):
        for k, fn in runs.items():
            f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
            c0, t0 = time.process_time(), time.perf_counter()
            fn()
            wall[k].append(time.perf_counter() - t0)
            cpu[k].append(time.process_time() - c0)
            faults[k].append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0)
    out = {}
    for k in runs:
        q = statistics.quantiles(wall[k], n=4) if len(wall[k]) > 1 else wall[k] * 3  # one round: no spread
        out[k] = {
            "wall": statistics.median(wall[k]),
            "lo": q[0],
            "hi": q[2],
            "cpu": statistics.median(cpu[k]),
            "cpu_rounds": cpu[k],
            "faults": statistics.median(faults[k]),
        }
    return out


def paired(run: list[float], base: list[float]) -> tuple[float, float, float]:
    """Median and 25th/75th percentiles of the round-by-round ratios ``run / base``."""
    ratios = [r / b for r, b in zip(run, base, strict=True)]
    q = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else ratios * 3
    return statistics.median(ratios), q[0], q[2]


#: glibc settings that keep freed memory for reuse (32 MiB mmap threshold, 256 MiB trim threshold)
KEEP_FREED = {"MALLOC_MMAP_THRESHOLD_": "33554432", "MALLOC_TRIM_THRESHOLD_": "268435456"}


#: the small input of the fixed costs: 2 sequences of 2 tokens (a forward of about 2 ms), calls per timing
SMALL, SMALL_CALLS = (2, 2), 20


def runs_on(model: nn.Module, x: torch.Tensor, sites: list[str]) -> tuple[dict[str, Callable[[], object]], str]:
    """Plain forward, ``record``, the Recorder and nnsight on one batch ``x`` (checked equal), and a note on nnsight."""

    @torch.no_grad()
    def plain():
        return model(x)

    @torch.no_grad()
    def ours():
        with Recorder(model, sites) as rec:
            model(x)
        return [rec.activations[s] for s in sites]

    @torch.no_grad()
    def ours_record():
        ds = record(model, x, sites, batch_size=len(x))
        return [torch.from_numpy(ds[s].values) for s in sites]

    diff = max(float((a - b).abs().max()) for a, b in zip(ours_record(), ours(), strict=True))
    if diff > 0:
        raise RuntimeError(f"record and the Recorder disagree on the recorded blocks (max |diff| {diff})")
    runs: dict[str, Callable[[], object]] = {"plain": plain, "record": ours_record, "ours": ours}
    try:
        import nnsight
        from nnsight import NNsight

        wrapped = NNsight(model)

        @torch.no_grad()
        def theirs():
            saved = []  # nnsight >= 0.5: values saved in the trace body land here after it exits
            with wrapped.trace(x):
                for i in range(N_BLOCKS):
                    saved.append(wrapped.layers[i].output.save())
            return saved

        got, mine = theirs(), ours()
        diff = max(float((a - b).abs().max()) for a, b in zip(got, mine, strict=True))
        if len(got) != N_BLOCKS or diff > 0:
            raise RuntimeError(f"nnsight and scimech disagree on the saved blocks (max |diff| {diff})")
        runs["nnsight"] = theirs
        return runs, f"nnsight {nnsight.__version__}: saved blocks equal scimech's recording exactly (max |diff| 0)."
    except Exception as err:  # report, do not hide
        return runs, f"nnsight could not run here: {type(err).__name__}: {err}"


def measure() -> dict:
    """Interleaved rounds of plain / scimech / nnsight in this process (its allocator settings),
    then their fixed costs per call, on a small input."""
    torch.set_num_threads(THREADS)
    model, xs = model_and_batch(BATCHES)
    x = xs[:BATCH]
    sites = [f"layers.{i}" for i in range(N_BLOCKS)]
    runs, nn_note = runs_on(model, x, sites)

    @torch.no_grad()
    def plain_batches():
        return [model(xs[i : i + BATCH]) for i in range(0, len(xs), BATCH)]

    @torch.no_grad()
    def record_batches():
        ds = record(model, xs, sites, batch_size=BATCH)
        return [torch.from_numpy(ds[s].values) for s in sites]

    first = [torch.from_numpy(record(model, x, sites)[s].values) for s in sites]
    diff = max(float((a[:BATCH] - b).abs().max()) for a, b in zip(record_batches(), first, strict=True))
    if diff > 0:
        raise RuntimeError(f"record of {BATCHES} batches disagrees with record of the first (max |diff| {diff})")
    runs = {**runs, "plain_batches": plain_batches, "record_batches": record_batches}
    load0 = os.getloadavg()[0]
    t = interleaved(runs, rounds=ROUNDS)
    for k in ("plain_batches", "record_batches"):  # per forward
        t[k] = {m: [x / BATCHES for x in v] if isinstance(v, list) else v / BATCHES for m, v in t[k].items()}
    small, _ = runs_on(model, torch.randn(*SMALL, WIDTH), sites)
    repeated = {k: (lambda fn=fn: [fn() for _ in range(SMALL_CALLS)]) for k, fn in small.items()}
    fixed = {k: r["cpu"] / SMALL_CALLS for k, r in interleaved(repeated, rounds=ROUNDS).items()}
    return {"times": t, "fixed": fixed, "nn_note": nn_note, "load": [load0, os.getloadavg()[0]]}


def profile_small(calls: int = 300, top: int = 30) -> None:
    """Print where ``record``'s fixed cost per call goes: a cProfile of ``calls`` calls on the small
    input, by cumulative time (``python -m bench.bench_recording --profile``)."""
    import cProfile
    import pstats

    torch.set_num_threads(THREADS)
    model, _ = model_and_batch()
    x, sites = torch.randn(*SMALL, WIDTH), [f"layers.{i}" for i in range(N_BLOCKS)]
    record(model, x, sites)  # the profile's facts measured, the sites' in-place writes learnt
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(calls):
        record(model, x, sites)
    prof.disable()
    pstats.Stats(prof).sort_stats("cumulative").print_stats(top)


def main() -> None:
    if "--measure" in sys.argv:
        print(json.dumps(measure()))
        return
    if "--profile" in sys.argv:
        profile_small()
        return
    settings = {
        "glibc defaults": {},
        "freed memory kept for reuse (" + ", ".join(f"{k}={v}" for k, v in KEEP_FREED.items()) + ")": KEEP_FREED,
    }
    names = {
        "plain": "plain forward",
        "record": f"scimech record, {N_BLOCKS} blocks into an xarray Dataset",
        "ours": f"scimech Recorder, {N_BLOCKS} blocks (tensors)",
        "nnsight": f"nnsight trace, {N_BLOCKS} blocks saved",
        "plain_batches": f"plain forward, {BATCHES} batches",
        "record_batches": f"scimech record, {BATCHES} batches in one call",
    }
    short = {"record": "record", "ours": "Recorder", "nnsight": "nnsight"}
    #: what each run's ratios are taken against
    base = {"plain_batches": "plain_batches", "record_batches": "plain_batches"}
    lines = [
        f"Model: {N_BLOCKS}-block nn.TransformerEncoder (width {WIDTH}, {HEADS} heads), batch {BATCH} x "
        f"{TOKENS} tokens, CPU, {THREADS} threads, inference (no grad); medians of {ROUNDS} interleaved rounds, "
        "wall time with its 25th-75th percentile, process CPU time (all threads) and minor page faults per "
        "forward; the paired CPU ratio is the median of the round-by-round ratios (each round's runs met the same "
        f"load) with their 25th-75th percentile. The last two rows: {BATCHES} batches of {BATCH} per call, per forward, ratios against the plain "
        "forward of the same batches. Each allocator setting runs in a fresh process. The machine is shared with "
        "other jobs: wall times and their ratios carry that noise, CPU times less, page faults none.",
        "",
    ]
    notes = []
    for label, env in settings.items():
        out = subprocess.run(
            [sys.executable, "-m", "bench.bench_recording", "--measure"],
            check=True,
            capture_output=True,
            text=True,
            env={**os.environ, **env},
        )
        res = json.loads(out.stdout.strip().splitlines()[-1])
        t = res["times"]
        lines += [
            f"**{label}** (1-minute load average {res['load'][0]:.1f} before, {res['load'][1]:.1f} after, on "
            f"{os.cpu_count()} cores)",
            "",
            "| run | wall ms / forward | wall ratio | CPU ms / forward | CPU ratio | CPU ratio, paired by round "
            "| page faults / forward |",
            "|---|---|---|---|---|---|---|",
        ]
        for k in [k for k in names if k in t]:
            r, p = t[k], t[base.get(k, "plain")]
            mid, lo, hi = paired(r["cpu_rounds"], p["cpu_rounds"])
            lines.append(
                f"| {names[k]} | {r['wall'] * 1e3:.1f} [{r['lo'] * 1e3:.1f}-{r['hi'] * 1e3:.1f}] | "
                f"{r['wall'] / p['wall']:.3f} | {r['cpu'] * 1e3:.1f} | {r['cpu'] / p['cpu']:.3f} | "
                f"{mid:.3f} [{lo:.3f}-{hi:.3f}] | {r['faults']:.0f} |"
            )
        lines.append("")
        if "nnsight" in t:
            lines += [
                "scimech / nnsight: "
                + "; ".join(
                    f"{k} wall {t[k]['wall'] / t['nnsight']['wall']:.3f}, CPU {t[k]['cpu'] / t['nnsight']['cpu']:.3f}"
                    for k in ("record", "ours", "record_batches")
                )
                + ".",
                "",
            ]
        f = res["fixed"]
        lines += [
            f"Fixed cost per call, on {SMALL[0]} sequences of {SMALL[1]} tokens (CPU ms per call, median of {ROUNDS} "
            f"rounds of {SMALL_CALLS} calls): "
            + ", ".join(f"{names[k]} {v * 1e3:.2f}" for k, v in f.items())
            + "; above the plain forward: "
            + ", ".join(f"{short[k]} {(v - f['plain']) * 1e3:.2f}" for k, v in f.items() if k != "plain")
            + ".",
            "",
        ]
        notes.append(res["nn_note"])
    lines += [
        "Target: `record` within 1.02x of a plain forward and not slower than nnsight's recording. "
        + notes[0]
        + " `record` and the Recorder hold the same values (max |diff| 0)."
    ]
    write_section("recording", "Recording overhead", lines)


if __name__ == "__main__":
    main()
