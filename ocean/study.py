"""The OceanCBM study: one :class:`scimech.studies.contract.Study` class, ``scimech ocean ...``.

``scimech ocean generate | study | redraw FOLDER | shift | train | heatwaves``. The pipeline,
one module a step (imported when a command runs, not when ``scimech --help`` is built):

- :mod:`ocean.plan`: settings and sizes -> :class:`scimech.studies.contract.Plan` (``--dry-run`` prints it);
- :mod:`ocean.run`: the data (synthetic or yours, fingerprinted) and the ``(regime, seed)``
  units (:mod:`ocean.training`) through :func:`scimech.run.parallel.map_units`, resumable;
- :mod:`ocean.evidence`: the finished units analysed into one summary (:class:`ocean.evidence.Evidence`);
- :mod:`ocean.findings`: the reference findings and the planted-truth text (:mod:`ocean.recovery`);
- :mod:`ocean.report`: ``report.md`` / ``.html`` and figures.

``study`` takes the options every study takes (:func:`scimech.run.options.add_study_options`) and
``--seeds --regimes --epochs``. A ``--config`` file (YAML or TOML) is keyed by the command's
option names (``seeds: [0, 1]``, ``epochs: 20``) plus the study settings that are not options
(:data:`ocean.settings.CONFIG_KEYS`: ``synth:`` with :class:`~ocean.synthetic.SynthConfig`
fields, ``lr``, ``window``, ``width``, ...); the command line wins over the file. ``--data
PATH [PATH ...]``: your zarr store or netCDF file, or a product's many files (several paths, a glob, a
folder, a NEMO run), in the study's layout or with CMIP6 / ORAS5 / NEMO / CMEMS names
(:func:`ocean.data.open_store`).
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from scimech.run import options
from scimech.run.many_paths import OneOrMore
from scimech.run.options import whole
from scimech.studies.contract import Command, Plan, Study

from .settings import CONFIG_KEYS, SYNTH_KEYS

__all__ = ["OceanStudy"]

_DATA_HELP = (
    "your data: a zarr store or netCDF file, or a product's many files (several paths, a quoted glob such as "
    "'cmip6/*_Omon_*.nc', a folder of netCDF files, a NEMO run's folder with its mesh_mask.nc), in the study's "
    "layout or with CMIP6 / ORAS5 / NEMO / CMEMS names and units (combined and mapped by ocean.data.open_store; "
    "see docs/ocean.md); default: the synthetic ocean"
)
#: a folder holding a product's netCDF files (a download folder, a NEMO run): read as one product (ocean.files)
_NETCDF_FOLDER = options.Format(
    "a folder of netCDF files (a product's downloads, a NEMO run)",
    lambda p: p.is_dir() and any(q.suffix.lower() in (".nc", ".nc4") for q in p.rglob("*")),
)
_DATA_FORMATS = ("zarr", "netcdf", _NETCDF_FOLDER)


def _product_path() -> options.Option:
    """One PATH of a product: a netCDF file, a zarr store, a folder of netCDF files (checked on their first
    bytes, as every input is), or a glob that matches some (``'cmip6/thetao_*.nc'``, quoted for the shell)."""
    base = options.input_path(*_DATA_FORMATS)
    words = base.constraint + ", or a glob matching some"

    def convert(text: str):
        if any(c in text for c in "*?["):
            from scimech.errors import DataValidationError

            from .data.files import product_files

            try:
                product_files(text)
            except DataValidationError as err:
                raise argparse.ArgumentTypeError(str(err)) from None
            return Path(text)
        if text.strip() and not Path(text).expanduser().exists():
            raise argparse.ArgumentTypeError(f"{text!r} does not exist; expected {words}.")
        return base.convert(text)

    option = options.Option(convert, words, base.bad_examples)
    option.formats = base.formats
    return option


def _data_takes_many(parser: argparse.ArgumentParser) -> None:
    """``--data`` of ``parser`` takes a product as it is distributed: several paths, a glob or a folder."""
    action = next(a for a in parser._actions if a.dest == "data")
    action.type, action.nargs, action.metavar = _product_path(), "+", "PATH"
    action.__class__ = OneOrMore


def _data_value(data) -> str | list[str] | None:
    """``--data`` as the study's settings hold it: one path as a string, several as a list of strings."""
    if data is None or data == []:
        return None
    return [str(d) for d in data] if isinstance(data, (list, tuple)) else str(data)


