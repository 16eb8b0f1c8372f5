"""``scimech neuro simulate | baselines | study (alias discover) | plot FOLDER`` and the quick ``demo``.

``study`` takes the options every study shares (:func:`scimech.study.add_study_options`:
``--out --config --size {quick,medium,full} --data --device --cluster|--scheduler|--workers
--dry-run``) and runs :class:`neuro.study.NeuroStudy`. ``baselines`` and ``study`` run on the
simulated zebrafish, or on your traces with ``--data`` (:func:`neuro.data.from_traces`:
activity (time, neuron) with a condition per time step). ``--workers N`` (a local Dask
cluster of N worker processes), ``--cluster CONFIG`` (SLURM/PBS via dask-jobqueue) or
``--scheduler ADDRESS``; without them everything runs serially in this process. Their units
(baseline fits, candidate evaluations) are stored under ``--out``: rerunning the same command
redoes only unfinished ones.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from scimech import options
from scimech.options import existing_path, input_path, number, whole
from scimech.parallel import add_cluster_arguments, client_from_args
from scimech.study import add_study_options

from .plan import BUDGETS, StudySettings

# The pipeline (neuro.study, .run, .baselines, .tasks, .plots: numba, scikit-learn, torch,
# matplotlib) is imported by the command that runs it, not here: every `scimech` command
# imports this module to register its subcommands, and the pipeline costs ~2 s to import.

#: one line for `scimech --help` and `scimech demo` (the study contract, scimech.study)
TITLE = "model discovery against a simulated larval zebrafish"

__all__ = ["TITLE", "register", "demo", "study_parser"]

_DATA_FORMATS = ("zarr", "netcdf", "npy")
DATA_HELP = ("your traces instead of the simulator: a zarr store or netCDF file with activity (time, neuron) and "
             "condition (time) [split, trial, stimulus optional], or a .npy (time, neuron) array with --conditions "
             "and --dt (neuro.data.from_traces)")


def baseline_names(text: str) -> tuple[str, ...]:
    """``--baselines mean,ridge_arx``: a comma-separated subset of the baselines (argparse type)."""
    from .baselines import BASELINES  # lazy: see the note on the pipeline's imports above

    names = tuple(t.strip() for t in text.split(",") if t.strip())
    bad = [n for n in names if n not in BASELINES]
    if bad or not names:
        raise argparse.ArgumentTypeError(f"unknown baseline(s) {bad or [text]}; expected a comma-separated subset "
                                         f"of {', '.join(sorted(BASELINES))}")
    return names


def demo(out_dir: Path, quick: bool = True) -> Path:
    """Run the discovery study on its quick default; returns the report path.

    Besides the report it writes ``out_dir/recovery.txt`` (first line: ``neuro planted truth:
    K of N recovered (...)``, then the planted-truth table) and ``out_dir/findings.txt`` (one
    line per reference finding with its verdict)."""
    from .study import NeuroStudy

    args = study_parser().parse_args(["--out", str(out_dir), "--size", "quick" if quick else "full"])
    study = NeuroStudy()
    return study.complete(study.plan(args))


def _simulate(args) -> int:
    from .sim.recording import save_recording
    from .tasks import build_recording

    ds = build_recording(quick=args.size != "full", duration=args.duration, seed=args.seed)
    print(save_recording(ds, args.out))
    return 0


def _baselines(args) -> int:
    from .run import run_baselines, set_aside_stale_results
    from .tasks import build_task

    if args.data is not None:
        import numpy as np

        from .data import from_traces

        conditions = np.load(args.conditions) if args.conditions is not None else None
        task = from_traces(args.data, conditions=conditions, dt=args.dt, held_out=args.held_out or (),
                           context=args.context, horizon=args.horizon, max_windows=args.max_windows, seed=args.seed,
                           protocol=args.protocol)
    else:
        task = build_task(args.size != "full", context=args.context, horizon=args.horizon, seed=args.seed,
                          duration=args.duration, max_windows=args.max_windows)
    args.out.mkdir(parents=True, exist_ok=True)
    set_aside_stale_results(args.out, [task])  # fits of other data are never resumed
    client = client_from_args(args)
    try:
        table = run_baselines(task, args.baselines, quick=args.size != "full", store=args.out, client=client)
    finally:
        if client is not None:
            client.close()
    table.to_csv(args.out / "baselines.csv")
    print(table[["val", "test", "ood_mean"]].to_string())
    return 0


def _study(args) -> int:
    from .study import NeuroStudy

    if args.seeds is not None and len(args.seeds) == 1:  # --seeds N counted seeds here before
        print(f"scimech neuro study: note: --seeds lists seed values (here: seed {args.seeds[0]} only), as in every "
              "command; for several search seeds from --seed give --n-seeds N.", file=sys.stderr)

    if getattr(args, "protocol", None) is None and args.search_neurons == StudySettings.search_neurons:
        return NeuroStudy().execute(args)
    from dataclasses import dataclass, replace

    from .data import from_traces
    from .study import Traces

    @dataclass(frozen=True)
    class ProtocolTraces(Traces):
        """Your traces under a forecasting protocol (``--protocol``, :func:`neuro.data.from_traces`)."""

        protocol: str | None = None

        def task(self, s):
            import numpy as np

            conditions = np.load(self.conditions) if self.conditions is not None else None
            return from_traces(self.path, conditions=conditions, dt=self.dt, held_out=self.held_out,
                               context=s.context, horizon=s.horizon, max_windows=s.max_windows, seed=s.seed,
                               protocol=self.protocol)

    class ScaledStudy(NeuroStudy):
        def plan(self, a):
            plan = super().plan(a)
            plan.settings["study"] = replace(plan.settings["study"], search_neurons=a.search_neurons)
            tr = plan.settings.get("traces")
            if tr is not None:
                plan.settings["traces"] = ProtocolTraces(tr.path, tr.conditions, tr.dt, tr.held_out, a.protocol)
            if a.protocol:
                plan.sizes["protocol"] = a.protocol
            return plan

    return ScaledStudy().execute(args)


def _plot(args) -> int:
    """The search tree of one search folder, or of every search under a study folder."""
    from .plots import plot_tree
    from .search.tree import load_journal

    folder = Path(args.folder)
    one = (folder / "journal.jsonl").exists()
    journals = [folder / "journal.jsonl"] if one else sorted(folder.glob("**/search_*/journal.jsonl"))
    drawn = {}
    for journal in journals:
        nodes = load_journal(journal)
        if not nodes:
            continue
        if one:
            out = args.out or folder / "tree.png"
        else:
            out = (args.out or folder) / f"tree_{journal.parent.relative_to(folder).as_posix().replace('/', '_')}.png"
        out.parent.mkdir(parents=True, exist_ok=True)
        plot_tree(nodes, title=str(journal.parent)).savefig(out, dpi=110, bbox_inches="tight")
        drawn[str(out)] = len(nodes)
    if not drawn:
        print(f"No search nodes under {folder} (journal.jsonl); run `scimech neuro study` first.")
        return 2
    print(json.dumps({"figures": drawn}))
    return 0


def _task_options(q, *, sizes: bool) -> None:
    """The options of the forecasting task (simulated, or your traces with --data)."""
    if sizes:
        options.add(q, "size", default="quick", choices=("quick", "full"),
                    context="Here: the quick (3 s trials) or full (12 s) simulated data")
    options.add(q, "seed", default=StudySettings.seed)
    q.add_argument("--context", type=whole(1), default=StudySettings.context, help="context, steps (default 4)")
    q.add_argument("--horizon", type=whole(1), default=StudySettings.horizon, help="horizon, steps (default 32)")
    q.add_argument("--duration", type=number(0), default=None, help="trial length, s (default 3 quick, 12 full)")
    q.add_argument("--max-windows", type=whole(1), default=StudySettings.max_windows,
                   help="forecast windows per split (default 400)")
    q.add_argument("--baselines", type=baseline_names, default=None, metavar="NAMES",
                   help="comma-separated baselines to fit (default: all)")
    q.add_argument("--conditions", type=input_path("npy"), default=None, help="with a .npy --data: a .npy of one "
                   "stimulus-condition label per time step")
    q.add_argument("--dt", type=number(0), default=None, help="with --data: seconds between samples (default: "
                   "the file's time coordinate)")
    q.add_argument("--held-out", nargs="+", default=None, metavar="CONDITION",
                   help="with --data: conditions never trained on (the OOD suite held_out_condition)")
    q.add_argument("--protocol", choices=("zapbench",), default=None,
                   help="with --data: ZAPBench's protocol (each condition split 70/10/20 %% in time after one "
                   "padding step at either end, the condition 'taxis' or --held-out held out, context <= 256 "
                   "(4 or 256 reported), horizon 32, every window at stride 1; MAE per step in mae_per_step.csv)")


def _needs_data(q) -> None:
    """--conditions, --dt, --held-out and --protocol act on your traces only."""
    for flag, example in (("--conditions", ("--conditions", "{npy}")), ("--dt", ("--dt", "0.5")),
                          ("--held-out", ("--held-out", "taxis")), ("--protocol", ("--protocol", "zapbench"))):
        options.needs(q, flag, lambda a: a.data is not None, "--data PATH (your traces)", example)


def add_study_arguments(q: argparse.ArgumentParser) -> None:
    """Every option of ``scimech neuro study`` (the shared study options and the search's own)."""
    add_study_options(q, out_default="runs/neuro/study", data_help=DATA_HELP, default_size="quick",
                      data_formats=_DATA_FORMATS)
    _task_options(q, sizes=False)
    sizes = {k: "/".join(str(BUDGETS[s][k]) for s in BUDGETS) for k in ("nodes", "seeds", "long_nodes")}
    q.add_argument("--nodes", type=whole(1), default=None,
                   help=f"node budget per search (default quick/medium/full: {sizes['nodes']})")
    seeds = q.add_mutually_exclusive_group()
    options.add(seeds, "seeds", context="Here: the search seeds")
    options.add(seeds, "n_seeds", context=f"Here: search seeds --seed, --seed+1, ... (default {sizes['seeds']})")
    q.add_argument("--long-context", type=whole(0), default=StudySettings.long_context,
                   help="context of the long-context task for the tail beat (default 256; 0 skips it)")
    q.add_argument("--long-nodes", type=whole(1), default=None,
                   help=f"node budget per long-context search (default {sizes['long_nodes']})")
    q.add_argument("--generation", type=whole(1), default=StudySettings.generation,
                   help="candidates proposed and evaluated together per search step (default 2); "
                   "with --seed it fixes the trees, whatever runs them")
    q.add_argument("--search-seconds", type=number(0), default=None,
                   help="wall-clock budget per search, s (default 90 quick, 240 medium, 3600 full); a node budget "
                   "is reproducible, a time budget is not")
    q.add_argument("--search-neurons", type=whole(1), default=StudySettings.search_neurons,
                   help="recordings with more units: the baselines run on every unit (baselines_all_neurons.csv), "
                   "the rest of the study on this many drawn at random (default 128)")
    q.add_argument("--proposer", choices=("offline", "llm"), default="offline",
                   help="who proposes candidate programs: the offline proposer, or an LLM (default offline)")
    q.add_argument("--base-url", default=None, help="with --proposer llm: OpenAI-compatible endpoint (or "
                   "SCIMECH_LLM_BASE_URL)")
    q.add_argument("--llm-model", default=None, help="with --proposer llm: the LLM's name (or SCIMECH_LLM_MODEL)")
    options.deprecated(q, "--model", "--llm-model")
    _needs_data(q)
    for flag, example in (("--base-url", ("--base-url", "http://localhost:8000/v1")),
                          ("--llm-model", ("--llm-model", "qwen"))):
        options.needs(q, flag, lambda a: a.proposer == "llm", "--proposer llm", example)
    options.needs(q, "--long-nodes", lambda a: bool(a.long_context), "--long-context above 0",
                  ("--long-context", "0", "--long-nodes", "3"))


def study_parser() -> argparse.ArgumentParser:
    """``scimech neuro study``'s options on a parser of its own (the demo parses its defaults)."""
    p = argparse.ArgumentParser(prog="scimech neuro study")
    add_study_arguments(p)
    return p


def register(subparsers) -> None:
    p = subparsers.add_parser("neuro", help=TITLE,
                              description="Simulate a larval zebrafish (visuomotor circuit, spinal CPG, body), "
                              "fit forecasting baselines and run a tree search over interpretable models.")
    sub = p.add_subparsers(dest="neuro_command", metavar="COMMAND", required=True)

    s = sub.add_parser("simulate", help="simulate every ID/OOD trial and save a zarr recording")
    options.add(s, "size", default="quick", choices=("quick", "full"),
                context="Here: the quick (3 s trials) or full (12 s) simulation")
    options.add(s, "seed", default=0)
    s.add_argument("--duration", type=number(0), default=None, help="trial length, s")
    options.add(s, "out", kind="file", default="runs/neuro/recording.zarr", context="Here: the zarr recording")
    s.set_defaults(func=_simulate)

    hlp = "fit and score the forecasting baselines (resumable)"
    b = sub.add_parser("baselines", help=hlp, description=f"{hlp[0].upper()}{hlp[1:]}. Units are stored under "
                       "--out; rerunning the same command redoes only unfinished ones.")
    _task_options(b, sizes=True)
    options.add(b, "out", default="runs/neuro/baselines")
    options.add(b, "data", formats=_DATA_FORMATS, context=DATA_HELP)
    add_cluster_arguments(b)
    _needs_data(b)
    b.set_defaults(func=_baselines)

    hlp = "baselines + tree search with/without priors + report (resumable)"
    q = sub.add_parser("study", help=hlp, aliases=["discover"],
                       description=f"{hlp[0].upper()}{hlp[1:]}. Units are stored under --out; rerunning the same "
                       "command redoes only unfinished ones (a folder of other data is set aside, never resumed).")
    add_study_arguments(q)
    q.set_defaults(func=_study)

    pl = sub.add_parser("plot", help="draw the search trees of a study folder (or of one search folder)")
    pl.add_argument("folder", type=existing_path("folder"), metavar="FOLDER",
                    help="a study's --out folder, or one search folder holding journal.jsonl")
    options.add(pl, "out", kind="file", context="Here: the figure (one search) or a folder for them "
                "(default: FOLDER/tree_<search>.png)")
    pl.set_defaults(func=_plot)
