"""``scimech ocean synth | train | study | heatwaves | plot FOLDER`` and the quick ``demo``.

``study`` takes the options every study takes (:func:`scimech.study.add_study_options`:
``--out --config --size {quick,medium,full} --data --device --cluster|--scheduler|--workers
--dry-run``) and ``--seeds --regimes --epochs``. ``synth``, ``train`` and ``heatwaves`` take
``--out``, ``--config`` and ``--size`` too (``train`` also ``--data`` and ``--device``,
``heatwaves`` ``--data``). A ``--config`` file (YAML or TOML) is keyed by the command's
option names (``seeds: [0, 1]``, ``epochs: 20``) plus the study settings that are not options
(:data:`ocean.settings.CONFIG_KEYS`: ``synth:`` with :class:`~ocean.synthetic.SynthConfig`
fields, ``lr``, ``window``, ``width``, ...); the command line wins over the file. ``--data
PATH``: your zarr store or netCDF file, in the study's layout or with ORAS5 / NEMO / CMEMS
names (:func:`ocean.data.open_store`).

The commands import the study's modules (torch, xarray, dask, matplotlib) when they run, not
when they are registered: ``scimech --help`` and every other command build this parser too.
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from scimech import options, results
from scimech.options import existing_path, whole
from scimech.study import Plan, add_study_options, print_outcome, write_outcome

from .settings import CONFIG_KEYS, SYNTH_KEYS

#: one line for `scimech --help` and `scimech demo` (the study contract, scimech.study)
TITLE = "OceanCBM: concept bottleneck forecasts of mixed-layer heat content"

__all__ = ["TITLE", "register", "demo", "main"]

_DATA_HELP = ("your data: a zarr store or netCDF file in the study's layout or with ORAS5 / NEMO / CMEMS names "
              "and units (mapped by ocean.data.open_store; see docs/ocean.md); default: the synthetic ocean")
_DATA_FORMATS = ("zarr", "netcdf")



def _settings_options(p: argparse.ArgumentParser, out_default: str, config_keys: dict[str, str], *,
                      out_kind: str = "folder") -> None:
    """``--out``, ``--config`` and ``--size`` of the ocean commands that are not ``study``, from the
    shared declarations (:mod:`scimech.options`; ``scimech.cli.main`` reads the ``--config`` file)."""
    options.add(p, "out", default=out_default, kind=out_kind)
    options.add(p, "config", context=f"Keys: the option names and the study settings ({', '.join(config_keys)})")
    options.add(p, "size", default="quick", context="The size whose defaults apply (docs/ocean.md)")
    p.set_defaults(config_extra={}, _config_keys=dict(config_keys))


def register(subparsers) -> None:
    """Add the ``ocean`` command group to the ``scimech`` parser."""
    p = subparsers.add_parser("ocean", help=TITLE,
                              description="OceanCBM on gridded ocean data: synthetic ocean, training, the "
                              "regimes x seeds study, marine heatwaves and figures.")
    sub = p.add_subparsers(dest="ocean_command", metavar="COMMAND")
    p.set_defaults(func=lambda a: (p.print_help(), 0)[1])

    s = sub.add_parser("synth", help="write a synthetic mixed-layer ocean to zarr",
                       description="Generate the synthetic ocean (exact heat budget) and write a zarr v3 store.")
    _settings_options(s, "runs/ocean/ocean.zarr", SYNTH_KEYS, out_kind="file")
    s.add_argument("--members", type=whole(1), default=None, help="ensemble members (default: the size's)")
    s.add_argument("--years", type=whole(1), default=None, help="years (default: the size's)")
    s.add_argument("--grid", type=whole(2), nargs=2, metavar=("NY", "NX"), default=None,
                   help="grid points in latitude and longitude (default: the size's)")
    s.add_argument("--daily", action="store_true", help="daily output instead of monthly means")
    options.add(s, "seed", context="Default: the config's synth seed, 0")
    s.set_defaults(func=_synth)

    t = sub.add_parser("train", help="train one regime / seed and print its skill",
                       description="Train one OceanCBM model on a zarr store (or the synthetic default).")
    _settings_options(t, "runs/ocean/train", CONFIG_KEYS)
    options.add(t, "data", formats=_DATA_FORMATS, context=_DATA_HELP)
    options.add(t, "device", default="cpu")
    t.add_argument("--regime", default="mixed", help="supervision regime (default: mixed; e.g. prediction_only, "
                   "prescription_only, sequential)")
    options.add(t, "seed", default=0)
    options.add(t, "epochs", context="Default: the size's")
    t.set_defaults(func=_train)

    st = sub.add_parser("study", help="regimes x seeds: skill, concept fidelity, cross-seed consistency",
                        description="Run the OceanCBM study (resumable: finished units are skipped) and write "
                        "a report. --size medium: 3 members x 16 years on a 20 x 28 grid, 5 seeds, width 16 "
                        "(between quick and full; docs/ocean.md).",
                        epilog="A --config file holds these options by name and the study settings that are "
                               f"not options: {', '.join(CONFIG_KEYS)} (synth: SynthConfig fields; docs/ocean.md).")
    add_study_options(st, out_default="runs/ocean/study", data_help=_DATA_HELP, config_keys=CONFIG_KEYS,
                      data_formats=_DATA_FORMATS)
    options.add(st, "seeds", context="Each seed trains every regime; default: the size's")
    st.add_argument("--regimes", nargs="+", default=None, help="default: mixed prediction_only prescription_only")
    options.add(st, "epochs", context="Default: the size's")
    st.set_defaults(func=_study)

    h = sub.add_parser("heatwaves", help="Hobday marine heatwaves in MLHC vs SST",
                       description="Detect marine heatwaves (Hobday et al. 2016, any time step) in MLHC and SST.")
    _settings_options(h, "runs/ocean/heatwaves", {"synth": CONFIG_KEYS["synth"]})
    options.add(h, "data", formats=_DATA_FORMATS, context=_DATA_HELP)
    h.set_defaults(func=_heatwaves)

    pl = sub.add_parser("plot", help="figures and report from a finished study folder",
                        description="Analyse the finished units of a study folder again and rewrite its "
                        "findings, planted truth, figures and report.")
    pl.add_argument("folder", type=existing_path("folder"), nargs="?", default="runs/ocean/study", metavar="FOLDER",
                    help="a `scimech ocean study --out` folder or a `scimech demo` ocean folder "
                         "(default: runs/ocean/study)")
    pl.set_defaults(func=_plot)


# Each command imports the study's modules when it runs: deliberately lazy (torch, xarray, dask and
# matplotlib cost seconds, and `scimech --help` and every other command register these commands too).

def _synth(args) -> int:
    from . import data, synthetic
    from .plan import config_from_args

    cfg = config_from_args(args)
    syn = dict(cfg.synth)
    if args.members:
        syn["n_members"] = args.members
    if args.years:
        syn["years"] = args.years
    if args.grid:
        syn["ny"], syn["nx"] = args.grid
    if args.daily:
        syn["output"] = "daily"
    if args.seed is not None:
        syn["seed"] = args.seed
    ds = synthetic.generate(synthetic.SynthConfig(**syn))
    path = data.write_zarr(ds, args.out, time_chunk=cfg.time_chunk)
    res = float(abs(synthetic.budget_residual(ds)).max())
    print(f"wrote {path} {dict(ds.sizes)}; max |budget residual| = {res:.2e} W m-2")
    return 0


def _train(args) -> int:
    from .evidence import analyse
    from .plan import config_from_args
    from .run import prepare_data
    from .training import train_unit

    cfg = config_from_args(args, data=str(args.data) if args.data else None, epochs=args.epochs,
                           regimes=[args.regime], seeds=[args.seed])
    path = prepare_data(cfg, args.out)
    unit = train_unit(dataclasses.asdict(cfg), args.regime, args.seed, str(path), str(args.out / "checkpoints"),
                      progress_bar=True, device=args.device)
    results.save(unit, args.out / f"{args.regime}_seed{args.seed}.nc", config=dataclasses.asdict(cfg), seed=args.seed)
    s = analyse({(args.regime, args.seed): unit})
    print(f"{args.regime} seed {args.seed}: RMSE {float(s.rmse[0, 0]):.1f} W m-2 (climatology "
          f"{float(s.rmse_climatology[0, 0]):.1f}), ACC {float(s.acc[0, 0]):.3f}")
    return 0


def _study(args) -> int:
    from .study import OceanStudy

    return OceanStudy().execute(args)


def _heatwaves(args) -> int:
    from . import data, heatwaves, synthetic
    from .errors import require_vars
    from .plan import config_from_args

    cfg = config_from_args(args)
    if args.data:
        ds = data.open_store(args.data, validate_schema=False)
        require_vars(ds, ["mlhc", "sst"], where=f"heatwaves on {args.data}")
    else:
        ds = synthetic.generate(synthetic.SynthConfig(**cfg.synth))
    cmp = heatwaves.compare_mlhc_sst(ds[["mlhc", "sst"]].compute())
    path = results.save(cmp, Path(args.out) / "heatwaves.nc")
    print(f"MHW fraction MLHC {float(cmp.mhw_fraction_mlhc.mean()):.3f}, SST {float(cmp.mhw_fraction_sst.mean()):.3f}, "
          f"Jaccard {float(cmp.jaccard.mean()):.3f}; wrote {path}")
    return 0


def _plot(args) -> int:
    from .study import OceanStudy, load_evidence

    study, evidence = OceanStudy(), load_evidence(args.folder)
    write_outcome(args.folder, study.findings(evidence), study.recovery(evidence))
    path = _report(study, evidence, args.folder)
    print_outcome(args.folder)
    print(f"Report: {path}")
    return 0


def _report(study, evidence, out: Path) -> Path:
    return study.report(evidence, Plan("ocean study", [], {}, out=str(out)))


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="scimech")
    register(parser.add_subparsers(dest="command"))
    return parser


def demo(out_dir: Path, quick: bool = True) -> Path:
    """Run the quick study (3 regimes x 3 seeds on the synthetic ocean) and write a report.

    The same :class:`~ocean.study.OceanStudy` as ``scimech ocean study --size quick`` (``full``
    with ``quick=False``). Writes ``out_dir/report.md`` (+ html, figures),
    ``out_dir/recovery.txt`` (first line: ``ocean planted truth: K of N recovered (...)``, then
    the planted truth vs what the study found, :mod:`ocean.recovery`) and
    ``out_dir/findings.txt`` (one line per reference finding with its verdict); the study's
    units and ``summary.nc`` go to ``out_dir/run``. Returns the path of ``report.md``.
    """
    from .study import OceanStudy

    args = _parser().parse_args(["ocean", "study", "--out", str(out_dir), "--size", "quick" if quick else "full"])
    study = OceanStudy(run_subfolder="run", progress_bar=False)
    plan = study.plan(args)
    evidence = study.run(plan)
    write_outcome(plan.out, study.findings(evidence), study.recovery(evidence))
    return study.report(evidence, plan)


def main(argv: list[str] | None = None) -> int:
    """``scimech ocean ...`` (the same parser and ``--config`` handling as ``scimech``)."""
    from scimech.cli import main as scimech_main  # scimech.cli loads this module to register it

    return scimech_main(["ocean", *(argv or [])])