def _select(text: str) -> tuple[str, int]:
    """``DIM=INDEX`` of ``--select`` (argparse type)."""
    dim, eq, index = text.partition("=")
    if not eq or not dim.strip() or not index.strip().lstrip("-").isdigit():
        raise argparse.ArgumentTypeError(f"--select takes DIM=INDEX (e.g. --select experiment=0); got {text!r}")
    return dim.strip(), int(index)


def _product_options(p: argparse.ArgumentParser, *, with_data: bool = True) -> None:
    """How your product's extra dims and mesh mask are read: on ``study`` / ``train`` / ``heatwaves`` with
    ``--data`` (refused without it), on ``inspect`` for its PATH (``with_data=False``)."""
    when = "with --data: " if with_data else ""
    p.add_argument(
        "--member",
        type=whole(0),
        default=None,
        metavar="INDEX",
        help=f"{when}read only this member of the product's ensemble dim (realization, member_id, "
        "number; default: every member, each a member of the study)",
    )
    p.add_argument(
        "--select",
        type=_select,
        action="append",
        default=None,
        metavar="DIM=INDEX",
        help=f"{when}read index INDEX of the product's extra dim DIM (repeat for several dims)",
    )
    p.add_argument(
        "--mesh-mask",
        default=None,
        metavar="FILE",
        type=options.input_path("netcdf"),
        help=f"{when}NEMO's mesh_mask.nc for the product's grid (e1t, e2t, e3t_0, tmask)",
    )
    if with_data:
        for flag, example in (
            ("--member", ("--member", "0")),
            ("--select", ("--select", "experiment=0")),
            ("--mesh-mask", ("--mesh-mask", "{netcdf}")),
        ):
            options.needs(p, flag, lambda a: a.data is not None, "--data PATH (your product)", example)


def _product_reading(args: argparse.Namespace) -> dict:
    """The open_store keywords of --member, --select and --mesh-mask (only those given); refused without
    --data (a command's PATH for inspect), which they read."""
    out: dict = {}
    if getattr(args, "select", None):
        out["select"] = dict(args.select)
    if getattr(args, "member", None) is not None:
        out["member"] = int(args.member)
    if getattr(args, "mesh_mask", None):
        out["mesh_mask"] = str(args.mesh_mask)
    if out and not (getattr(args, "data", None) or getattr(args, "path", None)):
        from scimech.errors import ConfigError

        raise ConfigError(f"--{next(iter(out)).replace('_', '-')} reads your product: it acts only with --data.")
    return out


def _settings_options(
    p: argparse.ArgumentParser,
    out_default: str,
    config_keys: dict[str, str],
    *,
    out_kind: str = "folder",
    suffixes: tuple[str, ...] | None = None,
) -> None:
    """``--out``, ``--config`` and ``--size`` of the ocean commands that are not ``study``, from the
    shared declarations (``scimech.cli.commands.main`` reads the ``--config`` file)."""
    options.add(p, "out", default=out_default, kind=out_kind, suffixes=suffixes)
    options.add(p, "config", context=f"Keys: the option names and the study settings ({', '.join(config_keys)})")
    options.add(p, "size", default="quick", context="The size whose defaults apply (docs/ocean.md)")
    p.set_defaults(config_extra={}, _config_keys=dict(config_keys))


