"""``scimech astro synth | train | study | plot`` and the quick demo.

Examples::

    scimech astro synth --n 4000 --seed 0 --out runs/astro/train.fits
    scimech astro synth --n 1000 --seed 1 --out runs/astro/test.fits
    scimech astro train --data runs/astro/train.fits --out runs/astro/model --epochs 20
    scimech astro study --model runs/astro/model --train runs/astro/train.fits \\
                        --test runs/astro/test.fits --out runs/astro/study
    scimech astro plot --study runs/astro/study
    scimech astro study --quick --out runs/astro      # everything, small, in one go
    scimech astro study --full --workers 2 --out runs/astro-full   # larger, units on 2 Dask workers
    scimech astro study --quick --cluster cluster.toml --out /scratch/$USER/astro   # SLURM / PBS
    scimech astro study --catalog dr10.fits --images cutouts.npy --out runs/astro/dr10   # your galaxies

The study runs as resumable units (astro.execution): the samples, the training, and the
head interventions over chunks of the test set (``--chunk-size``). Rerunning the same
command with the same ``--out`` redoes only the units that did not finish.

``--catalog`` (with ``--images``) studies your Legacy Survey DR10 galaxies instead of
synthetic ones (astro.catalog.read_legacy_survey): without ``--model`` a stand-in is trained
on a random 75% of them (``--test-fraction``) and studied on the rest.

``--model`` may also be a real AION-1 folder (config.json, model.safetensors,
codecs/<NAME>/...); its image codec (``codecs/image/``) then tokenises the images (96x96
Legacy Survey cut-outs in nanomaggies; smaller stamps are zero-padded), and without it the
study runs on photometry tokens only. ``--image-tokenizer`` overrides it with a stand-in
``image_tokenizer.npz``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from scimech.options import existing_path, fraction, whole
from scimech.study import Plan, add_dry_run

from .execution import DEFAULT_WORLD, FULL, QUICK, load_study, save_study, train_standin
from .execution import load_sample as _load_sample
from .execution import save_sample as _save_sample

#: one line for `scimech --help` and `scimech demo` (the study contract, scimech.study)
TITLE = "AION-1 photometric-redshift head analysis (photometry vs images)"

__all__ = ["TITLE", "register", "demo", "QUICK", "FULL", "train_standin", "save_study", "load_study", "write_report",
           "write_summaries", "run_quick"]


def _log(msg: str) -> None:
    import os

    if os.environ.get("SCIMECH_QUIET") != "1":
        print(f"[astro] {msg}", flush=True)


def cmd_synth(args) -> int:
    from scimech.errors import ScimechError

    from .synthetic import make_galaxies

    t0 = time.perf_counter()
    try:
        make_galaxies(1, seed=0, images=False, world=args.world)     # an unknown world: a clear error, no work
    except ScimechError as err:
        print(f"scimech astro synth: {err}", file=sys.stderr)
        return 2
    s = make_galaxies(args.n, seed=args.seed, images=not args.no_images, world=args.world)
    p = _save_sample(s, args.out)
    print(f"wrote {len(s)} galaxies to {p} in {time.perf_counter() - t0:.1f} s")
    return 0


def cmd_train(args) -> int:
    from .execution import IMAGE_FEATURES
    from .models import standin as M

    train = _load_sample(args.data)
    feats = args.image_features or IMAGE_FEATURES.get(str(train.meta.get("world", "standard")), "bands")
    ad, hist = train_standin(train, epochs=args.epochs, batch_size=args.batch_size, seed=args.seed, log=_log,
                             planted=args.planted, image_features=feats)
    M.save(ad, args.out)
    (Path(args.out) / "history.json").write_text(json.dumps(hist))
    print(f"trained in {hist['seconds']:.0f} s ({hist['steps']} steps); saved to {args.out}")
    return 0


def write_report(res: dict, out: Path, *, title: str = "AION-1 redshift head analysis (stand-in)",
                 timings: dict | None = None, galaxies: str | None = None) -> Path:
    """Figures, tables, the plain list of which findings reproduce, and (for a planted stand-in)
    the planted truth against what the study found.

    ``galaxies`` says what the study ran on (default: the synthetic galaxies of the stand-in)."""
    from scimech.report import Report

    from . import analysis, plots

    iv = res["interventions"]
    planted = bool(int(iv.attrs.get("planted", 0)))
    rep = Report(out, title=title.replace("(stand-in)", "(planted stand-in)") if planted else title)
    rep.text((galaxies or "Stand-in: a small `aion.AION` subclass (coarse 6x6 image-token grid) trained on "
              "synthetic galaxies (kcorrect SEDs, Calzetti dust, DECam photometry, bulge+disk Sersic images).")
             + " 'photometry' hides the image tokens with AION's input mask; 'multimodal' shows them."
             + (" This is the *planted* stand-in: image tokens reach the redshift only through one head of "
                "block 0, and another head of block 0 encodes colours but is cut from the output "
                "(astro.models.planted); the study is run blind to that and compared with it below." if planted
                else ""))
    rows = analysis.planted_recovery(res)
    import pandas as pd

    if rows:
        rep.text("## Planted truth vs what the study found\n\n" + analysis.recovery_line(rows))
        rep.table(pd.DataFrame([{k: r[k] for k in ("truth", "found", "recovered")} for r in rows],
                               index=[r["head"] for r in rows]),
                  caption="Planted truth vs what the study found (findings 3 and 4, every intervention)")
    fnd = analysis.findings(res)
    lines = ["## Findings of the reference study, tested here", ""]
    for f in fnd:
        why = f" ({f['reason']})" if f["verdict"] == "NOT ASSESSED" else ""
        lines.append(f"- **{f['verdict']}**{why}: {f['finding']}. Evidence: {f['evidence']}.")
    rep.text("\n".join(lines))
    adv = res["advantage"]
    tab = adv["value"].sel(metric=["sigma_nmad", "outlier_fraction", "bias", "mean_abs_dz"]).to_dataframe().unstack("metric")
    rep.table(tab["value"].round(4), caption="Photo-z metrics per mode and population (bootstrap CIs in advantage.nc)")
    rep.table(pd.DataFrame({"advantage": adv["advantage"].values, "ci_low": adv["advantage_low"].values,
                            "ci_high": adv["advantage_high"].values, "n": adv["n"].values},
                           index=adv.population.values).round(4),
              caption="Multimodal advantage: mean|dz| photometry-only minus multimodal (paired bootstrap 95% CI)")
    if "advantage_difference" in adv:
        rep.table(pd.DataFrame({"difference": adv["advantage_difference"].values,
                                "ci_low": adv["advantage_difference_low"].values,
                                "ci_high": adv["advantage_difference_high"].values},
                               index=adv.contrast.values).round(4),
                  caption="Is the advantage larger on extended / dusty galaxies? (two-sample bootstrap 95% CI)")
    if "advantage_lost_low" in iv:
        eff = iv[["advantage_lost", "advantage_lost_low", "advantage_lost_high", "delta_abs_dz", "delta_abs_dz_low",
                  "delta_abs_dz_high"]].sel(population="all").to_dataframe()
        rep.table(eff.drop(columns=[c for c in eff.columns if c not in iv.data_vars]).round(4),
                  caption="Per head and intervention, all galaxies: advantage lost (advantage minus the advantage "
                          "with the head intervened in both modes) and change of the multimodal mean|dz|, "
                          "95% bootstrap intervals")
    rep.figure(plots.z_scatter(res["predictions"]), "z_scatter", "z true vs predicted per mode")
    rep.figure(plots.metrics_by_population(adv), "metrics_by_population", "sigma_NMAD by population")
    rep.figure(plots.layer_curves(res["layers"]), "layer_curves", "Layerwise probe R2 (z, A_V), both modes")
    rep.figure(plots.head_heatmap(res["head_probes"], iv), "head_heatmap",
               f"Heads of block {res['head_probes'].attrs.get('block')}: probe R2 and intervention effect (share of the dusty advantage lost)")
    rep.figure(plots.radial_maps(res["radial"]), "radial_maps", "Each head's image-token output on the token grid")
    h2 = int(fnd[3]["head"])
    rep.figure(plots.dz_vs_av(res["predictions"], iv, h2), "dz_vs_av", f"dz vs A_V (head {h2} resample-ablated)")
    rep.table(res["bias"].to_dataframe().round(4), caption="Attenuation-bias signatures (dilution in colour cells; "
              "slope of dz on A_V)")
    rep.table(iv["advantage_left"].sel(population=["all", "extended", "dusty"]).to_dataframe()
              ["advantage_left"].unstack("population").round(3),
              caption="Fraction of the multimodal advantage left after each intervention (multimodal run "
                      "intervened vs the untouched photometry-only run)")
    if timings:
        rep.table(pd.DataFrame({"seconds": timings}).round(1), caption="Timings")
    return rep.write()


def write_summaries(res: dict, out: Path) -> tuple[Path, Path]:
    """``recovery.txt`` (one summary line of the planted truth's recovery, then the table) and
    ``findings.txt`` (one line per reference finding with its verdict) in ``out``, atomically."""
    from scimech.results import atomic_write_text

    from . import analysis

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    rows = analysis.planted_recovery(res)
    lines = [analysis.recovery_line(rows)]
    if rows:
        lines += ["", "planted truth | what the study found | recovered"]
        lines += [f"{r['truth']} | {r['found']} | "
                  + ("not assessed" if not r.get("assessed", True) else "yes" if r["recovered"] else "NO")
                  for r in rows]
    rec = out / "recovery.txt"
    atomic_write_text(rec, "\n".join(lines) + "\n")
    fnd = analysis.findings(res)
    on = " (planted stand-in)" if rows else ""
    fin = out / "findings.txt"
    atomic_write_text(fin, "".join(f"{i}. {f['verdict']}{on}: {f['finding']}"
                                   + (f" ({f['reason']})" if f["verdict"] == "NOT ASSESSED" else "") + "\n"
                                   for i, f in enumerate(fnd, 1)))
    return rec, fin


def run_quick(out: Path, *, sizes: dict | None = None, seed: int = 0, client=None, world: str | None = None,
              planted: bool = False) -> tuple[dict, dict]:
    """Synthesize, train and study at the given sizes (default :data:`QUICK`) in ``world`` (default
    :data:`astro.execution.DEFAULT_WORLD`), the planted stand-in with ``planted``; save everything under ``out``.

    Runs as resumable units (:func:`astro.execution.run_study`): a rerun into ``out`` redoes
    only what did not finish.
    """
    from .execution import run_study

    return run_study(Path(out), sizes=sizes or QUICK, seed=seed, client=client, log=_log, world=world,
                     planted=planted)


def _sizes(args) -> dict:
    sz = dict(FULL if args.full else QUICK)
    for k in ("n_train", "n_test", "epochs", "batch_size", "n_bootstrap", "chunk_size"):
        if getattr(args, k, None) is not None:
            sz[k] = getattr(args, k)
    return sz


#: bench/RESULTS.md (astro, `python -m bench.bench_astro`): the four head interventions of one block cost
#: 14 ms per test galaxy on one worker (a 60-galaxy unit 0.84 s)
_BENCH_MS_PER_GALAXY = 14.0


def _plan(args) -> Plan:
    """What ``scimech astro study`` would run: the intervention units over the test galaxies."""
    sz = _sizes(args)
    if args.catalog is not None:
        sizes = {"galaxies": f"the catalogue {args.catalog}" + (f" with cut-outs {args.images}" if args.images else "")
                 + f", {args.test_fraction:.0%} held out for testing"}
        n_test = None
    elif args.quick or args.full:
        sizes = {"galaxies": f"synthetic, {sz['n_train']} training and {sz['n_test']} test, world "
                             f"{args.world or DEFAULT_WORLD}" + (" (planted stand-in)" if args.planted else ""),
                 "training": f"{sz['epochs']} epochs, batch {sz['batch_size']}"}
        n_test = sz["n_test"]
    else:
        sizes = {"model": str(args.model), "training galaxies": str(args.train), "test galaxies": str(args.test)}
        n_test = None
    sizes["bootstrap resamples"] = sz["n_bootstrap"]
    sizes["block"] = "localised by the layer probes" if args.block is None else args.block
    chunk = sz["chunk_size"]
    units = ([f"galaxies {i}-{min(i + chunk, n_test) - 1}" for i in range(0, n_test, chunk)] if n_test
             else [f"{chunk} test galaxies per unit (count known once the data are read)"])
    return Plan("astro study", units, sizes, _BENCH_MS_PER_GALAXY * chunk / 1000 if n_test else None,
                "head interventions only, from bench/RESULTS.md's 14 ms per galaxy; training not included", str(args.out))


def cmd_study(args) -> int:
    from scimech.parallel import client_from_args

    from .execution import run_study

    out = Path(args.out)
    given = [getattr(args, n) is not None for n in ("model", "train", "test")]
    if args.catalog is not None and (args.quick or args.full):
        print("scimech astro study: --catalog studies your galaxies; do not combine it with --quick/--full "
              "(they synthesise galaxies).", file=sys.stderr)
        return 2
    if args.catalog is None and not (args.quick or args.full) and not all(given):
        missing = [n for n, g in zip(("model", "train", "test"), given, strict=True) if not g]
        print(f"scimech astro study: give --{', --'.join(missing)} (or --quick / --full).", file=sys.stderr)
        return 2
    if (args.quick or args.full) and any(given):
        print("scimech astro study: --quick/--full synthesise and train; do not combine them with "
              "--model/--train/--test.", file=sys.stderr)
        return 2
    if args.quick and args.full:
        print("scimech astro study: choose one of --quick and --full.", file=sys.stderr)
        return 2
    if args.dry_run:
        print(_plan(args).text())
        return 0
    from scimech.errors import ScimechError

    try:
        client = client_from_args(args)
        try:
            res, timings = run_study(out, sizes=_sizes(args), seed=args.seed, model=args.model, train=args.train,
                                     test=args.test, image_tokenizer=args.image_tokenizer, block=args.block,
                                     client=client, catalog=args.catalog, images=args.images,
                                     test_fraction=args.test_fraction, log=_log,
                                     world=args.world, planted=args.planted, image_features=args.image_features)
        finally:
            if client is not None:
                client.close()
    except (ScimechError, FileNotFoundError) as err:   # bad input: the message says what and how to fix it
        print(f"scimech astro study: {err}", file=sys.stderr)
        return 2
    galaxies = None
    if args.catalog is not None:
        galaxies = (f"Galaxies: the Legacy Survey catalogue {args.catalog}"
                    + (f" with the cut-outs {args.images}" if args.images else " (photometry only)")
                    + f", split at random (seed {args.seed}) into training and {args.test_fraction:.0%} test rows; "
                    + (f"model {args.model}." if args.model else "a stand-in `aion.AION` trained on the training rows."))
    print(f"report: {write_report(res, out, timings=timings, galaxies=galaxies)}")
    write_summaries(res, out)
    return 0


def cmd_plot(args) -> int:
    res = load_study(Path(args.study))
    out = Path(args.out or Path(args.study).parent)
    print(f"report: {write_report(res, out)}")
    write_summaries(res, out)
    return 0


def register(subparsers) -> None:
    """Add ``astro`` and its subcommands to the ``scimech`` parser."""
    p = subparsers.add_parser("astro", help=TITLE,
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="astro_command", metavar="COMMAND")
    s = sub.add_parser("synth", help="write synthetic galaxies (catalogue + images) to .fits or .zarr")
    s.add_argument("--n", type=whole(1), default=2000)
    s.add_argument("--seed", type=whole(0), default=0)
    s.add_argument("--out", type=Path, required=True)
    s.add_argument("--no-images", action="store_true")
    s.add_argument("--world", default=DEFAULT_WORLD,
                   help=f"synthetic world: standard or degenerate (astro.synthetic.WORLDS; default {DEFAULT_WORLD})")
    s.set_defaults(func=cmd_synth)
    t = sub.add_parser("train", help="fit tokenizers and train the stand-in AION")
    t.add_argument("--data", type=existing_path(), required=True)
    t.add_argument("--out", type=Path, required=True)
    t.add_argument("--epochs", type=whole(1), default=20)
    t.add_argument("--batch-size", type=whole(1), default=64)
    t.add_argument("--seed", type=whole(0), default=0)
    t.add_argument("--planted", action="store_true", help="train the planted stand-in (astro.models.planted)")
    t.add_argument("--image-features", choices=("bands", "colours"), default=None,
                   help="features of the patch tokenizer (default: the sample's world's, astro.execution.IMAGE_FEATURES)")
    t.set_defaults(func=cmd_train)
    st = sub.add_parser("study", help="run the four-part study and write a report")
    st.add_argument("--model", type=existing_path(),
                    help="the model: an AION-1 folder (config.json, model.safetensors, codecs/image/) or a stand-in "
                         "checkpoint written by `scimech astro train`")
    st.add_argument("--train", type=existing_path(), help="training galaxies for the probes (a .fits or .zarr "
                    "written by `scimech astro synth`, or your own in that layout)")
    st.add_argument("--test", type=existing_path(), help="test galaxies for the probes and interventions (same layout)")
    st.add_argument("--image-tokenizer", type=existing_path(),
                    help="a fitted image tokenizer (default: the one saved beside --model)")
    st.add_argument("--catalog", type=existing_path(), default=None,
                    help="your Legacy Survey DR10 catalogue (FITS: FLUX_G/R/I/Z, FLUX_IVAR_*, SHAPE_R, SHAPE_E1/E2, "
                         "EBV, plus Z and A_V); its rows are split into training and test galaxies")
    st.add_argument("--images", type=existing_path(), default=None,
                    help="(N, 4, H, W) g, r, i, z cut-outs in nanomaggies, one per catalogue row (.npy or FITS)")
    st.add_argument("--test-fraction", type=fraction(), default=0.25,
                    help="share of the catalogue's galaxies held out as the test set (default 0.25)")
    st.add_argument("--out", type=Path, required=True)
    st.add_argument("--block", type=whole(0), default=None, help="block for the head study (default: localised)")
    st.add_argument("--seed", type=whole(0), default=0)
    st.add_argument("--world", default=None,
                    help=f"synthetic world of --quick / --full: standard or degenerate (default {DEFAULT_WORLD}; "
                         "astro.synthetic.WORLDS)")
    st.add_argument("--planted", action="store_true",
                    help="train the planted stand-in (image only through head 1 of block 0, head 2 an inert colour "
                         "head) and compare what the study finds with what was planted")
    st.add_argument("--image-features", choices=("bands", "colours"), default=None,
                    help="patch-tokenizer features (default: the world's, astro.execution.IMAGE_FEATURES)")
    st.add_argument("--quick", action="store_true",
                    help=f"synthesize + train + study, small, in one go ({QUICK['n_train']} train / "
                         f"{QUICK['n_test']} test galaxies, {QUICK['epochs']} epochs)")
    st.add_argument("--full", action="store_true",
                    help=f"the same, larger ({FULL['n_train']} / {FULL['n_test']} galaxies, {FULL['epochs']} epochs)")
    sz = st.add_argument_group("sizes (override --quick / --full)")
    sz.add_argument("--n-train", type=whole(1), default=None, metavar="N")
    sz.add_argument("--n-test", type=whole(1), default=None, metavar="N")
    sz.add_argument("--epochs", type=whole(1), default=None)
    sz.add_argument("--batch-size", type=whole(1), default=None)
    sz.add_argument("--n-bootstrap", type=whole(0), default=None)
    sz.add_argument("--chunk-size", type=whole(1), default=None, metavar="N",
                    help="test galaxies per intervention unit (the unit of Dask work and of resumption)")
    from scimech.parallel import add_cluster_arguments

    add_cluster_arguments(st)
    add_dry_run(st)
    st.set_defaults(func=cmd_study)
    pl = sub.add_parser("plot", help="(re)draw the report from saved study results")
    pl.add_argument("--study", type=existing_path(), required=True)
    pl.add_argument("--out", type=Path)
    pl.set_defaults(func=cmd_plot)
    p.set_defaults(func=lambda a: (p.print_help(), 0)[1])


def demo(out_dir: Path, quick: bool = True) -> Path:
    """Run the whole astro study on the planted stand-in (quick sizes by default) and return the report path.

    The demo shows the study finding a mechanism it is known to contain: the planted stand-in
    (:mod:`astro.models.planted`) in the default world, studied blind. Besides the report it
    writes ``recovery.txt`` (a one-line summary of the planted truth's recovery, then the
    table) and ``findings.txt`` (one line per reference finding with its verdict) in
    ``out_dir``. ``scimech astro study --quick`` runs the unplanted stand-in.
    """
    import torch

    out_dir = Path(out_dir)
    torch.set_num_threads(max(1, min(2, torch.get_num_threads())))
    res, timings = run_quick(out_dir, sizes=QUICK if quick else FULL, planted=True)
    report = write_report(res, out_dir, timings=timings)
    write_summaries(res, out_dir)
    return report
