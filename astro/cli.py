"""``scimech astro synth | train | study | plot`` and the quick demo.

Examples::

    scimech astro synth --n 4000 --seed 0 --out runs/astro/train.fits
    scimech astro synth --n 1000 --seed 1 --out runs/astro/test.fits
    scimech astro train --data runs/astro/train.fits --out runs/astro/model --epochs 20
    scimech astro study --model runs/astro/model --train runs/astro/train.fits \\
                        --test runs/astro/test.fits --out runs/astro/study
    scimech astro plot --study runs/astro/study
    scimech astro study --quick --out runs/astro      # everything, small, in one go

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

import numpy as np

__all__ = ["register", "demo", "QUICK", "FULL"]

#: sizes of the quick (demo/test) and full runs
QUICK = dict(n_train=1600, n_test=600, epochs=10, batch_size=64, n_bootstrap=200)
FULL = dict(n_train=8000, n_test=2000, epochs=40, batch_size=128, n_bootstrap=1000)


def _load_sample(path: Path):
    from .synthetic import GalaxySample

    path = Path(path)
    return GalaxySample.from_zarr(path) if path.suffix == ".zarr" or path.is_dir() else GalaxySample.from_fits(path)


def _save_sample(sample, path: Path) -> Path:
    path = Path(path)
    return sample.to_zarr(path) if path.suffix == ".zarr" else sample.to_fits(path)


def _log(msg: str) -> None:
    import os

    if os.environ.get("SCIMECH_QUIET") != "1":
        print(f"[astro] {msg}", flush=True)


def cmd_synth(args) -> int:
    from .synthetic import make_galaxies

    t0 = time.perf_counter()
    s = make_galaxies(args.n, seed=args.seed, images=not args.no_images)
    p = _save_sample(s, args.out)
    print(f"wrote {len(s)} galaxies to {p} in {time.perf_counter() - t0:.1f} s")
    return 0


def train_standin(train, *, epochs: int, batch_size: int = 64, seed: int = 0, lr: float = 3e-3, log=None):
    """Fit tokenizers on ``train`` and train a stand-in AION (mode "both"). Returns (adapter, history)."""
    from .models import standin as M
    from .models.aion import AIONRedshift

    codecs = M.fit_codecs(train.catalog, seed=seed)
    tok = M.PatchTokenizer(seed=seed).fit(train.images)
    model = M.build(seed=seed, codecs=codecs)
    ad = AIONRedshift(model, codecs, tok)
    tokens = ad.tokenize(train.catalog, train.images)
    hist = M.train(ad, tokens, np.asarray(train.catalog["z"], float), epochs=epochs, batch_size=batch_size,
                   seed=seed, lr=lr, log=log)
    return ad, hist


def cmd_train(args) -> int:
    from .models import standin as M

    train = _load_sample(args.data)
    ad, hist = train_standin(train, epochs=args.epochs, batch_size=args.batch_size, seed=args.seed, log=_log)
    M.save(ad, args.out)
    (Path(args.out) / "history.json").write_text(json.dumps(hist))
    print(f"trained in {hist['seconds']:.0f} s ({hist['steps']} steps); saved to {args.out}")
    return 0


def _load_adapter(folder: Path, image_tokenizer: Path | None = None):
    from .models import standin as M
    from .models.aion import AIONRedshift

    folder = Path(folder)
    tok_path = image_tokenizer or folder / "image_tokenizer.npz"
    tok = M.PatchTokenizer.load(tok_path) if Path(tok_path).is_file() else None
    return AIONRedshift.from_folder(folder, image_tokenizer=tok)


def save_study(res: dict, out: Path, config: dict | None = None, seed: int = 0) -> None:
    from scimech import results

    out.mkdir(parents=True, exist_ok=True)
    for name, ds in res.items():
        results.save(ds, out / f"{name}.nc", config=config, seed=seed)


def load_study(out: Path) -> dict:
    from scimech import results

    names = ("advantage", "layers", "head_probes", "radial", "interventions", "bias", "predictions")
    return {n: results.load(Path(out) / f"{n}.nc") for n in names}


def write_report(res: dict, out: Path, *, title: str = "AION-1 redshift head analysis (stand-in)",
                 timings: dict | None = None) -> Path:
    """Figures, tables and the plain list of which findings reproduce."""
    from scimech.report import Report

    from . import analysis, plots

    rep = Report(out, title=title)
    rep.text("Stand-in: a small `aion.AION` subclass (coarse 6x6 image-token grid) trained on synthetic "
             "galaxies (kcorrect SEDs, Calzetti dust, DECam photometry, bulge+disk Sersic images). "
             "'photometry' hides the image tokens with AION's input mask; 'multimodal' shows them.")
    fnd = analysis.findings(res)
    lines = ["## Findings of the reference study, tested here", ""]
    for f in fnd:
        lines.append(f"- **{'REPRODUCED' if f['reproduced'] else 'NOT reproduced'}**: {f['finding']}. "
                     f"Evidence: {f['evidence']}.")
    rep.text("\n".join(lines))
    adv = res["advantage"]
    import pandas as pd

    tab = adv["value"].sel(metric=["sigma_nmad", "outlier_fraction", "bias", "mean_abs_dz"]).to_dataframe().unstack("metric")
    rep.table(tab["value"].round(4), caption="Photo-z metrics per mode and population (bootstrap CIs in advantage.nc)")
    rep.table(pd.DataFrame({"advantage": adv["advantage"].values, "ci_low": adv["advantage_low"].values,
                            "ci_high": adv["advantage_high"].values, "n": adv["n"].values},
                           index=adv.population.values).round(4),
              caption="Multimodal advantage: mean|dz| photometry-only minus multimodal (paired bootstrap 95% CI)")
    rep.figure(plots.z_scatter(res["predictions"]), "z_scatter", "z true vs predicted per mode")
    rep.figure(plots.metrics_by_population(adv), "metrics_by_population", "sigma_NMAD by population")
    rep.figure(plots.layer_curves(res["layers"]), "layer_curves", "Layerwise probe R2 (z, A_V), both modes")
    rep.figure(plots.head_heatmap(res["head_probes"], res["interventions"]), "head_heatmap",
               f"Heads of block {res['head_probes'].attrs.get('block')}: probe R2 and advantage left after interventions")
    rep.figure(plots.radial_maps(res["radial"]), "radial_maps", "Each head's image-token output on the token grid")
    iv = res["interventions"]
    h2 = int(np.nanargmin(iv["advantage_left"].sel(intervention="resample", population="dusty").values))
    rep.figure(plots.dz_vs_av(res["predictions"], iv, h2), "dz_vs_av", f"dz vs A_V (head {h2} resample-ablated)")
    rep.table(res["bias"].to_dataframe().round(4), caption="Attenuation-bias signatures (dilution in colour cells; "
              "slope of dz on A_V)")
    rep.table(iv["advantage_left"].sel(population=["all", "extended", "dusty"]).to_dataframe()
              ["advantage_left"].unstack("population").round(3),
              caption="Fraction of the multimodal advantage left after each intervention")
    if timings:
        rep.table(pd.DataFrame({"seconds": timings}).round(1), caption="Timings")
    return rep.write()


def run_quick(out: Path, *, sizes: dict | None = None, seed: int = 0) -> tuple[dict, dict]:
    """Synthesize, train and study at the given sizes; save everything under ``out``."""
    from . import analysis
    from .models import standin as M
    from .synthetic import make_galaxies

    sz = dict(QUICK if sizes is None else sizes)
    t, timings = time.perf_counter(), {}
    train = make_galaxies(sz["n_train"], seed=seed)
    test = make_galaxies(sz["n_test"], seed=seed + 1000)
    timings["synthesize"] = time.perf_counter() - t
    t = time.perf_counter()
    ad, hist = train_standin(train, epochs=sz["epochs"], batch_size=sz["batch_size"], seed=seed, log=_log)
    timings["train"] = time.perf_counter() - t
    M.save(ad, out / "model")
    t = time.perf_counter()
    res = analysis.run_study(ad, train, test, n_bootstrap=sz["n_bootstrap"], seed=seed, log=_log)
    timings["study"] = time.perf_counter() - t
    save_study(res, out / "study", config=sz, seed=seed)
    return res, timings


def cmd_study(args) -> int:
    from . import analysis

    out = Path(args.out)
    if args.quick:
        res, timings = run_quick(out, seed=args.seed)
        print(f"report: {write_report(res, out, timings=timings)}")
        return 0
    missing = [n for n in ("model", "train", "test") if getattr(args, n) is None]
    if missing:
        print(f"scimech astro study: give --{', --'.join(missing)} (or --quick).", file=sys.stderr)
        return 2
    ad = _load_adapter(args.model, args.image_tokenizer)
    res = analysis.run_study(ad, _load_sample(args.train), _load_sample(args.test), n_bootstrap=args.n_bootstrap,
                             seed=args.seed, block=args.block, log=_log)
    save_study(res, out / "study", seed=args.seed)
    print(f"report: {write_report(res, out)}")
    return 0


def cmd_plot(args) -> int:
    res = load_study(Path(args.study))
    print(f"report: {write_report(res, Path(args.out or Path(args.study).parent))}")
    return 0


def register(subparsers) -> None:
    """Add ``astro`` and its subcommands to the ``scimech`` parser."""
    p = subparsers.add_parser("astro", help="AION-1 photometric-redshift head analysis (photometry vs images)",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="astro_command", metavar="COMMAND")
    s = sub.add_parser("synth", help="write synthetic galaxies (catalogue + images) to .fits or .zarr")
    s.add_argument("--n", type=int, default=2000)
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--out", type=Path, required=True)
    s.add_argument("--no-images", action="store_true")
    s.set_defaults(func=cmd_synth)
    t = sub.add_parser("train", help="fit tokenizers and train the stand-in AION")
    t.add_argument("--data", type=Path, required=True)
    t.add_argument("--out", type=Path, required=True)
    t.add_argument("--epochs", type=int, default=20)
    t.add_argument("--batch-size", type=int, default=64)
    t.add_argument("--seed", type=int, default=0)
    t.set_defaults(func=cmd_train)
    st = sub.add_parser("study", help="run the four-part study and write a report")
    st.add_argument("--model", type=Path)
    st.add_argument("--train", type=Path)
    st.add_argument("--test", type=Path)
    st.add_argument("--image-tokenizer", type=Path)
    st.add_argument("--out", type=Path, required=True)
    st.add_argument("--block", type=int, default=None, help="block for the head study (default: localised)")
    st.add_argument("--n-bootstrap", type=int, default=1000)
    st.add_argument("--seed", type=int, default=0)
    st.add_argument("--quick", action="store_true", help="synthesize + train + study, small, in one go")
    st.set_defaults(func=cmd_study)
    pl = sub.add_parser("plot", help="(re)draw the report from saved study results")
    pl.add_argument("--study", type=Path, required=True)
    pl.add_argument("--out", type=Path)
    pl.set_defaults(func=cmd_plot)
    p.set_defaults(func=lambda a: (p.print_help(), 0)[1])


def demo(out_dir: Path, quick: bool = True) -> Path:
    """Run the whole astro study (quick sizes by default) and return the report path."""
    import torch

    out_dir = Path(out_dir)
    torch.set_num_threads(max(1, min(2, torch.get_num_threads())))
    res, timings = run_quick(out_dir, sizes=QUICK if quick else FULL)
    return write_report(res, out_dir, timings=timings)
