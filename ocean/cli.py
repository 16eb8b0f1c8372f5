"""``scimech ocean synth | train | study | heatwaves | plot`` and the quick ``demo``.

Every command takes ``--config FILE.yaml`` (fields of :class:`~ocean.experiment.StudyConfig`;
``synth:`` holds :class:`~ocean.synthetic.SynthConfig` fields) and ``--out``. ``train``,
``study`` and ``heatwaves`` take ``--data PATH``: your zarr store or netCDF file, in the
study's layout or with ORAS5 / NEMO / CMEMS names (:func:`ocean.data.open_store`).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

from scimech.options import existing_path, whole
from scimech.study import Plan, add_dry_run

#: one line for `scimech --help` and `scimech demo` (the study contract, scimech.study)
TITLE = "OceanCBM: concept bottleneck forecasts of mixed-layer heat content"

__all__ = ["TITLE", "register", "demo", "main"]

_DATA_HELP = ("your data: a zarr store or netCDF file in the study's layout or with ORAS5 / NEMO / CMEMS names "
              "and units (mapped by ocean.data.open_store; see docs/ocean.md); default: the synthetic ocean")


def _common(p: argparse.ArgumentParser, out_default: str) -> None:
    p.add_argument("--config", type=existing_path(), default=None, help="YAML file of study settings")
    p.add_argument("--out", type=Path, default=Path(out_default), help=f"output path (default: {out_default})")
    p.add_argument("--full", action="store_true", help="full-size defaults (ORAS5-like; slow) instead of quick ones")


def register(subparsers) -> None:
    """Add the ``ocean`` command group to the ``scimech`` parser."""
    from scimech.parallel import add_cluster_arguments

    p = subparsers.add_parser("ocean", help=TITLE,
                              description="OceanCBM on gridded ocean data: synthetic ocean, training, the "
                              "regimes x seeds study, marine heatwaves and figures.")
    sub = p.add_subparsers(dest="ocean_command", metavar="COMMAND")
    p.set_defaults(func=lambda a: (p.print_help(), 0)[1])

    s = sub.add_parser("synth", help="write a synthetic mixed-layer ocean to zarr",
                       description="Generate the synthetic ocean (exact heat budget) and write a zarr v3 store.")
    _common(s, "runs/ocean/ocean.zarr")
    s.add_argument("--members", type=whole(1), default=None)
    s.add_argument("--years", type=whole(1), default=None)
    s.add_argument("--grid", type=whole(2), nargs=2, metavar=("NY", "NX"), default=None)
    s.add_argument("--daily", action="store_true", help="daily output instead of monthly means")
    s.add_argument("--seed", type=whole(0), default=None)
    s.set_defaults(func=_synth)

    t = sub.add_parser("train", help="train one regime / seed and print its skill",
                       description="Train one OceanCBM model on a zarr store (or the synthetic default).")
    _common(t, "runs/ocean/train")
    t.add_argument("--data", type=existing_path(), default=None, help=_DATA_HELP)
    t.add_argument("--regime", default="mixed")
    t.add_argument("--seed", type=whole(0), default=0)
    t.add_argument("--epochs", type=whole(1), default=None)
    t.set_defaults(func=_train)

    st = sub.add_parser("study", help="regimes x seeds: skill, concept fidelity, cross-seed consistency",
                        description="Run the OceanCBM study (resumable: finished units are skipped) and write "
                        "a report.")
    _common(st, "runs/ocean/study")
    st.add_argument("--data", type=existing_path(), default=None, help=_DATA_HELP)
    st.add_argument("--seeds", type=whole(0), nargs="+", default=None)
    st.add_argument("--regimes", nargs="+", default=None)
    st.add_argument("--epochs", type=whole(1), default=None)
    st.add_argument("--quick", action="store_true", help="quick defaults (the default unless --full)")
    add_cluster_arguments(st)
    add_dry_run(st)
    st.set_defaults(func=_study)

    h = sub.add_parser("heatwaves", help="Hobday marine heatwaves in MLHC vs SST",
                       description="Detect marine heatwaves (Hobday et al. 2016, any time step) in MLHC and SST.")
    _common(h, "runs/ocean/heatwaves")
    h.add_argument("--data", type=existing_path(), default=None, help=_DATA_HELP)
    h.set_defaults(func=_heatwaves)

    pl = sub.add_parser("plot", help="figures and report from a finished study folder")
    pl.add_argument("--out", type=Path, default=Path("runs/ocean/study"), help="study folder")
    pl.set_defaults(func=_plot)


def _cfg(args, **over):
    from .experiment import load_config

    return load_config(getattr(args, "config", None), quick=not getattr(args, "full", False), **over)


def _synth(args) -> int:
    from . import data, synthetic

    cfg = _cfg(args)
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
    from .experiment import analyse, prepare_data, train_unit

    cfg = _cfg(args, data=str(args.data) if args.data else None, epochs=args.epochs)
    path = prepare_data(cfg, args.out)
    unit = train_unit(dataclasses.asdict(cfg), args.regime, args.seed, str(path), str(args.out / "checkpoints"),
                      progress_bar=True)
    from scimech import results

    results.save(unit, args.out / f"{args.regime}_seed{args.seed}.nc", config=dataclasses.asdict(cfg), seed=args.seed)
    s = analyse({(args.regime, args.seed): unit})
    print(f"{args.regime} seed {args.seed}: RMSE {float(s.rmse[0, 0]):.1f} W m-2 (climatology "
          f"{float(s.rmse_climatology[0, 0]):.1f}), ACC {float(s.acc[0, 0]):.3f}")
    return 0


def _study(args) -> int:
    from scimech.parallel import client_from_args

    from .experiment import run_study
    from .report import write_report

    over = dict(data=str(args.data) if args.data else None, seeds=args.seeds, regimes=args.regimes,
                epochs=args.epochs)
    cfg = _cfg(args, **over)
    if args.dry_run:
        print(_plan(cfg, args.out).text())
        return 0
    client = client_from_args(args)
    t0 = time.perf_counter()
    summary, units = run_study(cfg, args.out, client=client, progress_bar=True)
    md = write_report(args.out, summary, units, cfg, seconds=time.perf_counter() - t0)
    print(summary[["cka_mean", "procrustes_mean", "free_abs_r_mean", "head_weight_cv_mean"]].to_dataframe())
    _print_outcome(args.out)
    print(f"Report: {md}")
    return 0


#: bench/RESULTS.md (ocean, `python -m bench.bench_scale`): one unit at 8 x 10 cells, 4 years, 2 members,
#: 12 epochs took 3.88 s on one worker
_BENCH_UNIT = (3.88, 8 * 10 * 4 * 2 * 12)


def _plan(cfg, out) -> Plan:
    """What ``scimech ocean study`` would run: regimes x seeds units, the data and their sizes."""
    from .synthetic import SynthConfig

    syn = {**dataclasses.asdict(SynthConfig()), **cfg.synth}
    units = [f"{r}/seed={s}" for r in cfg.regimes for s in cfg.seeds]
    sizes = {"regimes": ", ".join(cfg.regimes), "seeds": ", ".join(map(str, cfg.seeds)), "epochs": cfg.epochs}
    if cfg.data:
        sizes["data"] = cfg.data
        per = None
    else:
        sizes["data"] = (f"synthetic ocean, {syn['n_members']} members x {syn['years']} years, "
                         f"{syn['ny']} x {syn['nx']} grid")
        work = syn["ny"] * syn["nx"] * syn["years"] * syn["n_members"] * cfg.epochs
        per = _BENCH_UNIT[0] * work / _BENCH_UNIT[1]
    return Plan("ocean study", units, sizes, per, "scaled by grid cells x years x members x epochs from "
                "bench/RESULTS.md's 3.88 s unit", str(out))


def _print_outcome(folder: Path) -> None:
    """The planted-truth line and the findings :func:`ocean.report.write_outcome` wrote."""
    for name in ("recovery.txt", "findings.txt"):
        path = Path(folder) / name
        if path.is_file():
            lines = path.read_text().splitlines()
            print("\n".join(lines[:1] if name == "recovery.txt" else lines))


def _heatwaves(args) -> int:
    from scimech import results

    from . import data, heatwaves, synthetic
    from .errors import require_vars

    if args.data:
        ds = data.open_store(args.data, validate_schema=False)
        require_vars(ds, ["mlhc", "sst"], where=f"heatwaves on {args.data}")
    else:
        ds = synthetic.generate(synthetic.SynthConfig(**_cfg(args).synth))
    cmp = heatwaves.compare_mlhc_sst(ds[["mlhc", "sst"]].compute())
    path = results.save(cmp, Path(args.out) / "heatwaves.nc")
    print(f"MHW fraction MLHC {float(cmp.mhw_fraction_mlhc.mean()):.3f}, SST {float(cmp.mhw_fraction_sst.mean()):.3f}, "
          f"Jaccard {float(cmp.jaccard.mean()):.3f}; wrote {path}")
    return 0


def _plot(args) -> int:
    from scimech import results

    from .experiment import StudyConfig, analyse
    from .report import write_report

    store = results.UnitStore(Path(args.out) / "units")
    units = {}
    for k in store.keys():
        u = store.load(k)
        units[(u.attrs["regime"], int(u.attrs["seed"]))] = u
    if not units:
        print(f"No finished units in {args.out}; run `scimech ocean study --out {args.out}` first.", file=sys.stderr)
        return 2
    first = next(iter(units.values()))
    import json

    cfg = StudyConfig(**json.loads(first.attrs["study_config"])) if "study_config" in first.attrs else StudyConfig()
    data = Path(args.out) / "ocean.zarr"
    md = write_report(args.out, analyse(units), units, cfg, data=data if data.exists() else None)
    _print_outcome(args.out)
    print(f"Report: {md}")
    return 0


def demo(out_dir: Path, quick: bool = True) -> Path:
    """Run the quick study (3 regimes x 3 seeds on the synthetic ocean) and write a report.

    Writes ``out_dir/report.md`` (+ html, figures), ``out_dir/recovery.txt`` (first line:
    ``ocean planted truth: K of N recovered (...)``, then the planted truth vs what the
    study found, :mod:`ocean.recovery`) and ``out_dir/findings.txt`` (one line per reference
    finding with its verdict); the study's units and ``summary.nc`` go to ``out_dir/run``.
    Returns the path of ``report.md``.
    """
    from .experiment import StudyConfig, run_study
    from .report import write_report

    out_dir = Path(out_dir)
    cfg = StudyConfig.quick() if quick else StudyConfig.full()
    t0 = time.perf_counter()
    summary, units = run_study(cfg, out_dir / "run")
    return write_report(out_dir, summary, units, cfg, seconds=time.perf_counter() - t0, data=out_dir / "run" / "ocean.zarr")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scimech-ocean")
    sub = parser.add_subparsers(dest="command")
    register(sub)
    args = parser.parse_args(["ocean", *(argv or [])])
    return int(args.func(args) or 0)
