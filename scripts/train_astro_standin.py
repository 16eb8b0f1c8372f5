"""Train the shipped astro stand-ins and record how good they are: ``astro/models/weights/<name>/``.

Run from the repository root (about 10 minutes of one CPU core per stand-in on a quiet machine)::

    .venv/bin/python scripts/train_astro_standin.py                     # standin-degenerate and planted-degenerate
    .venv/bin/python scripts/train_astro_standin.py --which standin     # one of them
    .venv/bin/python scripts/train_astro_standin.py --out /tmp/weights  # elsewhere, to compare with the shipped

Every setting is in :data:`SETTINGS` (and :data:`PLANTED` for what the planted stand-in changes);
they are written to ``shipped.json`` with the world's fingerprint, the training galaxies'
fingerprint, the weights' fingerprint and the test metrics with bootstrap intervals
(:func:`astro.models.competence.score_against_yardsticks`). The test galaxies and the colour kNN's
training galaxies are those of ``scimech astro study --quick --seed 0`` (600 test galaxies drawn with
seed 1000, 1600 training galaxies with seed 0), so the record speaks of the galaxies the quick study
scores; the stand-in's own training galaxies are another draw (seed 700001) of the same world. One
thread, fixed seeds: a rerun on the same machine and torch gives the same weights.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

#: every setting of the shipped stand-in's training
SETTINGS = dict(
    world="degenerate",  # astro.plan.DEFAULT_WORLD: images carry information the photometry lacks
    planted=False,
    image_features="colours",  # astro.plan.IMAGE_FEATURES["degenerate"]
    n_train=24000,  # training galaxies, a draw of their own (not the study's)
    train_seed=700001,
    n_views=8,  # the measured catalogue and 7 with fluxes redrawn, shapes and images turned (8 orientations)
    codebook_size=1024,  # AION-1's: 128 codes cost 0.004 in the colour kNN's sigma_NMAD
    image_vocab=1024,  # image codes: 256 keep none of the stamps' information beyond the catalogue (docs/astro.md)
    reservoir_size=20000,
    flux_reference="r",  # g, i, z tokens are fluxes relative to r (colours), r its own flux
    dim=32,
    encoder_depth=3,
    decoder_depth=1,
    num_heads=4,
    mlp_ratio=2.0,
    linear_init=1.0,
    phot_steps=1500,  # stage 1: photometry only (catalogue tokens alone)
    steps=4000,  # stage 2: modality dropout (half of each batch with the image); 2000 ended still improving
    check_every=100,  # score the validation galaxies every 100 steps; each stage ends on its best checkpoint
    val_n=1000,  # validation galaxies: a draw of their own, neither training nor test galaxies
    val_seed=700002,
    batch_size=128,
    phot_lr=3e-3,
    lr=2e-3,
    weight_decay=0.01,
    target_width=0.01,
    colour_weight=1.0,  # planted only: the inert head's colour read-out
    seed=0,
    # the test record: the galaxies of `scimech astro study --quick --seed 0`
    test_n=600,
    test_seed=1000,
    knn_train_n=1600,
    knn_train_seed=0,
    n_bootstrap=1000,
)
#: what the planted stand-in changes (astro.models.planted: image only through head 1 of block 0)
PLANTED = dict(planted=True)


def _log(msg: str) -> None:
    print(f"[train_astro_standin] {msg}", flush=True)


def score(ad, settings: dict, train=None) -> tuple[dict, object]:
    """The test record of a trained stand-in: its metrics beside the yardsticks on the quick study's galaxies."""
    import numpy as np

    from astro.models import competence
    from astro.synthetic import make_galaxies

    s = settings
    test = make_galaxies(s["test_n"], seed=s["test_seed"], world=s["world"])
    knn_train = make_galaxies(s["knn_train_n"], seed=s["knn_train_seed"], world=s["world"], images=False)
    preds = competence.predictions(ad, test, knn_train)
    if train is not None:  # the colour kNN on the stand-in's own training galaxies: the fair comparison of learners
        preds["colour_knn_same_training"] = competence.predictions(ad, test, train, template=False)["colour_knn"]
    z = np.asarray(test.catalog["z"], float)
    return competence.score_against_yardsticks(z, preds, n_bootstrap=s["n_bootstrap"], seed=s["seed"]), test


def show(scores: dict) -> None:
    """The competence table of a record (sigma_NMAD, bias, outlier fraction with 95% intervals)."""

    def cell(m):
        return f"{m['value']:.4f} [{m['ci_low']:.4f}, {m['ci_high']:.4f}]"

    print("| prediction | sigma_NMAD | bias | outlier fraction |")
    print("|---|---|---|---|")
    for name in ("photometry", "multimodal", "template", "colour_knn", "colour_knn_same_training"):
        if name in scores:
            m = scores[name]
            print(f"| {name} | {cell(m['sigma_nmad'])} | {cell(m['bias'])} | {cell(m['outlier_fraction'])} |")
    for name, d in scores["difference"].items():
        print(f"| {name} (paired) | {cell(d['sigma_nmad'])} | | {cell(d['outlier_fraction'])} |")
    print(f"| advantage, mean abs dz phot - multi | {cell(scores['advantage'])} | | |")