class OceanStudy(Study):
    """Regimes x seeds of OceanCBM: skill, concept fidelity, cross-seed consistency, planted truth.

    ``run_subfolder``: where under ``--out`` the data, units and checkpoints go (``None``:
    ``--out`` itself; the demo uses ``"run"``, its report beside it); ``progress_bar``: show
    training progress.

    Examples
    --------
    The study behind ``scimech ocean``; from Python, :func:`ocean.run_study` runs it.

    >>> from ocean.study import OceanStudy
    >>> study = OceanStudy()
    >>> study.name, [command.name for command in study.commands()]
    ('ocean', ['train', 'heatwaves'])
    >>> plan = study.plan(study.study_parser().parse_args(["--seeds", "0"]))  # what would run
    >>> list(plan.units)
    ['mixed/seed=0', 'prediction_only/seed=0', 'prescription_only/seed=0']
    """

    name = "ocean"
    title = "OceanCBM: concept bottleneck forecasts of mixed-layer heat content"
    description = (
        "OceanCBM on gridded ocean data: the regimes x seeds study (resumable: finished units are "
        "skipped) with its report; the synthetic ocean, one training run, marine heatwaves. "
        "--size medium: 3 members x 16 years on a 20 x 28 grid, 5 seeds, width 16 (docs/ocean.md)."
    )
    out_default = "runs/ocean/study"
    data_help = _DATA_HELP
    data_formats = _DATA_FORMATS
    config_keys = CONFIG_KEYS
    shared_options = {"seeds": "Each seed trains every regime; default: the size's", "epochs": "Default: the size's"}
    generate_help = "write a synthetic mixed-layer ocean (exact heat budget) to a zarr v3 store"
    shift_help = "a dictionary of OceanCBM's encoder under a stronger hidden eddy flux (shift.nc, shift.png)"
    renamed = {"synth": "generate", "plot": "redraw"}

    def __init__(self, run_subfolder: str | None = None, progress_bar: bool = True):
        self.run_subfolder = run_subfolder
        self.progress_bar = progress_bar

    # --- the study ----------------------------------------------------------------------------
    def add_study_arguments(self, parser: argparse.ArgumentParser) -> None:
        super().add_study_arguments(parser)
        _data_takes_many(parser)

    def add_options(self, st: argparse.ArgumentParser) -> None:
        st.add_argument("--regimes", nargs="+", default=None, help="default: mixed prediction_only prescription_only")
        _product_options(st)

    def plan(self, args: argparse.Namespace) -> Plan:
        from .plan import config_from_args, study_plan  # lazy: the pipeline (see the module's doc)

        cfg = config_from_args(
            args, data=_data_value(args.data), seeds=args.seeds, regimes=args.regimes, epochs=args.epochs
        )
        chosen = _product_reading(args)
        if chosen:
            cfg = dataclasses.replace(cfg, product={**cfg.product, **chosen})
        out = Path(args.out)
        run_dir = out / self.run_subfolder if self.run_subfolder else out
        return study_plan(cfg, out, size=args.size, run_dir=run_dir, device=args.device, progress_bar=self.progress_bar)

    def run(self, plan: Plan, client=None):
        import time

        from .evidence import Evidence, store_of
        from .run import run_units

        s = plan.settings
        t0 = time.perf_counter()
        summary, units = run_units(s.config, s.run_dir, client=client, progress_bar=s.progress_bar, device=s.device)
        return Evidence(summary, units, s.config, time.perf_counter() - t0, store_of(s.run_dir, s.config))

    def findings(self, evidence):
        from .findings import findings

        return findings(evidence.summary)

    def planted_truth(self, evidence) -> str | None:
        from .findings import no_planted_truth, recovery_text

        if getattr(evidence.config, "data", None):  # your product: nothing was planted in it
            return no_planted_truth(evidence.config.data)
        return recovery_text(evidence.summary)

    def report(self, evidence, plan: Plan) -> Path:
        from .report import write_report

        return write_report(
            plan.out, evidence.summary, evidence.units, evidence.config, seconds=evidence.seconds, data=evidence.data
        )

    def load(self, folder: Path):
        """The finished units of ``folder`` analysed anew (a study folder, or a demo's ``run/``)."""
        from .evidence import load_evidence

        return load_evidence(folder), Plan("ocean study", [], {}, out=str(folder))

    def demo(self, out_dir, quick: bool = True) -> Path:
        """The study on the quick size: the units and ``summary.nc`` under ``out_dir/run``, the report,
        ``recovery.txt`` and ``findings.txt`` in ``out_dir``."""
        return Study.demo(OceanStudy(run_subfolder="run", progress_bar=False), out_dir, quick)

    # --- inspect ------------------------------------------------------------------------------
    def add_inspect_options(self, parser: argparse.ArgumentParser) -> None:
        path = next(a for a in parser._actions if a.dest == "path")
        path.type, path.help = (
            _product_path(),
            "the product: a file or store, a folder or a glob, as given to `study --data`",
        )
        parser.add_argument(
            "more", nargs="*", type=_product_path(), metavar="PATH", help="more files of the same product"
        )
        _product_options(parser, with_data=False)
        options.add(
            parser, "size", default="quick", context="The size whose window and split the record is checked against"
        )

    def inspect(self, path: Path, args: argparse.Namespace):
        """What ``scimech ocean study --data PATH`` would read from your product (no torch, no training), then
        what prevents a study on it, in words (the table is always shown)."""
        from .data.products import inspect

        more = list(getattr(args, "more", None) or [])
        source = _data_value([path, *more]) if more else path
        return inspect(source, size=getattr(args, "size", None) or "quick", **_product_reading(args))

    # --- generate, shift and the ocean's own commands -----------------------------------------
    def add_generate_options(self, s: argparse.ArgumentParser) -> None:
        _settings_options(s, "runs/ocean/ocean.zarr", SYNTH_KEYS, out_kind="file", suffixes=(".zarr",))
        s.add_argument("--members", type=whole(1), default=None, help="ensemble members (default: the size's)")
        s.add_argument("--years", type=whole(1), default=None, help="years (default: the size's)")
        s.add_argument(
            "--grid",
            type=whole(2),
            nargs=2,
            metavar=("NY", "NX"),
            default=None,
            help="grid points in latitude and longitude (default: the size's)",
        )
        s.add_argument("--daily", action="store_true", help="daily output instead of monthly means")
        options.add(s, "seed", context="Default: the config's synth seed, 0")

    def generate(self, args: argparse.Namespace) -> int:
        from . import data, synthetic
        from .plan import config_from_args

        cfg = config_from_args(args)
        syn = dict(cfg.synth)
        for key, value in (("n_members", args.members), ("years", args.years), ("seed", args.seed)):
            if value is not None:
                syn[key] = value
        if args.grid:
            syn["ny"], syn["nx"] = args.grid
        if args.daily:
            syn["output"] = "daily"
        ds = synthetic.generate(synthetic.SynthConfig(**syn))
        path = data.write_zarr(ds, args.out, time_chunk=cfg.time_chunk)
        res = float(abs(synthetic.budget_residual(ds)).max())
        print(f"wrote {path} {dict(ds.sizes)}; max |budget residual| = {res:.2e} W m-2")
        return 0

    def add_shift_options(self, p: argparse.ArgumentParser) -> None:
        options.add(p, "out", default="runs/ocean/shift")
        p.add_argument(
            "--shift", type=options.number(0.0), default=3.0, help="factor on the hidden eddy flux (default 3)"
        )
        options.add(p, "seed", default=0)
        p.add_argument(
            "--k", type=whole(1), default=8, help="active features per row of the TopK dictionary (default 8)"
        )
        options.add(p, "device", default="cpu")

    def run_shift(self, args: argparse.Namespace):
        from .shift import run_shift

        return run_shift(args.out, shift=args.shift, seed=args.seed, k=args.k, device=args.device)

    def commands(self) -> list[Command]:
        return [
            Command(
                "train",
                "train one regime / seed and print its skill",
                _train_options,
                _train,
                "Train one OceanCBM model on a zarr store (or the synthetic default).",
            ),
            Command(
                "heatwaves",
                "Hobday marine heatwaves in MLHC vs SST",
                _heatwaves_options,
                _heatwaves,
                "Detect marine heatwaves (Hobday et al. 2016, any time step) in MLHC and SST.",
            ),
        ]


