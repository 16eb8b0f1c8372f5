"""The discovery study: one :class:`scimech.studies.contract.Study` class, ``scimech neuro ...``.

``scimech neuro generate | study | redraw FOLDER | shift | baselines | trees FOLDER``: the
simulator -> splits -> baselines -> tree searches with and without structural priors over
several search seeds -> ID / OOD / faithfulness table, verdicts with intervals, the
planted-truth table, a long-context (256 steps) task for the tail beat, figures and a report.

The pipeline, one module per step (imported when a command runs, not when ``scimech --help``
is built):

- :mod:`neuro.plan`: the sizes (:data:`~neuro.plan.BUDGETS`), :class:`~neuro.plan.StudySettings`,
  your traces (:class:`~neuro.plan.Traces`) and the proposer (:class:`~neuro.plan.Proposer`);
- :mod:`neuro.run`: the tasks, baselines and searches as resumable units (:class:`~neuro.run.StudyRun`);
- :mod:`neuro.evidence`: the per-seed, per-window errors the verdicts rest on;
- :mod:`neuro.findings`: the reference findings with their verdicts;
- :mod:`neuro.recovery`: the planted truth vs what the study found;
- :mod:`neuro.ceiling`: the same rows scored on a perfect forecaster (the simulator forked at each window);
- :mod:`neuro.report`: ``report.md``, figures and the saved numbers.

``baselines`` and ``study`` run on the simulated zebrafish, or on your traces with ``--data``
(:func:`neuro.data.from_traces`: activity (time, neuron) with a condition per time step).
``--workers N`` (a local Dask cluster of N worker processes), ``--cluster CONFIG`` (SLURM/PBS
via dask-jobqueue) or ``--scheduler ADDRESS``; without them everything runs serially in this
process. Their units (baseline fits, candidate evaluations) are stored under ``--out``:
rerunning the same command redoes only unfinished ones. :func:`neuro.run_study` is the same run
from Python; :func:`run_and_report` runs it from :class:`~neuro.plan.StudySettings` fields, with
your task or proposer (``neuro.study.run_study`` until scimech 0.3.0).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from scimech._moved import warn_moved
from scimech.errors import ConfigError
from scimech.run import options
from scimech.run.many_paths import data_takes_many, given, inspect_takes_many
from scimech.run.options import add_cluster_arguments, existing_path, input_path, number, whole
from scimech.studies.contract import Command, Plan, Study

from .data.zapbench import zarr_node
from .plan import BUDGETS, StudySettings

__all__ = ["NeuroStudy", "run_and_report"]

#: a bare zarr array of traces (ZAPBench's layout: one (time, neuron) array, no group; neuro.data.zapbench)
ZARR_ARRAY = options.Format(
    "a zarr array of (time, neuron) traces (ZAPBench's layout)", lambda p: zarr_node(p) == "array"
)


def _is_suite2p(path: Path) -> bool:
    from .data.suite2p import is_suite2p  # numpy and xarray: imported when a path is checked, not by every parser

    return is_suite2p(path)


#: a suite2p output (its suite2p/ folder, the folder above it or one planeN folder; neuro.data.suite2p)
SUITE2P = options.Format(
    "a suite2p output folder (plane0/, plane1/ ... with F.npy, Fneu.npy, iscell.npy, ops.npy)", _is_suite2p
)
_DATA_FORMATS = ("zarr", "netcdf", "npy", ZARR_ARRAY, SUITE2P)
#: a file of condition labels (or step ranges), read by neuro.data.reading
CONDITION_FILE = options.Format(
    "a conditions file (.csv, .tsv, .json or .txt: a label per step, or start/stop step ranges), or the word zapbench",
    lambda p: p.suffix.lower() in (".csv", ".tsv", ".json", ".txt") and options.FORMATS["text"].test(p),
)
DATA_HELP = (
    "your traces instead of the simulator: a zarr store or netCDF file with activity (time, neuron), a "
    "time coordinate with units and condition (time) [split, trial, stimulus optional]; a bare zarr array "
    "(ZAPBench's layout) or a .npy (time, neuron) array with --conditions and --dt; a suite2p output "
    "folder (its plane folders read as one recording, with --conditions or a conditions.csv inside) "
    "(neuro.data.from_traces; `scimech neuro inspect PATH` says what is read)"
)


def _data_value(data):
    """``--data`` as the reader takes it: one path, or a list of them (a glob stays a pattern string)."""
    return [Path(d) for d in data] if isinstance(data, (list, tuple)) else data


def conditions_source(text: str):
    """``--conditions``: a file of labels or step ranges, or the word ``zapbench`` (ZAPBench's
    published condition offsets; argparse type)."""
    if text.strip().lower() == "zapbench":
        return "zapbench"
    return _CONDITION_FILES.convert(text)  # its refusals say what the file seems to be; '' falls to ours


_CONDITION_FILES = input_path("npy", CONDITION_FILE)
_CONDITIONS = options.Option(conditions_source, _CONDITION_FILES.constraint, _CONDITION_FILES.bad_examples)
_CONDITIONS.formats = _CONDITION_FILES.formats


def baseline_names(text: str) -> tuple[str, ...]:
    """``--baselines mean,ridge_arx``: a comma-separated subset of the baselines (argparse type)."""
    from .baselines import BASELINES  # lazy: see the note on the pipeline's imports above

    names = tuple(t.strip() for t in text.split(",") if t.strip())
    bad = [n for n in names if n not in BASELINES]
    if bad or not names:
        raise argparse.ArgumentTypeError(
            f"unknown baseline(s) {bad or [text]}; expected a comma-separated subset of {', '.join(sorted(BASELINES))}"
        )
    return names


def _task_options(q, *, sizes: bool) -> None:
    """The options of the forecasting task (simulated, or your traces with --data)."""
    if sizes:
        options.add(
            q,
            "size",
            default="quick",
            choices=("quick", "full"),
            context="Here: the quick (3 s trials) or full (12 s) simulated data",
        )
    options.add(q, "seed", default=StudySettings.seed)
    q.add_argument("--context", type=whole(1), default=StudySettings.context, help="context, steps (default 4)")
    q.add_argument("--horizon", type=whole(1), default=StudySettings.horizon, help="horizon, steps (default 32)")
    q.add_argument("--duration", type=number(0), default=None, help="trial length, s (default 3 quick, 12 full)")
    q.add_argument(
        "--max-windows",
        type=whole(1),
        default=StudySettings.max_windows,
        help="forecast windows per split (default 400)",
    )
    q.add_argument(
        "--baselines",
        type=baseline_names,
        default=None,
        metavar="NAMES",
        help="comma-separated baselines to fit (default: all)",
    )
    _data_options(q)
    q.add_argument(
        "--held-out",
        nargs="+",
        default=None,
        metavar="CONDITION",
        help="with --data: conditions never trained on (the OOD suite held_out_condition)",
    )
    q.add_argument(
        "--protocol",
        choices=("zapbench",),
        default=None,
        help="with --data: ZAPBench's protocol (each condition split 70/10/20 %% in time after one "
        "padding step at either end, the condition 'taxis' or --held-out held out, context <= 256 "
        "(4 or 256 reported), horizon 32, every window at stride 1; MAE per step in mae_per_step.csv)",
    )


def _data_options(q, *, data: bool = True) -> None:
    """--conditions and --dt: how your traces are read (study and baselines with --data; inspect)."""
    with_data = "with --data: " if data else ""
    q.add_argument(
        "--conditions",
        type=_CONDITIONS,
        default=None,
        metavar="FILE",
        help=f"{with_data}the stimulus condition of each time step, from a file (.npy or .txt: a label "
        "per step; .csv/.tsv: a 'condition' column, with 'start' and 'stop' for step ranges, or BIDS events: "
        "onset and duration in s with trial_type; .json: "
        "labels or ZAPBench's condition_offsets and condition_names) or 'zapbench' (ZAPBench's "
        "offsets); default: the file's 'condition', else conditions.csv (.json, .npy, .txt) beside it",
    )
    q.add_argument(
        "--dt",
        type=number(0),
        default=None,
        help=f"{with_data}seconds between samples, for traces "
        "whose time axis has no units or that have none (default: the time coordinate, read with its "
        "units)",
    )


def _needs_data(q) -> None:
    """--conditions, --dt, --held-out and --protocol act on your traces only."""
    for flag, example in (
        ("--conditions", ("--conditions", "{npy}")),
        ("--dt", ("--dt", "0.5")),
        ("--held-out", ("--held-out", "taxis")),
        ("--protocol", ("--protocol", "zapbench")),
    ):
        options.needs(q, flag, lambda a: a.data is not None, "--data PATH (your traces)", example)


class NeuroStudy(Study):
    """Model discovery against a simulated larval zebrafish, its planted circuit the ground truth.

    Examples
    --------
    The study behind ``scimech neuro``; from Python, :func:`neuro.run_study` runs it.

    >>> from neuro.study import NeuroStudy
    >>> study = NeuroStudy()
    >>> study.name, [command.name for command in study.commands()]
    ('neuro', ['baselines', 'trees'])
    >>> plan = study.plan(study.study_parser().parse_args([]))  # what would run
    >>> list(plan.units)[:2]
    ['seed 0 priors node 0', 'seed 0 priors node 1']
    """

    name = "neuro"
    title = "model discovery against a simulated larval zebrafish"
    description = (
        "Simulate a larval zebrafish (visuomotor circuit, spinal CPG, body), fit forecasting baselines "
        "and run a tree search over interpretable models (resumable: units are stored under --out; "
        "rerunning the same command redoes only unfinished ones, and a folder of other data is set "
        "aside, never resumed)."
    )
    out_default = "runs/neuro/study"
    data_help = DATA_HELP
    data_formats = _DATA_FORMATS
    data_many = True  # several paths (suite2p's plane folders) or a glob
    shared_options = {
        "seeds": options.Use("Here: the search seeds", one_of="seeds"),
        "n_seeds": options.Use(
            "Here: search seeds --seed, --seed+1, ... (default "
            + "/".join(str(BUDGETS[s]["seeds"]) for s in BUDGETS)
            + ")",
            one_of="seeds",
        ),
    }
    generate_help = "simulate every ID/OOD trial and save a zarr recording"
    shift_help = "a dictionary of a GRU forecaster's states under turning stimuli (shift.nc, shift.png)"
    renamed = {"simulate": "generate", "discover": "study", "plot": "trees"}

    # --- the study ----------------------------------------------------------------------------
    def add_options(self, q: argparse.ArgumentParser) -> None:
        _task_options(q, sizes=False)
        sizes = {k: "/".join(str(BUDGETS[s][k]) for s in BUDGETS) for k in ("nodes", "long_nodes")}
        q.add_argument(
            "--nodes",
            type=whole(1),
            default=None,
            help=f"node budget per search (default quick/medium/full: {sizes['nodes']})",
        )
        q.add_argument(
            "--long-context",
            type=whole(0),
            default=StudySettings.long_context,
            help="context of the long-context task for the tail beat (default 256; 0 skips it)",
        )
        q.add_argument(
            "--long-nodes",
            type=whole(1),
            default=None,
            help=f"node budget per long-context search (default {sizes['long_nodes']})",
        )
        q.add_argument(
            "--generation",
            type=whole(1),
            default=StudySettings.generation,
            help="candidates proposed and evaluated together per search step (default 2); "
            "with --seed it fixes the trees, whatever runs them",
        )
        q.add_argument(
            "--search-seconds",
            type=number(0),
            default=None,
            help="wall-clock budget per search, s (default 90 quick, 240 medium, 3600 full); a node budget "
            "is reproducible, a time budget is not",
        )
        q.add_argument(
            "--search-neurons",
            type=whole(1),
            default=StudySettings.search_neurons,
            help="recordings with more units: the baselines run on every unit (baselines_all_neurons.csv), "
            "the rest of the study on this many drawn at random (default 128)",
        )
        q.add_argument(
            "--proposer",
            choices=("offline", "llm"),
            default="offline",
            help="who proposes candidate programs: the offline proposer, or an LLM (default offline)",
        )
        q.add_argument(
            "--base-url", default=None, help="with --proposer llm: OpenAI-compatible endpoint (or SCIMECH_LLM_BASE_URL)"
        )
        q.add_argument("--llm-model", default=None, help="with --proposer llm: the LLM's name (or SCIMECH_LLM_MODEL)")
        options.deprecated(q, "--model", "--llm-model")
        _needs_data(q)
        for flag, example in (
            ("--base-url", ("--base-url", "http://localhost:8000/v1")),
            ("--llm-model", ("--llm-model", "qwen")),
        ):
            options.needs(q, flag, lambda a: a.proposer == "llm", "--proposer llm", example)
        options.needs(
            q,
            "--long-nodes",
            lambda a: bool(a.long_context),
            "--long-context above 0",
            ("--long-context", "0", "--long-nodes", "3"),
        )

    def plan(self, args: argparse.Namespace) -> Plan:
        from .plan import Proposer, Traces, study_plan

        if args.seeds is not None and len(args.seeds) == 1:  # --seeds N counted seeds here before
            print(
                f"scimech neuro study: note: --seeds lists seed values (here: seed {args.seeds[0]} only), as in "
                "every command; for several search seeds from --seed give --n-seeds N.",
                file=sys.stderr,
            )
        settings = StudySettings(
            out=args.out,
            size=args.size,
            seed=args.seed,
            seeds=args.seeds,
            n_seeds=args.n_seeds,
            nodes=args.nodes,
            long_nodes=args.long_nodes,
            search_seconds=args.search_seconds,
            context=args.context,
            horizon=args.horizon,
            duration=args.duration,
            max_windows=args.max_windows,
            generation=args.generation,
            long_context=args.long_context or None,
            baselines=args.baselines,
            device=args.device,
            search_neurons=args.search_neurons,
        )
        traces = (
            Traces(_data_value(args.data), args.conditions, args.dt, tuple(args.held_out or ()), args.protocol)
            if args.data is not None
            else None
        )
        plan = study_plan(
            settings,
            data=str(_data_value(args.data)) if args.data else None,
            proposer=args.proposer,
            traces=traces,
            proposer_spec=Proposer(args.proposer, args.base_url, args.llm_model),
        )
        if args.protocol:
            plan.sizes["protocol"] = args.protocol
        return plan

    def run(self, plan: Plan, client=None, *, task=None):
        """The study's units; ``task`` (a :class:`neuro.tasks.ForecastTask`) replaces the plan's data."""
        from .plan import Proposer
        from .run import run_units

        s, traces = plan.settings.study, plan.settings.traces
        if task is None and traces is not None:
            task = traces.task(s)
        proposer = plan.settings.proposer or Proposer()
        return run_units(s, client=client, task=task, proposer_factory=proposer.factory())

    def findings(self, run):
        from .findings import findings

        if run.findings is None:
            run.findings = findings(run.evidence)
        return run.findings

    def planted_truth(self, run) -> str | None:
        from .recovery import recovery_text
        from .report import recovery_note

        if run.planted is not None:
            return recovery_text(run.planted, run.ceiling, run.ceiling_note)
        return None if run.task.signal == "traces" else recovery_note(run)  # your traces: nothing was planted

    def report(self, run, plan: Plan) -> Path:
        from .report import save_numbers, write_report

        save_numbers(run, self.findings(run))
        return write_report(run, self.findings(run))

    def load(self, folder: Path):
        """A finished study folder read back: its settings from ``evidence.nc``, every unit resumed from
        the folder (nothing finished is run again, and a search proposes no new node; the simulated
        task is rebuilt from its seed and must have the folder's fingerprint)."""
        import xarray as xr

        from scimech.run.fingerprint import read_fingerprint

        from .plan import study_plan
        from .run import build_tasks, run_units, task_fingerprint

        path = folder / "evidence.nc"
        if not path.is_file():
            raise ConfigError(
                f"{folder} holds no evidence.nc: not a finished `scimech neuro study` folder. Run the "
                f"study with --out {folder} first."
            )
        with xr.open_dataset(path) as ev:
            rec = json.loads(ev.attrs["config"])
        if "seed" not in rec:
            raise ConfigError(
                f"{path} was written by an older scimech that did not record every setting the study "
                f"ran with; rerun `scimech neuro study` with its options and --out {folder} (finished "
                "units are kept) to redraw it."
            )
        s = StudySettings(
            out=folder,
            size=rec["budget"],
            seeds=rec["seeds"],
            nodes=rec["nodes"],
            long_nodes=rec["long_nodes"],
            search_seconds=rec["search_seconds"],
            context=rec["context"],
            horizon=rec["horizon"],
            duration=rec["duration"],
            max_windows=rec["max_windows"],
            generation=rec["generation"],
            long_context=rec["long_context"],
            seed=rec["seed"],
            baselines=tuple(rec["baselines"]) if rec.get("baselines") else None,
            device=rec["device"],
            search_neurons=rec["search_neurons"],
            read_only=True,
        )
        built = build_tasks(s)  # simulated once, checked, then studied
        tasks = [t for t in built[:2] if t is not None]
        if read_fingerprint(folder, "task_fingerprint.txt") != task_fingerprint(tasks):  # your traces, or changed
            raise ConfigError(
                f"{folder} is not a study of the simulator at these settings (your traces, or another "
                f"simulator version): rerun `scimech neuro study` with its options and --out {folder} "
                "(finished units are kept) to redraw it."
            )
        return run_units(s, tasks=built), study_plan(s)

    # --- inspect: what is read from your traces ---------------------------------------------------
    def add_inspect_options(self, parser: argparse.ArgumentParser) -> None:
        inspect_takes_many(parser)  # the reader refuses what it cannot read, naming the fix
        _data_options(parser, data=False)
        parser.add_argument(
            "--held-out",
            nargs="+",
            default=None,
            metavar="CONDITION",
            help="conditions never trained on (the OOD suite held_out_condition)",
        )
        parser.add_argument(
            "--protocol",
            choices=("zapbench",),
            default=None,
            help="the splits of ZAPBench's protocol (as `study --protocol zapbench`)",
        )
        parser.add_argument(
            "--context", type=whole(1), default=StudySettings.context, help="context, steps (default 4)"
        )
        parser.add_argument(
            "--horizon", type=whole(1), default=StudySettings.horizon, help="horizon, steps (default 32)"
        )

    def inspect(self, path: Path, args: argparse.Namespace):
        """What ``study --data PATH`` would read, as a :class:`scimech.studies.reading.Reading` (no torch,
        no task built): :func:`neuro.data.inspect_traces`."""
        from .data import inspect_traces

        return inspect_traces(
            _data_value(given(path, getattr(args, "more", None))),
            conditions=args.conditions,
            dt=args.dt,
            held_out=tuple(args.held_out or ()),
            protocol=args.protocol,
            context=args.context,
            horizon=args.horizon,
        )

    # --- generate, shift and the neuro study's own commands -----------------------------------
    def add_generate_options(self, s: argparse.ArgumentParser) -> None:
        options.add(
            s,
            "size",
            default="quick",
            choices=("quick", "full"),
            context="Here: the quick (3 s trials) or full (12 s) simulation",
        )
        options.add(s, "seed", default=0)
        s.add_argument("--duration", type=number(0), default=None, help="trial length, s")
        options.add(
            s,
            "out",
            kind="file",
            suffixes=(".zarr", ".nc"),
            default="runs/neuro/recording.zarr",
            context="Here: the recording (zarr, or netCDF for a .nc name)",
        )

    def generate(self, args: argparse.Namespace) -> int:
        from .sim.recording import save_recording
        from .tasks import build_recording

        ds = build_recording(quick=args.size != "full", duration=args.duration, seed=args.seed)
        print(save_recording(ds, args.out))
        return 0

    def add_shift_options(self, p: argparse.ArgumentParser) -> None:
        options.add(p, "out", default="runs/neuro/shift")
        options.add(p, "seed", default=0)
        p.add_argument("--gru-steps", type=whole(1), default=400, help="Adam steps of the GRU (default 400)")
        p.add_argument(
            "--k", type=whole(1), default=8, help="active features per row of the TopK dictionary (default 8)"
        )
        p.add_argument("--ood-trials", type=whole(1), default=3, help="turning trials (default 3)")

    def run_shift(self, args: argparse.Namespace):
        from .shift import run_shift

        return run_shift(args.out, seed=args.seed, gru_steps=args.gru_steps, k=args.k, ood_trials=args.ood_trials)

    def shift_lines(self, ds) -> list[str]:
        """The steered feature's effect on the free run, and the realignment's bound."""
        return [
            f"feature {ds.attrs['steered_feature']} (+{ds.attrs['steer_value']:.2f}) during the free run: rms "
            f"forecast change {float(ds.effect_rms[0]):.3f} at step 0, {float(ds.effect_rms[-1]):.3f} "
            f"[{float(ds.effect_rms_ci_low[-1]):.3f}, {float(ds.effect_rms_ci_high[-1]):.3f}] at step "
            f"{int(ds.step[-1])}",
            f"realignment's excess on planted shifts of the states: slope {ds.attrs['bound_slope_realigned']:.2f}, "
            f"C {ds.attrs['bound_C_realigned']:.2f} (left as it is: slope {ds.attrs['bound_slope_original']:.2f}, "
            f"C {ds.attrs['bound_C_original']:.2f})",
        ]

    def commands(self) -> list[Command]:
        return [
            Command(
                "baselines",
                "fit and score the forecasting baselines (resumable)",
                _baselines_options,
                _baselines,
                "Fit and score the forecasting baselines (resumable). Units are stored under "
                "--out; rerunning the same command redoes only unfinished ones.",
            ),
            Command(
                "trees", "draw the search trees of a study folder (or of one search folder)", _trees_options, _trees
            ),
        ]


def _baselines_options(b: argparse.ArgumentParser) -> None:
    _task_options(b, sizes=True)
    options.add(b, "out", default="runs/neuro/baselines")
    options.add(b, "data", formats=_DATA_FORMATS, context=DATA_HELP)
    data_takes_many(b)
    add_cluster_arguments(b)
    _needs_data(b)


def _baselines(args) -> int:
    from .run import run_baselines, set_aside_stale_results
    from .tasks import build_task

    if args.data is not None:
        from .data import from_traces

        task = from_traces(
            _data_value(args.data),
            conditions=args.conditions,
            dt=args.dt,
            held_out=args.held_out or (),
            context=args.context,
            horizon=args.horizon,
            max_windows=args.max_windows,
            seed=args.seed,
            protocol=args.protocol,
        )
    else:
        task = build_task(
            args.size != "full",
            context=args.context,
            horizon=args.horizon,
            seed=args.seed,
            duration=args.duration,
            max_windows=args.max_windows,
        )
    from scimech.run.parallel import client_from_args

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


def _trees_options(pl: argparse.ArgumentParser) -> None:
    pl.add_argument(
        "folder",
        type=existing_path("folder"),
        metavar="FOLDER",
        help="a study's --out folder, or one search folder holding journal.jsonl",
    )
    options.add(
        pl,
        "out",
        kind="file or folder",
        context="Here: the figure (one search) or a folder for them (default: FOLDER/tree_<search>.png)",
    )


def _trees(args) -> int:
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


def run_and_report(out_dir, *, client=None, task=None, proposer_factory=None, **settings) -> Path:
    """Run the whole study and write ``out_dir/report.md`` (and ``findings.txt``,
    ``recovery.txt``, the saved numbers); returns the report's path.

    Parameters
    ----------
    settings
        Fields of :class:`neuro.plan.StudySettings`: ``size`` (``"quick"``, ``"medium"`` or
        ``"full"``), ``seed``, ``seeds`` (seed values) or ``n_seeds`` (that many from ``seed``), ``nodes``, ``long_nodes``, ``search_seconds`` (a node
        budget is reproducible, a time budget is not: give a large one when comparing runs),
        ``context``, ``horizon``, ``duration``, ``max_windows``, ``generation``,
        ``long_context`` (``None`` or 0 skips it), ``baselines``, ``device``, ``threads``.
    client
        A Dask client: baseline fits and candidate evaluations run on its workers. Without
        one, baselines run in this process and a generation's evaluations on ``threads``
        threads (each candidate in its own sandbox process either way).
    task
        A task to study instead of simulating one (your traces: :func:`neuro.data.from_traces`).
    proposer_factory
        ``priors -> proposer`` instead of the offline proposer.
    """
    from .plan import StudySettings, study_plan
    from .run import run_units

    s = StudySettings(out=Path(out_dir), **settings)
    study = NeuroStudy()
    return study.outcome(run_units(s, client=client, task=task, proposer_factory=proposer_factory), study_plan(s))


def __getattr__(name: str):
    if name == "run_study":  # the old name of run_and_report (neuro.run_study is the study from Python)
        warn_moved(f"{__name__}.run_study", f"{__name__}.run_and_report")
        return run_and_report
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
