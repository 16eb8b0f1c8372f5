"""The AION-1 redshift head study: one :class:`scimech.studies.contract.Study` class, ``scimech astro ...``.

``scimech astro generate | study | redraw FOLDER | shift | inspect CATALOGUE | train``.

Examples::

    scimech astro study --out runs/astro                     # synthesise + study the shipped stand-in, quick size
    scimech astro study --train-afresh --out runs/astro-mine # the same with a stand-in trained here
    scimech astro study --size medium --workers 2 --out runs/astro-medium   # larger; units on 2 Dask workers
    scimech astro study --config astro.yaml                  # options from a file (`n_train: 4000`, ...)
    scimech astro study --quick --cluster cluster.toml --out /scratch/$USER/astro   # SLURM / PBS
    scimech astro study --data dr10/ --out runs/astro/dr10   # your galaxies (catalog.fits [+ images.npy])
    scimech astro study --data 'dr10/sweep-*.fits' --images cutouts/ --out runs/astro/sweeps  # sweeps + cut-outs
    scimech astro study --model aion-base/ --data dr10.fits --images cutouts96.npy --out runs/astro/aion1
    scimech astro generate --n-galaxies 4000 --seed 0 --out runs/astro/train.fits
    scimech astro generate --n-galaxies 1000 --seed 1 --out runs/astro/test.fits
    scimech astro train --data runs/astro/train.fits --out runs/astro/model --epochs 20
    scimech astro study --model runs/astro/model --train runs/astro/train.fits \\
                        --test runs/astro/test.fits --out runs/astro/study
    scimech astro redraw runs/astro/study                      # redraw the report from saved results
    scimech astro inspect dr10.fits --images cutouts.fits      # what --data would read, said back (no torch)

The study runs as resumable units (astro.run): the samples, the training, and the head
interventions over chunks of the test set (``--chunk-size``). Rerunning the same command with
the same ``--out`` redoes only the units that did not finish.

Model: on synthetic galaxies, the stand-in shipped for the world (astro/models/weights, trained at
full size by scripts/train_astro_standin.py; astro.models.shipped), refused with the reason said when
the world changed since; ``--train-afresh`` (or ``--epochs`` / ``--batch-size``) trains one here.

Galaxies: synthetic by default (``--world``; ``--size`` sets how many); ``--data`` studies
your Legacy Survey DR10 galaxies (astro.data.catalog.read_legacy_survey): a catalogue FITS file, several
(DR10 sweep files, given one after another or as a quoted glob ``'sweep-*.fits'``: read as one catalogue,
their overlaps merged), or a folder holding ``catalog.fits`` or ``sweep-*.fits`` and optionally
``images.npy`` / ``images.fits`` cut-outs or a ``cutouts/`` folder of one FITS file per galaxy (``--images``
names them elsewhere: a cube, or such a folder, matched to the rows by TARGETID or sky position); the
report's "What was read" lists each file and how they were combined. Without ``--model`` a stand-in is
trained on a random 75% of its objects (``--test-fraction``; the rows of one object stay together) and
studied on the rest. ``--model/--train/--test`` study an existing model on existing samples.

``--size``: quick (1600 / 600 galaxies), medium (4000 / 1200) or full (8000 / 2000), see
astro.plan; each size can be set on its own (``--n-train`` ...).

``--model`` may also be a real AION-1 folder (config.json, model.safetensors,
codecs/<NAME>/...); its image codec (``codecs/image/``) then tokenises the images (96x96
Legacy Survey cut-outs in nanomaggies; smaller stamps are zero-padded), and without it the
study runs on photometry tokens only. ``--image-tokenizer`` overrides it with a stand-in
``image_tokenizer.npz``. ``--device`` runs the training and the forward passes there, ``--dtype
bfloat16`` the transformer in half the memory (the codec and the probes' features stay float32). Nothing
is trained then; activations are streamed in passes of bounded size. A folder in that layout
with random weights (to try the pipeline, or to time it at the real size):
astro.models.aion_folder.write_random_aion.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from scimech.errors import ScimechError
from scimech.run import options
from scimech.run.many_paths import given, inspect_takes_many
from scimech.run.options import Format, existing_path, fraction, input_path, whole
from scimech.studies.contract import Command, Plan, Study

from .data.sweeps import holds_cutouts
from .plan import DATA_CATALOG_NAMES, DEFAULT_WORLD, FULL, IMAGE_FEATURES, MEDIUM, QUICK, holds_catalogue

# The commands import what they run when they run: the study pulls torch, aion, astropy and
# scikit-learn (about 6 s), and `scimech --help`, like the parser of every `scimech` command,
# imports this module.

__all__ = ["AstroStudy"]


def _log(msg: str) -> None:
    if os.environ.get("SCIMECH_QUIET") != "1":
        print(f"[astro] {msg}", flush=True)


#: what --train / --test / `astro train --data` read: a sample `scimech astro generate` writes
_SAMPLE_FORMATS = ("fits", "zarr")
#: what `astro study --data` reads: a Legacy Survey catalogue, or a folder holding one
_CATALOGUE_FORMATS = (
    "fits",
    Format(f"a folder holding {' or '.join(DATA_CATALOG_NAMES)} or DR10 sweep files (sweep-*.fits)", holds_catalogue),
)
#: what `--images` reads: a cube of cut-outs, one per catalogue row, or a folder of one FITS file per galaxy
_CUTOUT_FORMATS = ("npy", "fits", Format("a folder of per-galaxy FITS cut-outs (*.fits)", holds_cutouts))
#: --images in words
_IMAGES_HELP = (
    "g, r, i, z cut-outs in nanomaggies: an (N, 4, H, W) cube, one per catalogue row in its order (.npy or "
    "FITS), or a folder of one FITS file per galaxy (the Legacy Survey viewer's fits-cutout) matched to the "
    "rows by TARGETID or sky position (rows without one dropped and counted)"
)


def _galaxy_and_model_options(st: argparse.ArgumentParser) -> None:
    """The galaxies the study reads and the model it studies (or trains)."""
    g = st.add_argument_group("galaxies and model (default: synthetic galaxies, a stand-in trained here)")
    g.add_argument("--images", type=input_path(*_CUTOUT_FORMATS), default=None, help=_IMAGES_HELP)
    g.add_argument(
        "--test-fraction",
        type=fraction(),
        default=0.25,
        metavar="F",
        help="share of the --data galaxies held out as the test set (default 0.25)",
    )
    options.deprecated(g, "--catalog", "--data", type=input_path(*_CATALOGUE_FORMATS))
    g.add_argument(
        "--train",
        type=input_path(*_SAMPLE_FORMATS),
        metavar="FILE",
        help="training galaxies for the probes and the reference set of the mean/resample ablations: a "
        ".fits or .zarr in the layout `scimech astro generate` writes (catalogue with flux_g..z "
        "[nanomaggy], shape_r [arcsec], shape_e1/e2, ebv [mag], z, a_v [mag]; cut-outs (N, 4, H, W) "
        "[nanomaggy per pixel]); with --model and --test, instead of --data",
    )
    g.add_argument(
        "--test",
        type=input_path(*_SAMPLE_FORMATS),
        metavar="FILE",
        help="test galaxies for the head interventions and the scores (same layout as --train); with "
        "--model and --train",
    )
    g.add_argument(
        "--world",
        default=None,
        help=f"synthetic world: standard or degenerate (default {DEFAULT_WORLD}; astro.synthetic.WORLDS)",
    )
    g.add_argument(
        "--image-features",
        choices=("bands", "colours"),
        default=None,
        help="patch-tokenizer features of the stand-in trained here (default: the world's, astro.plan.IMAGE_FEATURES)",
    )
    g.add_argument(
        "--image-tokenizer",
        type=input_path("npz"),
        metavar="NPZ",
        help="a stand-in patch tokenizer (image_tokenizer.npz written by `scimech astro train`) that "
        "turns the cut-outs into image tokens; default: the one in the --model folder, else the "
        "AION-1 folder's image codec (codecs/image/, 96x96 cut-outs -> 576 tokens), else none "
        "(photometry tokens only)",
    )
    which = g.add_mutually_exclusive_group()
    which.add_argument(
        "--model",
        type=existing_path("folder"),
        metavar="FOLDER",
        help="the model, studied as it is (nothing is trained): an AION-1 folder (config.json and "
        "model.safetensors of aion.AION, codecs/<NAME>/{config.json,model.safetensors} for "
        "FLUX_G..Z, SHAPE_R, SHAPE_E1/E2, EBV, Z and optionally image, the layout of "
        "polymathic-ai/aion-base; see astro.models.aion_folder) or a stand-in checkpoint "
        "written by `scimech astro train`; with --data (split into train/test) or --train/--test",
    )
    which.add_argument(
        "--planted",
        action="store_true",
        help="train the planted stand-in (image only through head 1 of block 0, head 2 an inert "
        "colour head) and compare what the study finds with what was planted",
    )
    g.add_argument(
        "--train-afresh",
        action="store_true",
        help="train a stand-in here instead of studying the one shipped for the synthetic world "
        "(astro/models/weights, trained at full size by scripts/train_astro_standin.py); giving "
        "--epochs or --batch-size does too. Without a shipped stand-in for the world, or when the "
        "world changed since it was trained, one is trained here anyway and the run says why",
    )


def _analysis_and_size_options(st: argparse.ArgumentParser) -> None:
    """The block studied and the sizes, each overriding ``--size``."""
    a = st.add_argument_group("analysis")
    a.add_argument(
        "--block",
        type=whole(0),
        default=None,
        metavar="B",
        help="study the heads of this encoder block only (0-based; faster); default: every block's heads are "
        "probed and intervened on, findings 3 and 4 reading the block the layer probes localise the gain to",
    )
    sz = st.add_argument_group(
        "sizes (each overrides --size: "
        + ", ".join(
            f"{name} {s['n_train']}/{s['n_test']} galaxies"
            for name, s in (("quick", QUICK), ("medium", MEDIUM), ("full", FULL))
        )
        + ")"
    )
    sz.add_argument("--n-train", type=whole(1), default=None, metavar="N", help="synthetic training galaxies")
    sz.add_argument("--n-test", type=whole(1), default=None, metavar="N", help="synthetic test galaxies")
    sz.add_argument(
        "--n-bootstrap",
        type=whole(0),
        default=None,
        metavar="N",
        help="bootstrap resamples of every confidence interval",
    )
    sz.add_argument(
        "--chunk-size",
        type=whole(1),
        default=None,
        metavar="N",
        help="test galaxies per intervention unit (the unit of Dask work and of resumption)",
    )


def _where_each_acts(st: argparse.ArgumentParser) -> None:
    """Each option where it acts; elsewhere refused (:func:`scimech.run.options.needs`)."""
    synthetic, catalogue = "synthetic galaxies (no --data, --model)", "--data PATH (your catalogue)"
    trained_here = "a stand-in trained here (no --model)"
    given_galaxies = ("--data", "{fits}")  # examples: each option where it would do nothing
    given_model = ("--model", "{folder}")
    for flag, applies, need, example in (
        ("--images", lambda a: a.data is not None, catalogue, ("--images", "{npy}")),
        ("--test-fraction", lambda a: a.data is not None, catalogue, ("--test-fraction", "0.3")),
        ("--n-train", lambda a: a.data is None and a.model is None, synthetic, (*given_galaxies, "--n-train", "9")),
        ("--n-test", lambda a: a.data is None and a.model is None, synthetic, (*given_model, "--n-test", "9")),
        (
            "--world",
            lambda a: a.data is None and a.model is None,
            synthetic,
            (*given_galaxies, "--world", "degenerate"),
        ),
        ("--epochs", lambda a: a.model is None, trained_here, (*given_model, "--epochs", "3")),
        ("--batch-size", lambda a: a.model is None, trained_here, (*given_model, "--batch-size", "8")),
        (
            "--image-features",
            lambda a: a.model is None,
            trained_here,
            (*given_model, "--image-features", "colours"),
        ),
        (
            "--train-afresh",
            lambda a: a.data is None and a.model is None,
            synthetic,
            (*given_galaxies, "--train-afresh"),
        ),
        ("--train", lambda a: a.model is not None, "--model FOLDER (an existing study)", ("--train", "{fits}")),
        ("--test", lambda a: a.model is not None, "--model FOLDER (an existing study)", ("--test", "{fits}")),
    ):
        options.needs(st, flag, applies, need, example)


class AstroStudy(Study):
    """The AION-1 photometric-redshift head study: does the image's gain pass through one head?

    Examples
    --------
    The study behind ``scimech astro``; from Python, :func:`astro.run_study` runs it.

    >>> from astro.study import AstroStudy
    >>> study = AstroStudy()
    >>> study.name, [command.name for command in study.commands()]
    ('astro', ['train'])
    >>> plan = study.plan(study.study_parser().parse_args(["--seed", "0"]))  # what would run
    >>> list(plan.units)
    ['galaxies 0-149', 'galaxies 150-299', 'galaxies 300-449', 'galaxies 450-599']
    """

    name = "astro"
    title = "AION-1 photometric-redshift head analysis (photometry vs images)"
    description = (__doc__ or "").partition("\n")[0]  # the first line: the command's help, without the examples
    out_default = "runs/astro"
    data_help = (
        "your galaxies: a Legacy Survey DR10 catalogue (FITS: FLUX_G/R/I/Z, FLUX_IVAR_*, "
        "SHAPE_R, SHAPE_E1/E2, EBV, plus Z and A_V), several (DR10 sweep files, or a quoted glob "
        "'sweep-*.fits') read as one catalogue, or a folder holding catalog.fits or sweep-*.fits and "
        "optionally images.npy / images.fits cut-outs or a cutouts/ folder of per-galaxy FITS files; its rows "
        "are split into training and test galaxies (default: synthetic galaxies)"
    )
    data_formats = _CATALOGUE_FORMATS
    data_many = True  # several catalogue files (DR10 sweeps) or a glob
    shared_options = {
        "seed": options.Use("Here: the draws, the train/test split, the resampling and the bootstrap", default=0),
        "epochs": "Of a stand-in trained here",
        "batch_size": "Of a stand-in trained here",
        "dtype": options.Use(
            "Here: the studied transformer's; bfloat16 halves the weights' memory (on CPUs with bfloat16 "
            "matrix units also faster), float16 is for GPUs (refused where this torch cannot compute "
            "in it); the image codec, the redshift read-out and every activation a probe sees stay "
            "float32",
            default="float32",
        ),
    }
    generate_help = "write synthetic galaxies (catalogue + images) to .fits or .zarr"
    shift_help = "a dictionary of the stand-in's activations under a shift of the galaxies (shift.nc, shift.png)"
    renamed = {"synth": "generate", "plot": "redraw"}

    # --- the study ----------------------------------------------------------------------------
    def add_options(self, st: argparse.ArgumentParser) -> None:
        _galaxy_and_model_options(st)
        _analysis_and_size_options(st)
        _where_each_acts(st)

    def plan(self, args: argparse.Namespace) -> Plan:
        """The plan of ``astro study``; a synthetic run's model decided here (the shipped stand-in of the
        world, or one trained here: ``--train-afresh``, ``--epochs``, ``--batch-size``), and said."""
        import dataclasses

        from .plan import plan_of, settings_from_args
        from .run import with_standin

        settings = settings_from_args(args)
        asked = getattr(args, "train_afresh", False) or any(
            getattr(args, k, None) is not None for k in ("epochs", "batch_size")
        )
        settings = dataclasses.replace(settings, extra={**settings.extra, "standin": "train" if asked else "shipped"})
        settings = with_standin(settings, log=_log)
        plan = plan_of(settings, args.size)
        shipped = settings.extra.get("shipped")
        if shipped is None:
            return plan
        sizes = {k: v for k, v in plan.sizes.items() if k != "training"}
        sizes["model"] = f"{shipped.summary()}; --train-afresh trains one here instead"
        return dataclasses.replace(plan, sizes=sizes)

    def run(self, plan: Plan, client=None):
        from .evidence import AstroEvidence
        from .run import run_settings

        res, timings = run_settings(plan.settings, client=client, log=_log)
        return AstroEvidence(res, timings)

    def findings(self, evidence):
        from .recovery import study_findings

        return study_findings(evidence.results)

    def planted_truth(self, evidence) -> str | None:
        """``recovery.txt``; ``None`` for a study of your catalogue (real galaxies have no planted truth)."""
        from .recovery import recovery_text

        if "predictions" in evidence.results and evidence.results["predictions"].attrs.get("galaxies") == "catalog":
            return None
        return recovery_text(evidence.results)

    def report(self, evidence, plan: Plan) -> Path:
        from scimech.studies.reading import Reading

        from .report import galaxies_text, write_report
        from .run import READING_FILE

        galaxies = galaxies_text(plan.settings) if plan.settings is not None else None
        read = Path(plan.out) / READING_FILE
        return write_report(
            evidence.results,
            Path(plan.out),
            timings=evidence.timings or None,
            galaxies=galaxies,
            reading=Reading.load(read) if read.is_file() else None,
        )

    # --- what is read from your catalogue ------------------------------------------------------
    def add_inspect_options(self, parser: argparse.ArgumentParser) -> None:
        inspect_takes_many(parser)
        parser.add_argument(
            "--images",
            type=input_path(*_CUTOUT_FORMATS),
            default=None,
            help=_IMAGES_HELP + "; their band order, units and pixel scale are read and their fluxes checked "
            "against the catalogue's",
        )
        parser.add_argument(
            "--test-fraction",
            type=fraction(),
            default=0.25,
            metavar="F",
            help="share of the objects the study would hold out for testing (default 0.25)",
        )
        options.add(parser, "seed", default=0, context="Here: the train/test split the study would make")

    def inspect(self, path: Path, args: argparse.Namespace):
        """What ``scimech astro study --data PATH`` reads from a Legacy Survey catalogue (and cut-outs), said
        back as a :class:`scimech.studies.reading.Reading`: the columns, units and conversions, the rows dropped and
        why, the band order, and the split by object identity. No torch, no model."""
        import warnings

        from .data.catalog import read_legacy_survey
        from .data.splits import split_catalogue
        from .plan import data_files

        catalog, images = data_files(given(path, getattr(args, "more", None)), getattr(args, "images", None))
        with warnings.catch_warnings():  # the dropped rows are in the reading
            warnings.simplefilter("ignore", UserWarning)
            sample = read_legacy_survey(catalog, images)
        try:
            split_catalogue(sample, getattr(args, "test_fraction", 0.25), getattr(args, "seed", 0))
        except ScimechError as err:  # a catalogue too small to split is still read back
            sample.meta["reading"].fact("split", "not possible", str(err))
        return sample.meta["reading"]

    def load(self, folder: Path):
        """The saved results of a study folder (``<folder>/study/*.nc``, or the ``study/`` folder itself)."""
        from .data.files import load_study
        from .evidence import AstroEvidence

        saved = folder / "study" if (folder / "study").is_dir() else folder
        out = folder if saved != folder else folder.parent
        return AstroEvidence(load_study(saved)), Plan("astro study", [], {}, out=str(out))

    def demo_argv(self, out_dir: Path, quick: bool) -> list[str]:
        """The demo studies the planted stand-in (:mod:`astro.models.planted`) in the default world, blind:
        a mechanism the study is known to have to find (``scimech astro study --quick`` runs the unplanted one)."""
        return [*super().demo_argv(out_dir, quick), "--planted"]

    def demo(self, out_dir, quick: bool = True) -> Path:
        import torch

        torch.set_num_threads(max(1, min(2, torch.get_num_threads())))
        return super().demo(out_dir, quick)

    # --- generate, shift and the astro's own command ------------------------------------------
    def add_generate_options(self, s: argparse.ArgumentParser) -> None:
        s.add_argument(
            "--n-galaxies",
            type=whole(1),
            default=2000,
            metavar="N",
            help="galaxies to write (after the r-band selection; default 2000)",
        )
        options.deprecated(s, "--n", "--n-galaxies", type=whole(1))
        options.add(s, "seed", default=0, context="The sample is a function of it")
        options.add(
            s,
            "out",
            kind="file",
            suffixes=(".fits", ".zarr"),
            required=True,
            context="Here: .fits (catalogue table + IMAGES cube) or .zarr (a folder)",
        )
        s.add_argument(
            "--no-images",
            action="store_true",
            help="catalogue only, no (N, 4, 24, 24) g, r, i, z cut-outs [nanomaggy per pixel]",
        )
        s.add_argument(
            "--world",
            default=DEFAULT_WORLD,
            help=f"synthetic world: standard or degenerate (astro.synthetic.WORLDS; default {DEFAULT_WORLD})",
        )

    def generate(self, args: argparse.Namespace) -> int:
        from .data.files import save_sample  # lazy: see the top
        from .synthetic import make_galaxies

        t0 = time.perf_counter()
        try:
            make_galaxies(1, seed=0, images=False, world=args.world)  # an unknown world: a clear error, no work
        except ScimechError as err:
            print(f"scimech astro generate: {err}", file=sys.stderr)
            return 2
        s = make_galaxies(args.n_galaxies, seed=args.seed, images=not args.no_images, world=args.world)
        p = save_sample(s, args.out)
        print(f"wrote {len(s)} galaxies to {p} in {time.perf_counter() - t0:.1f} s")
        return 0

    def add_shift_options(self, p: argparse.ArgumentParser) -> None:
        options.add(p, "out", default="runs/astro/shift")
        p.add_argument(
            "--shift",
            choices=("depth", "redshift"),
            default="redshift",
            help="the shift of the galaxies: redshift (z scaled by 0.7) or depth (1.5 mag deeper); "
            "astro.shift.SHIFTS (default redshift)",
        )
        options.add(p, "seed", default=0)
        options.add(p, "epochs", default=20, context="Of the stand-in")
        options.add(p, "device", default="cpu")

    def run_shift(self, args: argparse.Namespace):
        from .shift import run_shift

        return run_shift(args.out, shift=args.shift, seed=args.seed, epochs=args.epochs, device=args.device)

    def commands(self) -> list[Command]:
        return [Command("train", "fit tokenizers and train the stand-in AION", _train_options, _train)]


def _train_options(t: argparse.ArgumentParser) -> None:
    options.add(
        t,
        "data",
        formats=_SAMPLE_FORMATS,
        required=True,
        context="Here: training galaxies, a .fits or .zarr written by `scimech astro generate` (or by the study "
        "as <out>/train.fits), catalogue with z and optional cut-outs",
    )
    options.add(
        t,
        "out",
        required=True,
        context="Here: the checkpoint folder (config.json, model.safetensors, "
        "codecs/, image_tokenizer.npz, history.json); give it to `astro study --model`",
    )
    options.add(t, "epochs", default=20)
    options.add(t, "batch_size", default=64)
    options.add(t, "seed", default=0)
    t.add_argument("--planted", action="store_true", help="train the planted stand-in (astro.models.planted)")
    t.add_argument(
        "--image-features",
        choices=("bands", "colours"),
        default=None,
        help="features of the patch tokenizer (default: the sample's world's, astro.plan.IMAGE_FEATURES)",
    )
    options.add(t, "device", default="cpu")


def _train(args) -> int:
    from .data.files import load_sample  # lazy: see the top
    from .models import standin
    from .training import train_standin

    train = load_sample(args.data)
    feats = args.image_features or IMAGE_FEATURES.get(str(train.meta.get("world", "standard")), "bands")
    ad, hist = train_standin(
        train,
        epochs=args.epochs,
        batch_size=args.batch_size,
        seed=args.seed,
        log=_log,
        planted=args.planted,
        image_features=feats,
        device=args.device,
    )
    ad.to("cpu")
    standin.save(ad, args.out)
    (Path(args.out) / "history.json").write_text(json.dumps(hist))
    print(f"trained in {hist['seconds']:.0f} s ({hist['steps']} steps); saved to {args.out}")
    return 0