def _train_options(t: argparse.ArgumentParser) -> None:
    _settings_options(t, "runs/ocean/train", CONFIG_KEYS)
    options.add(t, "data", formats=_DATA_FORMATS, context=_DATA_HELP)
    _data_takes_many(t)
    options.add(t, "device", default="cpu")
    t.add_argument(
        "--regime",
        default="mixed",
        help="supervision regime (default: mixed; e.g. prediction_only, prescription_only, sequential)",
    )
    options.add(t, "seed", default=0)
    options.add(t, "epochs", context="Default: the size's")
    _product_options(t)


def _train(args) -> int:
    from scimech.run import results

    from .evidence import analyse
    from .plan import config_from_args
    from .run import prepare_data
    from .training import train_unit

    cfg = config_from_args(
        args, data=_data_value(args.data), epochs=args.epochs, regimes=[args.regime], seeds=[args.seed]
    )
    chosen = _product_reading(args)
    if chosen:
        cfg = dataclasses.replace(cfg, product={**cfg.product, **chosen})
    path = prepare_data(cfg, args.out)
    unit = train_unit(
        dataclasses.asdict(cfg),
        args.regime,
        args.seed,
        str(path),
        str(args.out / "checkpoints"),
        progress_bar=True,
        device=args.device,
    )
    results.save(unit, args.out / f"{args.regime}_seed{args.seed}.nc", config=dataclasses.asdict(cfg), seed=args.seed)
    s = analyse({(args.regime, args.seed): unit})
    print(
        f"{args.regime} seed {args.seed}: RMSE {float(s.rmse[0, 0]):.1f} W m-2 (climatology "
        f"{float(s.rmse_climatology[0, 0]):.1f}), ACC {float(s.acc[0, 0]):.3f}"
    )
    return 0