def diagnose(ad, settings: dict, n_train: int = 3000) -> None:
    """Photometry-only metrics of each read-out of the redshift PDF (mean, median, mode) on the test
    galaxies and on ``n_train`` of the stand-in's own training galaxies (their catalogue as measured):
    how far it generalises, and whether another point estimate has fewer outliers."""
    import numpy as np

    from astro import photoz
    from astro.models.aion import IMAGE_KEY, READOUTS
    from astro.synthetic import make_galaxies

    s = settings
    test = make_galaxies(s["test_n"], seed=s["test_seed"], world=s["world"], images=False)
    train = make_galaxies(s["n_train"], seed=s["train_seed"], world=s["world"], images=False)[:n_train]
    print("| galaxies | read-out | sigma_NMAD | outlier fraction | mean abs dz |")
    print("|---|---|---|---|---|")
    for label, sample in (("test", test), (f"training (first {n_train})", train)):
        z = np.asarray(sample.catalog["z"], float)
        batch = ad.batch(ad.tokenize(sample.catalog), masked=[IMAGE_KEY])
        for readout in READOUTS:
            m = photoz.photoz_metrics(z, ad.predict_z(batch, readout=readout))
            print(
                f"| {label} | {readout} | {m['sigma_nmad']:.4f} | {m['outlier_fraction']:.4f} | {m['mean_abs_dz']:.4f} |"
            )


def train_and_record(settings: dict, out: Path) -> dict:
    """Train one stand-in with ``settings``, save it to ``out`` with its ``shipped.json``; return the record."""
    from astro.models import shipped, standin
    from astro.synthetic import make_galaxies, world_config
    from astro.training import train_standin_staged

    s = settings
    t0 = time.perf_counter()
    train = make_galaxies(s["n_train"], seed=s["train_seed"], world=s["world"])
    val = make_galaxies(s["val_n"], seed=s["val_seed"], world=s["world"])
    _log(f"{len(train)} training and {len(val)} validation galaxies drawn ({time.perf_counter() - t0:.0f} s)")
    ad, hist = train_standin_staged(train, s, validation=val, log=_log)
    standin.save(ad, out)
    scores, test = score(ad, s, train)
    record = {
        "name": out.name,
        "settings": s,
        "world": s["world"],
        "world_config": dataclasses.asdict(world_config(s["world"])),
        "world_fingerprint": shipped.world_fingerprint(s["world"]),
        "training_data": {
            "n_galaxies": len(train),
            "seed": s["train_seed"],
            "fingerprint": shipped.sample_fingerprint(train),
        },
        "validation_data": {
            "n_galaxies": len(val),
            "seed": s["val_seed"],
            "fingerprint": shipped.sample_fingerprint(val),
        },
        "test_data": {
            "n_galaxies": len(test),
            "seed": s["test_seed"],
            "fingerprint": shipped.sample_fingerprint(test),
            "knn_training": {"n_galaxies": s["knn_train_n"], "seed": s["knn_train_seed"]},
        },
        "weights_fingerprint": shipped.weights_fingerprint(out),
        "training": {
            "seconds": round(hist["seconds"], 1),
            "torch": torch.__version__,
            "threads": 1,
            **{k: hist[k] for k in hist if k.startswith(("best_step_", "checks_"))},
        },
        "test": scores,
    }
    (out / shipped.RECORD_NAME).write_text(json.dumps(record, indent=1, sort_keys=True))
    show(scores)
    return record


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--which", choices=("standin", "planted", "both"), default="both")
    p.add_argument("--out", type=Path, default=ROOT / "astro" / "models" / "weights", help="folder of the stand-ins")
    p.add_argument(
        "--score",
        action="store_true",
        help="train nothing: score the stand-ins in --out on the test galaxies again and print their competence "
        "table beside the one recorded with them",
    )
    p.add_argument(
        "--diagnose",
        action="store_true",
        help="train nothing: print the photometry-only metrics of the stand-ins in --out for each read-out of "
        "the redshift PDF (mean, median, mode), on the test galaxies and on 3000 of their training galaxies",
    )
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    from astro.data.files import load_adapter
    from astro.models.shipped import ShippedStandin, shipped_name

    for which in ("standin", "planted") if args.which == "both" else (args.which,):
        settings = {**SETTINGS, **(PLANTED if which == "planted" else {})}
        out = args.out / shipped_name(settings["world"], settings["planted"])
        if args.diagnose:
            print(f"\n{out.name} ({ShippedStandin.read(out).record['settings']['steps']} steps):")
            diagnose(load_adapter(out), ShippedStandin.read(out).record["settings"])
            continue
        if args.score:
            print(
                f"\n{out.name}, recorded with the weights ({ShippedStandin.read(out).record['settings']['steps']} steps):"
            )
            show(ShippedStandin.read(out).record["test"])
            print(f"\n{out.name}, scored now:")
            show(score(load_adapter(out), settings)[0])
            continue
        _log(f"training {out}")
        train_and_record(settings, out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
