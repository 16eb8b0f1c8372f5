"""``scimech neuro simulate | baselines | study (alias discover) | plot`` and the quick ``demo``.

``baselines`` and ``study`` run on the simulated zebrafish, or on your traces with ``--data``
(:func:`neuro.data.from_traces`: activity (time, neuron) with a condition per time step).
They take ``--workers N`` (a local Dask cluster of N worker
processes), ``--cluster CONFIG`` (SLURM/PBS via dask-jobqueue) or ``--scheduler ADDRESS``;
without them everything runs serially in this process. Their units (baseline fits, candidate
evaluations) are stored under ``--out``: rerunning the same command redoes only unfinished ones.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from scimech.options import existing_path, number, whole
from scimech.study import Plan, add_dry_run

#: one line for `scimech --help` and `scimech demo` (the study contract, scimech.study)
TITLE = "model discovery against a simulated larval zebrafish"

__all__ = ["TITLE", "register", "demo"]


def demo(out_dir: Path, quick: bool = True) -> Path:
    """Run the discovery study on its quick default; returns the report path.

    Besides the report it writes ``out_dir/recovery.txt`` (first line: ``neuro planted truth:
    K of N recovered (...)``, then the planted-truth table) and ``out_dir/findings.txt`` (one
    line per reference finding with its verdict)."""
    from .study import run_study

    return run_study(Path(out_dir), quick=quick)


def _simulate(args) -> int:
    from .sim.recording import save_recording
    from .tasks import build_recording

    ds = build_recording(quick=not args.full, duration=args.duration, seed=args.seed)
    print(save_recording(ds, args.out))
    return 0


def _names(text: str | None) -> list[str] | None:
    from scimech.errors import ConfigError

    from .baselines import BASELINES

    if not text:
        return None
    names = [t.strip() for t in text.split(",") if t.strip()]
    bad = [n for n in names if n not in BASELINES]
    if bad:
        raise ConfigError(f"Unknown baseline(s) {bad} in --baselines; expected a comma-separated subset of "
                          f"{sorted(BASELINES)}.")
    return names


def _task(args):
    """Your traces (``--data``) or the simulated task."""
    if args.data is not None:
        import numpy as np

        from .data import from_traces

        conditions = np.load(args.conditions) if args.conditions is not None else None
        return from_traces(args.data, conditions=conditions, dt=args.dt, held_out=args.held_out or (),
                           context=args.context, horizon=args.horizon, max_windows=args.max_windows, seed=args.seed)
    from .tasks import build_task

    return build_task(not args.full, context=args.context, horizon=args.horizon, seed=args.seed,
                      duration=args.duration, max_windows=args.max_windows)


def _baselines(args) -> int:
    from scimech.parallel import client_from_args

    from .study import run_baselines

    names = _names(args.baselines)
    task = _task(args)
    args.out.mkdir(parents=True, exist_ok=True)
    client = client_from_args(args)
    try:
        table = run_baselines(task, names, quick=not args.full, store=args.out, client=client)
    finally:
        if client is not None:
            client.close()
    table.to_csv(args.out / "baselines.csv")
    print(table[["val", "test", "ood_mean"]].to_string())
    return 0


#: bench/RESULTS.md (neuro, `python -m bench.bench_scale`): one candidate evaluation (both sandbox
#: stages) took 2.33 s on one worker at the quick sizes
_BENCH_EVAL = 2.33


def _plan(args, names) -> Plan:
    """What ``scimech neuro study`` would run: for each search seed, a search with and one without
    wiring priors, each up to its node budget, plus the long-context searches and the baselines."""
    from .study import BUDGETS

    budget = "full" if args.full else ("medium" if args.medium else "quick")
    B = BUDGETS[budget]
    nodes = args.nodes or B["nodes"]
    seeds = [args.seed + k for k in range(args.seeds or B["seeds"])]
    long_nodes = args.long_nodes or B["long_nodes"]
    units = [f"seed {s} {p} node {n}" for s in seeds for p in ("priors", "no priors") for n in range(nodes)]
    if args.long_context:
        units += [f"seed {s} long-context {'priors' if p else 'no priors'} node {n}" for s in seeds
                  for p in B["long_priors"] for n in range(long_nodes)]
    sizes = {"budget": budget, "search seeds": ", ".join(map(str, seeds)),
             "nodes per search": f"{nodes} (long context {args.long_context}: {long_nodes})" if args.long_context
             else nodes,
             "wall-clock cap per search": f"{args.search_seconds or B['search_seconds']:.0f} s",
             "task": f"context {args.context}, horizon {args.horizon}, up to {args.max_windows} windows per split",
             "data": str(args.data) if args.data else "the simulator",
             "baselines": ", ".join(names) if names else "all", "proposer": args.proposer}
    return Plan("neuro study", units, sizes, _BENCH_EVAL,
                "one evaluation per node, bench/RESULTS.md's 2.33 s; baselines and simulation not included; "
                "each search also stops at its wall-clock cap", str(args.out))


def _discover(args) -> int:
    from scimech.parallel import client_from_args

    from .study import run_study

    names = _names(args.baselines)
    if args.dry_run:
        print(_plan(args, names).text())
        return 0
    factory = None
    if args.proposer == "llm":
        from .search.llm import ChatClient, LLMProposer

        client = ChatClient(base_url=args.base_url, model=args.model)
        factory = lambda priors: LLMProposer(client, priors=priors)  # noqa: E731
    client = client_from_args(args)
    try:
        budget = "full" if args.full else ("medium" if args.medium else "quick")
        path = run_study(args.out, quick=not args.full, context=args.context, horizon=args.horizon,
                         max_nodes=args.nodes, workers=1, seed=args.seed, proposer_factory=factory,
                         duration=args.duration, baselines=names, client=client, generation=args.generation,
                         max_windows=args.max_windows, search_seconds=args.search_seconds, budget=budget,
                         seeds=args.seeds, long_context=args.long_context or None, long_nodes=args.long_nodes,
                         task=_task(args) if args.data is not None else None)
    finally:
        if client is not None:
            client.close()
    print(f"Report: {path}")
    for name in ("recovery.txt", "findings.txt"):
        f = Path(args.out) / name
        if f.exists():
            print(f.read_text().splitlines()[0] if name == "recovery.txt" else f.read_text().rstrip())
    return 0


def _plot(args) -> int:
    from .plots import plot_tree
    from .search.tree import load_journal

    nodes = load_journal(Path(args.search) / "journal.jsonl")
    if not nodes:
        print(f"No nodes in {args.search}/journal.jsonl; run `scimech neuro discover` first.")
        return 2
    fig = plot_tree(nodes, title=str(args.search))
    out = Path(args.out)
    fig.savefig(out, dpi=110, bbox_inches="tight")
    print(json.dumps({"figure": str(out), "nodes": len(nodes)}))
    return 0


def register(subparsers) -> None:
    p = subparsers.add_parser("neuro", help=TITLE,
                              description="Simulate a larval zebrafish (visuomotor circuit, spinal CPG, body), "
                              "fit forecasting baselines and run a tree search over interpretable models.")
    sub = p.add_subparsers(dest="neuro_command", metavar="COMMAND", required=True)

    def common(q):
        q.add_argument("--full", action="store_true", help="full-size defaults instead of the quick ones")
        q.add_argument("--seed", type=whole(0), default=0)

    s = sub.add_parser("simulate", help="simulate every ID/OOD trial and save a zarr recording")
    common(s)
    s.add_argument("--duration", type=number(0), default=None, help="trial length, s")
    s.add_argument("--out", type=Path, default=Path("runs/neuro/recording.zarr"))
    s.set_defaults(func=_simulate)
    from scimech.parallel import add_cluster_arguments

    for name, fn, hlp, aliases in (
            ("baselines", _baselines, "fit and score the forecasting baselines (resumable)", []),
            ("study", _discover, "baselines + tree search with/without priors + report (resumable)", ["discover"])):
        q = sub.add_parser(name, help=hlp, aliases=aliases,
                           description=f"{hlp[0].upper()}{hlp[1:]}. Units are stored under --out; rerunning the "
                           "same command redoes only unfinished ones.")
        common(q)
        q.add_argument("--context", type=whole(1), default=4)
        q.add_argument("--horizon", type=whole(1), default=32)
        q.add_argument("--duration", type=number(0), default=None, help="trial length, s (default 3 quick, 12 full)")
        q.add_argument("--max-windows", type=whole(1), default=400, help="forecast windows per split (default 400)")
        q.add_argument("--baselines", default=None, metavar="NAMES",
                       help="comma-separated baselines to fit (default: all)")
        q.add_argument("--out", type=Path, default=Path(f"runs/neuro/{name}"))
        q.add_argument("--data", type=existing_path(), default=None,
                       help="your traces instead of the simulator: a zarr store or netCDF file with activity "
                       "(time, neuron) and condition (time) [split, trial, stimulus optional], or a .npy "
                       "(time, neuron) array with --conditions and --dt (neuro.data.from_traces)")
        q.add_argument("--conditions", type=existing_path(), default=None, help="with a .npy --data: a .npy of one "
                       "stimulus-condition label per time step")
        q.add_argument("--dt", type=number(0), default=None, help="with --data: seconds between samples (default: "
                       "the file's time coordinate)")
        q.add_argument("--held-out", nargs="+", default=None, metavar="CONDITION",
                       help="with --data: conditions never trained on (the OOD suite held_out_condition)")
        if name == "study":
            q.add_argument("--medium", action="store_true",
                           help="the budget at which the study answers its questions (3 search seeds x 24 nodes, "
                           "3 OOD trials per suite; ~10 min on 2 cores); default: the quick smoke test")
            q.add_argument("--nodes", type=whole(1), default=None,
                           help="node budget per search (default 12 quick, 24 medium, 40 full)")
            q.add_argument("--seeds", type=whole(1), default=None,
                           help="search seeds --seed, --seed+1, ... (default 1 quick, 3 medium/full)")
            q.add_argument("--long-context", type=whole(0), default=256,
                           help="context of the long-context task for the tail beat (default 256; 0 skips it)")
            q.add_argument("--long-nodes", type=whole(1), default=None,
                           help="node budget per long-context search (default 6 quick, 10 medium, 40 full)")
            q.add_argument("--generation", type=whole(1), default=2,
                           help="candidates proposed and evaluated together per search step (default 2); "
                           "with --seed it fixes the trees, whatever runs them")
            q.add_argument("--search-seconds", type=number(0), default=None,
                           help="wall-clock budget per search, s (default 90 quick, 240 medium, 3600 full)")
            q.add_argument("--proposer", choices=("offline", "llm"), default="offline")
            q.add_argument("--base-url", default=None, help="OpenAI-compatible endpoint (or SCIMECH_LLM_BASE_URL)")
            q.add_argument("--model", default=None, help="model name (or SCIMECH_LLM_MODEL)")
            add_dry_run(q)
        add_cluster_arguments(q)
        q.set_defaults(func=fn)
    pl = sub.add_parser("plot", help="draw the search tree of a finished or running search")
    pl.add_argument("search", type=Path, help="a search folder holding journal.jsonl")
    pl.add_argument("--out", type=Path, default=Path("tree.png"))
    pl.set_defaults(func=_plot)
    _ = argparse
