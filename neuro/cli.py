"""``scimech neuro simulate | baselines | discover | plot`` and the quick ``demo``."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

__all__ = ["register", "demo"]


def demo(out_dir: Path, quick: bool = True) -> Path:
    """Run the discovery study on its quick default; returns the report path."""
    from .study import run_study

    return run_study(Path(out_dir), quick=quick)


def _simulate(args) -> int:
    from .sim.recording import save_recording
    from .tasks import build_recording

    ds = build_recording(quick=not args.full, duration=args.duration, seed=args.seed)
    print(save_recording(ds, args.out))
    return 0


def _baselines(args) -> int:
    from .study import run_baselines
    from .tasks import build_task

    task = build_task(not args.full, context=args.context, horizon=args.horizon, seed=args.seed)
    table = run_baselines(task, quick=not args.full)
    args.out.mkdir(parents=True, exist_ok=True)
    table.to_csv(args.out / "baselines.csv")
    print(table[["val", "test", "ood_mean"]].to_string())
    return 0


def _discover(args) -> int:
    from .study import run_study

    factory = None
    if args.proposer == "llm":
        from .search.llm import ChatClient, LLMProposer

        client = ChatClient(base_url=args.base_url, model=args.model)
        factory = lambda priors: LLMProposer(client, priors=priors)  # noqa: E731
    path = run_study(args.out, quick=not args.full, context=args.context, horizon=args.horizon,
                     max_nodes=args.nodes, workers=args.workers, seed=args.seed, proposer_factory=factory)
    print(path)
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
    p = subparsers.add_parser("neuro", help="model discovery against a simulated larval zebrafish",
                              description="Simulate a larval zebrafish (visuomotor circuit, spinal CPG, body), "
                              "fit forecasting baselines and run a tree search over interpretable models.")
    sub = p.add_subparsers(dest="neuro_command", metavar="COMMAND", required=True)

    def common(q):
        q.add_argument("--full", action="store_true", help="full-size defaults instead of the quick ones")
        q.add_argument("--seed", type=int, default=0)

    s = sub.add_parser("simulate", help="simulate every ID/OOD trial and save a zarr recording")
    common(s)
    s.add_argument("--duration", type=float, default=None, help="trial length, s")
    s.add_argument("--out", type=Path, default=Path("runs/neuro/recording.zarr"))
    s.set_defaults(func=_simulate)
    for name, fn, hlp in (("baselines", _baselines, "fit and score the forecasting baselines"),
                          ("discover", _discover, "baselines + tree search with/without priors + report")):
        q = sub.add_parser(name, help=hlp)
        common(q)
        q.add_argument("--context", type=int, default=4)
        q.add_argument("--horizon", type=int, default=32)
        q.add_argument("--out", type=Path, default=Path(f"runs/neuro/{name}"))
        if name == "discover":
            q.add_argument("--nodes", type=int, default=None, help="node budget per search")
            q.add_argument("--workers", type=int, default=2)
            q.add_argument("--proposer", choices=("offline", "llm"), default="offline")
            q.add_argument("--base-url", default=None, help="OpenAI-compatible endpoint (or SCIMECH_LLM_BASE_URL)")
            q.add_argument("--model", default=None, help="model name (or SCIMECH_LLM_MODEL)")
        q.set_defaults(func=fn)
    pl = sub.add_parser("plot", help="draw the search tree of a finished or running search")
    pl.add_argument("search", type=Path, help="a search folder holding journal.jsonl")
    pl.add_argument("--out", type=Path, default=Path("tree.png"))
    pl.set_defaults(func=_plot)
    _ = argparse