def _heatwaves_options(h: argparse.ArgumentParser) -> None:
    _settings_options(h, "runs/ocean/heatwaves", {"synth": CONFIG_KEYS["synth"]})
    options.add(h, "data", formats=_DATA_FORMATS, context=_DATA_HELP)
    _data_takes_many(h)
    _product_options(h)


def _heatwaves(args) -> int:
    from scimech.run import results

    from . import data, heatwaves, synthetic
    from .errors import require_vars
    from .plan import config_from_args

    cfg = config_from_args(args)
    chosen = _product_reading(args)
    if args.data:
        ds = data.open_store(_data_value(args.data), validate_schema=False, **chosen)
        require_vars(ds, ["sst"], where=f"heatwaves on {_data_value(args.data)}")
    else:
        ds = synthetic.generate(synthetic.SynthConfig(**cfg.synth))
    fields = [f for f in ("mlhc", "sst") if f in ds]
    found = heatwaves.by_field(ds[fields].compute())
    path = results.save(found, Path(args.out) / "heatwaves.nc")
    for f in fields:
        print(
            f"{f.upper()}: heatwave fraction {float(found[f'mhw_fraction_{f}'].mean()):.3f}, "
            f"{found.sizes[f'event_{f}']} event(s) in the area mean"
        )
    if "jaccard" in found:
        print(f"MLHC and SST heatwaves shared (Jaccard) {float(found.jaccard.mean()):.3f}")
    else:
        print("MLHC: not in the product (no mixed-layer depth): heatwaves in SST alone, as Hobday et al. (2016)")
    print(f"wrote {path}")
    return 0
