"""The neuro study at recording scale: seconds and peak memory of each step on synthetic
traces of N neurons x T steps (``neuro.synthetic.latent_traces``: low-rank latent dynamics +
noise, four conditions, the last held out).

Each step runs in its own subprocess (so its peak resident memory, ``getrusage`` maxrss of
the process and of its children, is its own), under an address-space cap (``--cap-gb``) so
a step that blows up fails with MemoryError instead of taking the machine down:

- ``from_traces``: the synthetic recording -> :func:`neuro.data.from_traces`;
- ``windows``: every forecast window of val/test/OOD read once (what scoring touches);
- one step per baseline: fit on the training trials, score on every split;
- ``search``: a short tree search (offline proposer, ``--nodes`` nodes) on the units the
  study searches (``StudySettings.search_neurons`` drawn at random when there are more).

``python -m bench.bench_neuro_scale`` (N 1000 and 10000, T 5000) writes
bench/results/neuro_scale.md (``neuro_scale_context<C>.md`` for another ``--context``);
``--neurons``, ``--steps``, ``--only`` for a subset. Besides the wall seconds each step reports
its CPU seconds (user + system of the process and its children: on a shared machine the
wall time measures the other work too).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BASELINE_STEPS = ("mean", "last_value", "stimulus_evoked", "nlinear", "dlinear", "ridge_arx", "gru", "tide")
STEPS = ("from_traces", "windows", *BASELINE_STEPS, "search")


def _task(n: int, t: int, context: int, protocol: str | None):
    from neuro.data import from_traces
    from neuro.synthetic import latent_traces

    ds = latent_traces(n, t, seed=0, conditions=("a", "b", "c", "d"))
    if protocol:
        return from_traces(ds, protocol=protocol, held_out=("d",), context=context)
    return from_traces(ds, held_out=("d",), context=context)


def _one(step: str, n: int, t: int, context: int, nodes: int, protocol: str | None) -> dict:
    """Run one step in this process; return its seconds and what it produced."""
    t0 = time.perf_counter()
    task = _task(n, t, context, protocol)
    t_task = time.perf_counter() - t0
    out = {"step": step, "neurons": n, "steps": t, "task_seconds": t_task, "task_cpu_seconds": _cpu()}
    t1, c1 = time.perf_counter(), _cpu()
    if step == "windows":
        total = 0.0
        for w in (task.val, task.test, *task.ood.values()):
            for b in w.batches() if hasattr(w, "batches") else [w]:
                total += float(b.target.sum()) + float(b.context.sum())
        out["windows"] = {k: len(w) for k, w in (("val", task.val), ("test", task.test), *task.ood.items())}
    elif step in BASELINE_STEPS:
        from neuro.run import _fit_and_score

        row = _fit_and_score(step, task, quick=True)
        out["val_mae"], out["test_mae"] = row["val"], row["test"]
    elif step == "search":
        from neuro.plan import StudySettings
        from neuro.run import run_search

        sub = task.neuron_subset(StudySettings.search_neurons, 0)  # what the study searches on
        out["search_neurons"] = sub.n_neurons
        with tempfile.TemporaryDirectory() as d:
            ts, nodes_ = run_search(
                sub, Path(d), False, max_nodes=nodes, max_seconds=600, workers=1, seed=0, generation=1
            )
            out["nodes"] = [(nd.status, nd.val, nd.error[:120]) for nd in nodes_]
    out["seconds"] = time.perf_counter() - t1 if step != "from_traces" else t_task
    out["cpu_seconds"] = _cpu() - c1 if step != "from_traces" else out["task_cpu_seconds"]
    return out


def _cpu() -> float:
    """CPU seconds (user + system) of this process and its finished children so far."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def _measure(step, n, t, context, nodes, cap_gb, protocol) -> dict:
    cmd = [
        sys.executable,
        "-m",
        "bench.bench_neuro_scale",
        "--one",
        step,
        "--neurons",
        str(n),
        "--steps",
        str(t),
        "--context",
        str(context),
        "--nodes",
        str(nodes),
        "--cap-gb",
        str(cap_gb),
    ]
    if protocol:
        cmd += ["--protocol", protocol]
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=Path(__file__).resolve().parent.parent)
    wall = time.perf_counter() - t0
    try:
        res = json.loads(p.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        err = (p.stderr.strip().splitlines() or ["?"])[-1]
        res = {"step": step, "neurons": n, "steps": t, "error": err[:200]}
    res["wall"] = wall
    return res


def _child(args) -> None:
    cap = int(args.cap_gb * 1024**3)
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    try:
        out = _one(args.one, args.neurons[0], args.steps, args.context, args.nodes, args.protocol)
    except MemoryError as err:
        out = {"step": args.one, "error": f"MemoryError (address space capped at {args.cap_gb} GB) {err}"[:200]}
    me = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    out["peak_rss_mb"] = me / 1024
    out["children_peak_rss_mb"] = kids / 1024
    print(json.dumps(out, default=str))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--neurons", type=int, nargs="+", default=[1000, 10000])
    p.add_argument("--steps", type=int, default=5000, help="time steps of the recording")
    p.add_argument("--context", type=int, default=4)
    p.add_argument("--nodes", type=int, default=2, help="nodes of the short search")
    p.add_argument("--only", nargs="+", default=None, choices=STEPS)
    p.add_argument("--cap-gb", type=float, default=12.0, help="address-space cap of each step's process")
    p.add_argument("--protocol", default=None, help="from_traces protocol (e.g. zapbench)")
    p.add_argument("--one", default=None, help=argparse.SUPPRESS)
    p.add_argument("--no-write", action="store_true", help="print, do not write bench/results/neuro_scale.md")
    args = p.parse_args(argv)
    args.command = "python -m bench.bench_neuro_scale " + " ".join(sys.argv[1:] if argv is None else argv)
    if args.one:
        _child(args)
        return 0
    rows = []
    for n in args.neurons:
        for step in args.only or STEPS:
            r = _measure(step, n, args.steps, args.context, args.nodes, args.cap_gb, args.protocol)
            print(json.dumps(r, default=str), flush=True)
            rows.append(r)
            if not args.no_write:  # after every step: a long run leaves what it measured
                _write(rows, args)
    return 0


def _write(rows, args, extra: list[str] = ()) -> None:
    """bench/results/neuro_scale.md from the measured rows (``extra``: lines appended)."""
    from bench.common import write_section

    lines = [
        f"Exact command: `{args.command.strip()}`",
        "",
        f"Synthetic traces (`neuro.synthetic.latent_traces`, rank-8 latents + noise, 4 conditions, one held "
        f"out) of N neurons x {args.steps} steps; context {args.context}, horizon 32"
        + (f", protocol {args.protocol}" if args.protocol else "")
        + f"; search: {args.nodes} nodes. Each "
        f"step in its own process (address space capped at {args.cap_gb:g} GB); seconds of the step itself "
        "(building the task excluded, except for from_traces); peak RSS of that process (the traces and task "
        "included) and of its sandboxed children (the search's candidates).",
        "",
        "| N | step | seconds | CPU seconds | peak RSS (MB) | children peak RSS (MB) | result |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        res = (
            r.get("error")
            or (f"val MAE {r['val_mae']:.3f}" if r.get("val_mae") is not None else "")
            or (", ".join(f"{s} {v:.3f}" if isinstance(v, float) else s for s, v, _ in r.get("nodes", [])))
        )
        lines.append(
            f"| {r.get('neurons')} | {r['step']} | {r.get('seconds', float('nan')):.1f} | "
            f"{r.get('cpu_seconds', float('nan')):.1f} | "
            f"{r.get('peak_rss_mb', float('nan')):.0f} | {r.get('children_peak_rss_mb', float('nan')):.0f} "
            f"| {res} |"
        )
    name = "neuro_scale" if args.context == 4 else f"neuro_scale_context{args.context}"
    write_section(name, "neuro at recording scale (issue 21)", lines + list(extra))


if __name__ == "__main__":
    raise SystemExit(main())
