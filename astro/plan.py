"""What an astro study will run, from its options: the galaxies (synthetic, your catalogue, or
given samples and a model), the sizes, the seed and the device, checked before anything runs.

Sizes (``--size``):

* ``quick`` (:data:`QUICK`): 1600 training / 600 test galaxies, 40 epochs, 200 bootstrap
  resamples; minutes on one core, the demo's and the tests' size.
* ``medium`` (:data:`MEDIUM`): 4000 / 1200 galaxies, 40 epochs, 500 resamples, chunks of 300;
  intervals about 1.4 times narrower than quick (twice the test galaxies), the training 2.5
  times as long (2.5 times the training galaxies).
* ``full`` (:data:`FULL`): 8000 / 2000 galaxies, 40 epochs, batch 128, 1000 resamples.

``n_train`` / ``n_test`` apply to synthetic galaxies (a catalogue's split sets them); the
other sizes to every run. Each can be set on its own (``--n-train``, ``--epochs``, ...).
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from scimech.errors import ConfigError
from scimech.studies.contract import Plan

__all__ = [
    "QUICK",
    "MEDIUM",
    "FULL",
    "SIZES",
    "SIZE_KEYS",
    "DEFAULT_WORLD",
    "IMAGE_FEATURES",
    "STANDIN_STAMP",
    "StudySettings",
    "resolve_settings",
    "check_sizes",
    "data_files",
    "holds_catalogue",
    "settings_from_args",
    "plan_of",
]

#: sizes of the quick (demo/test), medium and full runs; ``chunk_size``: test galaxies per intervention unit
QUICK = dict(n_train=1600, n_test=600, epochs=40, batch_size=64, n_bootstrap=200, chunk_size=150)
MEDIUM = dict(n_train=4000, n_test=1200, epochs=40, batch_size=64, n_bootstrap=500, chunk_size=300)
FULL = dict(n_train=8000, n_test=2000, epochs=40, batch_size=128, n_bootstrap=1000, chunk_size=500)
#: ``--size`` -> sizes
SIZES = {"quick": QUICK, "medium": MEDIUM, "full": FULL}
#: the sizes an option may set one by one (``--n-train`` ...)
SIZE_KEYS = tuple(QUICK)
#: the synthetic world of a synthetic run unless ``world=`` says otherwise
DEFAULT_WORLD = "degenerate"
#: patch-tokenizer features the stand-in uses in each world (see astro.models.standin.PatchTokenizer)
IMAGE_FEATURES = {"standard": "bands", "degenerate": "colours"}
#: cut-out size [pixels] of the stand-in's image grid (6 x 6 tokens of 4 x 4 pixels)
STANDIN_STAMP = 24
#: file names ``--data FOLDER`` looks for: the catalogue, then the cut-outs (optional)
DATA_CATALOG_NAMES = ("catalog.fits", "catalogue.fits")
DATA_IMAGE_NAMES = ("images.npy", "images.fits")
#: the folder of per-galaxy cut-outs ``--data FOLDER`` looks for
DATA_CUTOUT_FOLDER = "cutouts"


@dataclass(frozen=True)
class StudySettings:
    """A resolved astro study: where it goes, what it runs on, at which sizes.

    ``source``: ``"synthetic"`` (galaxies drawn here, a stand-in trained here), ``"catalog"``
    (your catalogue split into training and test rows; a stand-in trained on them unless
    ``model``) or ``"given"`` (existing ``model``, ``train`` and ``test``). ``record``: what
    the run folder remembers (``plan.json``): a rerun with another record is refused.
    """

    out: Path
    source: str
    sizes: Mapping[str, Any]
    seed: int
    record: Mapping[str, Any]
    world: str | None = None
    planted: bool = False
    image_features: str = "bands"
    model: Path | None = None
    train: Path | None = None
    test: Path | None = None
    catalog: Path | str | None = None  # a file, a folder, a glob; several files said in words (record: the list)
    images: Path | None = None
    test_fraction: float = 0.25
    image_tokenizer: Path | None = None
    block: int | None = None
    device: str = "cpu"
    dtype: str = "float32"
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def trains_standin(self) -> bool:
        """Whether a stand-in is trained here (synthetic galaxies, or a catalogue without ``model``)."""
        return self.source == "synthetic" or (self.source == "catalog" and self.model is None)


def check_sizes(sizes: Mapping[str, Any] | None) -> dict[str, Any]:
    """:data:`QUICK` updated with ``sizes``; unknown keys or non-positive counts are a ConfigError."""
    sizes = dict(sizes or {})
    unknown = set(sizes) - set(QUICK)
    if unknown:
        raise ConfigError(f"unknown size(s) {sorted(unknown)}; expected some of {sorted(QUICK)}.")
    sz = {**QUICK, **sizes}
    for k, v in sz.items():
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
            raise ConfigError(f"{k} must be a positive whole number; got {v!r}.")
    return sz


def data_files(data, images: str | Path | None = None) -> tuple[Path | str | list[Path], Path | None]:
    """``(catalogue, cut-outs)`` of ``--data``: a catalogue file, several (a list), a glob of catalogue files
    (given on as the pattern), or a folder holding DR10 sweep files (``sweep-*.fits``: given on as the folder) or
    ``catalog.fits``; unless ``images`` is given, the folder's ``images.npy`` / ``images.fits`` cube or its
    ``cutouts/`` folder of per-galaxy FITS files (:mod:`astro.data.cutout_folder`), when there."""
    from .data.sweeps import SWEEP_GLOB, catalogue_files

    if isinstance(data, (list, tuple)):
        return [Path(p) for p in data], None if images is None else Path(images)
    if isinstance(data, str) and not Path(data).exists() and any(c in data for c in "*?["):
        catalogue_files(data)  # a glob that matches nothing: refused here
        return data, None if images is None else Path(images)
    data = Path(data)
    if not data.is_dir():
        return data, None if images is None else Path(images)
    sweeps = sorted(data.glob(SWEEP_GLOB))
    found = [data / n for n in DATA_CATALOG_NAMES if (data / n).is_file()]
    if not sweeps and not found:
        raise ConfigError(
            f"--data {data} is a folder without a catalogue; put your Legacy Survey catalogue there "
            f"as {' or '.join(DATA_CATALOG_NAMES)} or as DR10 sweep files ({SWEEP_GLOB}) (cut-outs as "
            f"{' or '.join(DATA_IMAGE_NAMES)}, or one FITS file per galaxy in {DATA_CUTOUT_FOLDER}/), "
            "or give the catalogue file itself."
        )
    if images is None:
        images = next((data / n for n in DATA_IMAGE_NAMES if (data / n).is_file()), None)
        if images is None and (data / DATA_CUTOUT_FOLDER).is_dir():
            images = data / DATA_CUTOUT_FOLDER
    return (data if sweeps else found[0]), None if images is None else Path(images)


def holds_catalogue(path: Path) -> bool:
    """Whether a folder holds what ``--data`` reads: ``catalog.fits`` or DR10 sweep files (``sweep-*.fits``)."""
    from .data.sweeps import SWEEP_GLOB

    return path.is_dir() and (
        any((path / n).is_file() for n in DATA_CATALOG_NAMES) or any(True for _ in path.glob(SWEEP_GLOB))
    )


def _source(model, train, test, catalog, images) -> str:
    given = [x is not None for x in (model, train, test)]
    if catalog is not None:
        if train is not None or test is not None:
            raise ConfigError(
                "--data (a catalogue) replaces --train and --test (its rows are split into both); "
                "give one or the other."
            )
        return "catalog"
    if images is not None:
        raise ConfigError("--images goes with --data (one cut-out per catalogue row).")
    if any(given) and not all(given):
        raise ConfigError(
            "give all of --model, --train and --test (an existing study), or none of them (synthesise and train here)."
        )
    return "given" if all(given) else "synthetic"


def resolve_settings(
    out: str | Path,
    *,
    sizes: Mapping[str, Any] | None = None,
    seed: int = 0,
    model: str | Path | None = None,
    train: str | Path | None = None,
    test: str | Path | None = None,
    image_tokenizer: str | Path | None = None,
    block: int | None = None,
    catalog: str | Path | list | None = None,
    images: str | Path | None = None,
    test_fraction: float = 0.25,
    world: str | None = None,
    planted: bool = False,
    image_features: str | None = None,
    device: str = "cpu",
    dtype: str = "float32",
) -> StudySettings:
    """Check the options of a study and resolve them into :class:`StudySettings`; reads no data.

    The parameters are those of :func:`astro.run.run_resumable_study`. Raises ``ConfigError``
    (what is wrong and how to fix it) for combinations that cannot run, ``FileNotFoundError``
    for a catalogue, cut-outs or model that is not there.
    """
    out = Path(out)
    sz = check_sizes(sizes)
    if dtype != "float32":  # unknown, or half precision the device lacks
        from .models.aion import check_dtype  # lazy: torch and aion

        check_dtype(dtype, device)
    source = _source(model, train, test, catalog, images)
    if source != "synthetic" and (planted or world):
        raise ConfigError(
            "--world and --planted shape a synthetic run; a catalogue or an existing study "
            "(--model/--train/--test) brings its own galaxies."
        )
    if source == "given" and image_features:
        raise ConfigError("--image-features shapes the stand-in trained here; an existing study brings its model.")
    # lazy: astro.synthetic pulls astropy and scipy (about 2 s), and the parser of every `scimech`
    # command imports this module (astro.study) for its defaults
    from .synthetic import world_config

    world = world or DEFAULT_WORLD
    world_config(world)  # an unknown world fails before anything runs
    feats = image_features or (IMAGE_FEATURES.get(world, "bands") if source == "synthetic" else "bands")
    if feats not in ("bands", "colours"):
        raise ConfigError(f"image_features must be 'bands' or 'colours'; got {feats!r}.")
    record = dict(
        sz,
        seed=int(seed),
        source=source,
        image_tokenizer=str(image_tokenizer) if image_tokenizer else None,
        world=world if source == "synthetic" else None,
        planted=bool(planted),
        image_features=feats,
        dtype=dtype,
    )
    paths: dict[str, Path | None] = {}
    if source == "catalog":
        if not 0 < test_fraction < 1:
            raise ConfigError(f"test_fraction must be between 0 and 1; got {test_fraction}.")
        from .data.sweeps import catalogue_files, source_text

        catalogue_files(catalog)  # a file, folder or glob that is not there: refused before anything runs
        for f in (images, model):
            if f is not None and not Path(f).exists():
                raise FileNotFoundError(f"No file or folder at {f}.")
        many = [Path(f).resolve() for f in catalog] if isinstance(catalog, (list, tuple)) else None
        paths = dict(
            catalog=source_text(many) if many else Path(catalog).resolve(),
            images=Path(images).resolve() if images else None,
            model=Path(model).resolve() if model is not None else None,
        )
        record.update(
            catalog=[str(f) for f in many] if many else str(paths["catalog"]),
            images=str(paths["images"]) if images else None,
            test_fraction=float(test_fraction),
            n_train=None,
            n_test=None,
            model=str(paths["model"]) if model is not None else None,
        )
    if source == "given":
        paths = dict(model=Path(model).resolve(), train=Path(train).resolve(), test=Path(test).resolve())
        record.update(
            model=str(paths["model"]),
            train=str(paths["train"]),
            test=str(paths["test"]),
            n_train=None,
            n_test=None,
            epochs=None,
            batch_size=None,
            world=None,
            planted=None,
            image_features=None,
        )
    return StudySettings(
        out=out,
        source=source,
        sizes=sz,
        seed=int(seed),
        record=record,
        world=world if source == "synthetic" else None,
        planted=bool(planted),
        image_features=feats,
        test_fraction=float(test_fraction),
        block=block,
        device=device,
        dtype=dtype,
        image_tokenizer=Path(image_tokenizer).resolve() if image_tokenizer else None,
        **paths,
    )


#: bench/RESULTS.md (astro, `python -m bench.bench_astro`): the four head interventions of one block cost
#: 14 ms per test galaxy on one worker (a 60-galaxy unit 0.84 s)
_BENCH_MS_PER_GALAXY = 14.0


def settings_from_args(args: argparse.Namespace) -> StudySettings:
    """:class:`~astro.plan.StudySettings` from the options of ``scimech astro study``: the
    sizes of ``--size``, each overridden by its own option (``--n-train`` ...)."""
    sizes = dict(SIZES[args.size])
    sizes.update({k: getattr(args, k) for k in SIZE_KEYS if getattr(args, k, None) is not None})
    catalog, images = data_files(args.data, args.images) if args.data is not None else (None, args.images)
    return resolve_settings(
        args.out,
        sizes=sizes,
        seed=args.seed,
        model=args.model,
        train=args.train,
        test=args.test,
        image_tokenizer=args.image_tokenizer,
        block=args.block,
        catalog=catalog,
        images=images,
        test_fraction=args.test_fraction,
        world=args.world,
        planted=args.planted,
        image_features=args.image_features,
        device=args.device,
        dtype=getattr(args, "dtype", "float32"),
    )


def plan_of(settings: StudySettings, size: str | None = None) -> Plan:
    """The :class:`~scimech.studies.contract.Plan` of resolved settings: the intervention units over the test galaxies."""
    s, sz = settings, settings.sizes
    if s.source == "catalog":
        sizes = {
            "galaxies": f"the catalogue {s.catalog}"
            + (f" with cut-outs {s.images}" if s.images else "")
            + f", {s.test_fraction:.0%} of its objects held out for testing"
        }
    elif s.source == "synthetic":
        sizes = {
            "galaxies": f"synthetic, {sz['n_train']} training and {sz['n_test']} test, world {s.world}"
            + (" (planted stand-in)" if s.planted else "")
        }
    else:
        sizes = {"model": str(s.model), "training galaxies": str(s.train), "test galaxies": str(s.test)}
    if s.trains_standin:
        sizes["training"] = f"{sz['epochs']} epochs, batch {sz['batch_size']}"
    if size:
        sizes["size"] = size
    sizes["bootstrap resamples"] = sz["n_bootstrap"]
    sizes["block"] = (
        "every encoder block (findings 3 and 4 read the one the layer probes localise the gain to)"
        if s.block is None
        else s.block
    )
    sizes["device"] = s.device
    sizes["dtype"] = s.dtype
    chunk = sz["chunk_size"]
    n_test = sz["n_test"] if s.source == "synthetic" else None
    units = (
        [f"galaxies {i}-{min(i + chunk, n_test) - 1}" for i in range(0, n_test, chunk)]
        if n_test
        else [f"{chunk} test galaxies per unit (count known once the data are read)"]
    )
    return Plan(
        "astro study",
        units,
        sizes,
        _BENCH_MS_PER_GALAXY * chunk / 1000 if n_test else None,
        "head interventions of one block per unit, from bench/RESULTS.md's 14 ms per galaxy (one unit per block "
        "and chunk: every encoder block unless --block names one); training not included",
        str(s.out),
        settings=s,
    )
