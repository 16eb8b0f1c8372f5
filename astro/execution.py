"""Resumable, distributable execution of the astro study (``scimech astro study``).

The study is cut into independent *units*, each a task of
:func:`scimech.parallel.map_units` saved in a :class:`scimech.results.UnitStore` under
``<out>/units``, so a run can go to a Dask cluster and a rerun with the same ``--out``
redoes only the units that did not finish:

* ``synth/train``, ``synth/test``: the synthetic samples (``<out>/train.fits``,
  ``<out>/test.fits``, written atomically), or ``catalog/split``: your catalogue
  (:func:`astro.catalog.read_legacy_survey`) split at random into those two files;
* ``train``: the stand-in AION (``<out>/model/``, written to a temporary sibling and moved
  into place, so a killed training leaves no model that looks finished);
* ``interventions/block=B/rows=A-Z``: the head study of block ``B`` on test galaxies
  ``A:Z`` (:func:`astro.analysis.intervention_chunk`: zero / mean / resample ablation and
  patching of every head), the part that grows with the catalogue.

What remains (classical photo-z, metrics, probes, radial maps, the bias signatures) is cheap
and runs in the calling process from the saved files. Units run single-threaded (torch and
BLAS / OpenMP pools), so their results do not depend on where they ran; parallelism comes
from running several units at once (``--workers N``, ``--cluster``, ``--scheduler``).

A run folder remembers what it was made with (``<out>/plan.json``); rerunning into it with
other sizes, seed or inputs is refused rather than mixing units of two studies. It is also
keyed by a fingerprint of its inputs (:func:`input_fingerprint`, ``<out>/data_fingerprint.txt``):
the synthetic generator (its world and a small draw of it), or the content of your catalogue,
cut-outs, samples, model and tokenizer. Under the same settings but another fingerprint (a
changed generator, one changed value in a file) the folder's results are moved to
``<out>/stale-<fingerprint>/`` with a warning and the study starts afresh.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from scimech.errors import ConfigError

__all__ = ["QUICK", "FULL", "PLAN_NAME", "IMAGE_FEATURES", "DEFAULT_WORLD", "load_sample", "save_sample",
           "load_adapter", "train_standin", "synth_unit", "catalog_unit", "train_unit", "interventions_unit",
           "run_study", "save_study", "load_study", "STUDY_NAMES", "STANDIN_STAMP", "input_fingerprint",
           "PROBE_GALAXIES"]

#: sizes of the quick (demo/test) and full runs; ``chunk_size``: test galaxies per intervention unit
QUICK = dict(n_train=1600, n_test=600, epochs=40, batch_size=64, n_bootstrap=200, chunk_size=150)
FULL = dict(n_train=8000, n_test=2000, epochs=40, batch_size=128, n_bootstrap=1000, chunk_size=500)
PLAN_NAME = "plan.json"
#: the synthetic world of ``--quick`` / ``--full`` runs unless ``world=`` says otherwise
DEFAULT_WORLD = "degenerate"
#: patch-tokenizer features the stand-in uses in each world (see astro.models.standin.PatchTokenizer)
IMAGE_FEATURES = {"standard": "bands", "degenerate": "colours"}
STUDY_NAMES = ("advantage", "layers", "head_probes", "radial", "interventions", "bias", "predictions")
#: keys of a plan that decide what the units compute (the rest may change between reruns)
_PLAN_KEYS = ("source", "n_train", "n_test", "epochs", "batch_size", "seed", "model", "train", "test",
              "image_tokenizer", "catalog", "images", "test_fraction", "world", "planted", "image_features")
#: what a plan written before a key existed meant by it
_PLAN_DEFAULTS = {"world": "standard", "planted": False, "image_features": "bands"}
#: galaxies of the generator's draw a synthetic run's fingerprint hashes (the generator as it is now)
PROBE_GALAXIES = 32
#: cut-out size [pixels] of the stand-in's image grid (6 x 6 tokens of 4 x 4 pixels)
STANDIN_STAMP = 24
#: catalogue columns the study needs besides the survey's own
STUDY_TRUTH = {"z": "a redshift column Z (or REDSHIFT, Z_SPEC), e.g. DESI spectroscopic redshifts joined to the rows",
               "a_v": "an attenuation column A_V (or AV) in mag, e.g. from the DESI FastSpecFit value-added catalogue"}


# ---------------------------------------------------------------- files
def load_sample(path: str | Path, rows: slice | None = None):
    """A :class:`~astro.synthetic.GalaxySample` from ``.fits`` or ``.zarr`` (optionally rows ``rows``)."""
    from .synthetic import GalaxySample

    path = Path(path)
    s = GalaxySample.from_zarr(path) if path.suffix == ".zarr" or path.is_dir() else GalaxySample.from_fits(path)
    return s if rows is None else s[rows]


def save_sample(sample, path: str | Path) -> Path:
    """Write a sample to ``.zarr`` or (any other suffix) FITS, atomically."""
    path = Path(path)
    return sample.to_zarr(path) if path.suffix == ".zarr" else sample.to_fits(path)


def load_adapter(folder: str | Path, image_tokenizer: str | Path | None = None):
    """:class:`~astro.models.aion.AIONRedshift` from a stand-in or AION-1 checkpoint folder.

    The image tokenizer is ``image_tokenizer`` (a stand-in ``.npz``) if given, else the
    folder's ``image_tokenizer.npz`` (stand-in), else its ``codecs/image/`` (AION-1), else none.
    """
    from .models import standin as M
    from .models.aion import AIONRedshift

    folder = Path(folder)
    tok_path = Path(image_tokenizer) if image_tokenizer else folder / "image_tokenizer.npz"
    if image_tokenizer and not tok_path.is_file():
        raise ConfigError(f"--image-tokenizer {tok_path} does not exist; give the image_tokenizer.npz written "
                          "by `scimech astro train`, or leave it out to use the checkpoint's own.")
    tok = M.PatchTokenizer.load(tok_path) if tok_path.is_file() else None
    return AIONRedshift.from_folder(folder, image_tokenizer=tok)


def train_standin(train, *, epochs: int, batch_size: int = 64, seed: int = 0, lr: float = 3e-3, n_views: int = 10,
                  image_features: str = "bands", planted: bool = False, log=None):
    """Fit tokenizers on ``train`` and train a stand-in AION (mode "both"). Returns (adapter, history).

    ``image_features``: the :class:`~astro.models.standin.PatchTokenizer` features (``"bands"``
    or ``"colours"``). ``planted``: train a :class:`~astro.models.planted.PlantedAION` instead
    (image tokens reach the redshift only through head 1 of block 0; head 2 of block 0
    encodes colours and is inert), see :func:`astro.models.planted.train_planted`.

    ``n_views``: the epochs cycle through this many views of the training set, the measured
    one and ``n_views - 1`` with the fluxes redrawn within their errors, (e1, e2) rotated and
    size / MW E(B-V) jittered (:func:`astro.models.standin.noisy_views`). Without it the
    stand-in memorises the training galaxies (e1, e2 and E(B-V) together identify each one):
    measured at the quick size, sigma_NMAD 0.044-0.057 on the training set vs 0.108 on the test set.
    """
    from .models import standin as M
    from .models.aion import AIONRedshift

    if planted:
        from .models.planted import train_planted

        return train_planted(train, epochs=epochs, batch_size=batch_size, seed=seed, lr=lr, n_views=n_views,
                             image_features=image_features, log=log)
    codecs = M.fit_codecs(train.catalog, seed=seed)
    tok = M.PatchTokenizer(seed=seed, features=image_features).fit(train.images)
    model = M.build(seed=seed, codecs=codecs, basis="code")
    ad = AIONRedshift(model, codecs, tok)
    tokens = M.noisy_views(ad, train.catalog, train.images, n_views, seed=seed) if n_views > 1 else \
        ad.tokenize(train.catalog, train.images)
    hist = M.train(ad, tokens, np.asarray(train.catalog["z"], float), epochs=epochs, batch_size=batch_size,
                   seed=seed, lr=lr, log=log)
    hist["n_views"] = int(n_views)
    return ad, hist


def save_study(res: Mapping[str, xr.Dataset], out: Path, config: dict | None = None, seed: int = 0) -> None:
    """One netCDF per study part under ``out`` (atomic, with provenance)."""
    from scimech import results

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    for name, ds in res.items():
        results.save(ds, out / f"{name}.nc", config=config, seed=seed)


def load_study(out: Path) -> dict[str, xr.Dataset]:
    """The parts written by :func:`save_study` (``CheckpointError`` naming a missing one)."""
    from scimech import results

    return {n: results.load(Path(out) / f"{n}.nc") for n in STUDY_NAMES}


@contextmanager
def _single_thread():
    """torch and the BLAS / OpenMP pools (numpy, scikit-learn) on one thread, restored after."""
    import torch
    from threadpoolctl import threadpool_limits

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with threadpool_limits(1):
            yield
    finally:
        torch.set_num_threads(n)


# ---------------------------------------------------------------- units
def synth_unit(path: str, n: int, seed: int, world: str = "standard") -> dict[str, Any]:
    """Draw ``n`` synthetic galaxies (catalogue + images) of ``world`` with ``seed`` and write them to ``path``."""
    from .synthetic import make_galaxies

    t0 = time.perf_counter()
    with _single_thread():
        s = make_galaxies(int(n), seed=int(seed), world=world)
    save_sample(s, path)
    return {"file": str(path), "n": len(s), "seed": int(seed), "world": world, "seconds": time.perf_counter() - t0}


def catalog_unit(catalog: str, images: str | None, train_path: str, test_path: str, test_fraction: float,
                 seed: int, stamp: int | None) -> dict[str, Any]:
    """Read a Legacy Survey catalogue (and cut-outs), split its rows at random (``seed``) into
    ``test_fraction`` test and the rest training galaxies, and write both samples."""
    import warnings

    from scimech.errors import MissingVariableError

    from .catalog import read_legacy_survey

    with warnings.catch_warnings(record=True) as caught:   # the dropped-rows count goes into the result
        warnings.simplefilter("always")
        s = read_legacy_survey(catalog, images, stamp=stamp)
    lacking = [why for k, why in STUDY_TRUTH.items() if k not in s.catalog.colnames]
    if lacking:
        raise MissingVariableError(f"{catalog}: the study scores redshifts and reads dust, so it needs "
                                   f"{'; '.join(lacking)}.")
    n = len(s)
    n_test = int(round(test_fraction * n))
    if not 0 < n_test < n:
        raise ConfigError(f"--test-fraction {test_fraction} leaves {n_test} of {n} usable galaxies for the test "
                          "set; choose a fraction that keeps both sets non-empty.")
    order = np.random.default_rng(seed).permutation(n)
    save_sample(s[np.sort(order[n_test:])], train_path)
    save_sample(s[np.sort(order[:n_test])], test_path)
    return {"n_train": n - n_test, "n_test": n_test, "n_rejected": int(s.meta["n_rejected"]),
            "rejected": s.meta["rejected"], "warnings": [str(w.message) for w in caught]}


def train_unit(train_path: str, model_dir: str, epochs: int, batch_size: int, seed: int, planted: bool = False,
               image_features: str = "bands") -> dict[str, Any]:
    """Train the stand-in (or the planted stand-in) on ``train_path`` and move the checkpoint into
    ``model_dir`` when complete."""
    from .models import standin as M

    model_dir = Path(model_dir)
    with _single_thread():
        ad, hist = train_standin(load_sample(train_path), epochs=int(epochs), batch_size=int(batch_size),
                                 seed=int(seed), planted=bool(planted), image_features=image_features)
    model_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{model_dir.name}.", suffix=".tmp", dir=model_dir.parent))
    try:
        M.save(ad, tmp / "model")
        (tmp / "model" / "history.json").write_text(json.dumps(hist))
        if model_dir.exists():
            os.replace(model_dir, tmp / "previous")      # same folder: atomic; removed with tmp
        os.replace(tmp / "model", model_dir)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return hist


def interventions_unit(model_dir: str, train_path: str, test_path: str, start: int, stop: int, block: int,
                       seed: int, n_reference: int = 256, batch_size: int = 256,
                       methods: tuple[str, ...] = ("zero", "mean", "resample"),
                       image_tokenizer: str | None = None) -> xr.Dataset:
    """Head interventions of ``block`` on test galaxies ``start:stop`` (see :func:`astro.analysis.intervention_chunk`)."""
    from . import analysis as AN

    t0 = time.perf_counter()
    with _single_thread():
        ad = load_adapter(model_dir, image_tokenizer)
        test = load_sample(test_path, rows=slice(int(start), int(stop)))
        train = load_sample(train_path, rows=slice(0, int(n_reference)))
        multi, phot, reference = AN.study_batches(ad, train, test, n_reference=int(n_reference))
        ds = AN.intervention_chunk(ad, multi, phot, reference, int(block), methods=tuple(methods), seed=int(seed),
                                   batch_size=int(batch_size), start=int(start))
    ds.attrs["seconds"] = time.perf_counter() - t0
    return ds


# ---------------------------------------------------------------- the run
def _check_plan(out: Path, plan: dict, *, write: bool = True) -> None:
    """Refuse a folder run with other settings; record ``plan`` in a new one (unless ``write`` is false)."""
    from scimech.results import atomic_write_text

    path = out / PLAN_NAME
    mine = {k: plan.get(k) for k in _PLAN_KEYS}
    if path.exists():
        try:
            old = json.loads(path.read_text())
        except json.JSONDecodeError:
            old = None                        # a torn plan: nothing was run under it yet
        if old is not None:
            old = {**(_PLAN_DEFAULTS if old.get("source") == "synthetic" else {}), **old}
            diff = {k: (old.get(k), mine[k]) for k in _PLAN_KEYS if old.get(k) != mine[k]}
            if diff:
                what = ", ".join(f"{k}: {a!r} there, {b!r} now" for k, (a, b) in diff.items())
                raise ConfigError(f"{out} holds a study run with other settings ({what}); its finished units would "
                                  "be mixed with this run's. Use another --out, or delete that folder to start afresh.")
            return
    if write:
        out.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, json.dumps(mine, indent=1, sort_keys=True))


def _sample_fingerprint(sample) -> str:
    from scimech.fingerprint import fingerprint

    cat = sample.catalog
    cols = {n: [str(getattr(cat[n], "unit", None)), np.asarray(cat[n])] for n in cat.colnames}
    return fingerprint(cols, sample.images, dict(sample.meta))


def input_fingerprint(plan: Mapping[str, Any]) -> tuple[str, dict[str, str]]:
    """The fingerprint a run folder is keyed by, and its parts, from the run's ``plan``.

    A synthetic run: ``generator``, the :class:`~astro.synthetic.SyntheticConfig` of its
    world and :data:`PROBE_GALAXIES` galaxies drawn with its seed now (catalogue, images,
    meta), so a changed world parameter or generator code changes it before any sample is
    drawn. A catalogue or given run: the content of each input file or folder (``catalog``,
    ``images``, ``train``, ``test``, ``model``); any run: that of ``image_tokenizer`` when given.
    The sizes, seed and paths are the plan's (:data:`PLAN_NAME`), refused when they differ.
    """
    from scimech.fingerprint import fingerprint

    parts: dict[str, str] = {}
    if plan["source"] == "synthetic":
        from .synthetic import make_galaxies, world_config

        with _single_thread():
            probe = make_galaxies(PROBE_GALAXIES, seed=int(plan["seed"]), world=plan["world"])
        parts["generator"] = fingerprint(world_config(plan["world"]), _sample_fingerprint(probe))
    for key in ("catalog", "images", "train", "test", "model", "image_tokenizer"):
        if plan.get(key):
            parts[key] = fingerprint(Path(plan[key]))
    return fingerprint(parts), parts


def _check_sizes(sizes: Mapping[str, Any] | None) -> dict[str, Any]:
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


def run_study(out: str | Path, *, sizes: Mapping[str, Any] | None = None, seed: int = 0,
              model: str | Path | None = None, train: str | Path | None = None, test: str | Path | None = None,
              image_tokenizer: str | Path | None = None, block: int | None = None, client=None,
              catalog: str | Path | None = None, images: str | Path | None = None, test_fraction: float = 0.25,
              world: str | None = None, planted: bool = False, image_features: str | None = None,
              log: Callable[[str], None] | None = None) -> tuple[dict[str, xr.Dataset], dict[str, float]]:
    """The whole astro study as resumable units; results saved under ``out/study``.

    Parameters
    ----------
    out
        Run folder: ``units/`` (the unit store), ``plan.json``, samples and model when
        synthesised here, ``study/*.nc``.
    sizes
        ``n_train``, ``n_test``, ``epochs``, ``batch_size`` (synthetic run), ``n_bootstrap``,
        ``chunk_size`` (test galaxies per intervention unit); missing keys from :data:`QUICK`.
    model, train, test
        An existing checkpoint folder and samples: then nothing is synthesised or trained.
    catalog, images, test_fraction
        Your Legacy Survey catalogue (and ``(N, 4, H, W)`` cut-outs) instead of synthetic
        galaxies (:func:`astro.catalog.read_legacy_survey`; it needs ``Z`` and ``A_V``
        columns): its rows are split at random (``seed``) into ``test_fraction`` test and
        training galaxies; with ``model`` that checkpoint is studied, without it a stand-in
        is trained on the training rows (cut-outs centre-cropped to 24 x 24 pixels).
    client
        A Dask client (``scimech.parallel.client_from_args``), or ``None`` to run the units
        here one after the other.
    world
        The synthetic world (:data:`astro.synthetic.WORLDS`) of a synthetic run (default
        :data:`DEFAULT_WORLD`).
    planted
        Train the planted stand-in (:class:`astro.models.planted.PlantedAION`) instead of
        the stand-in; the report then compares what the study found with what was planted.
    image_features
        Features of the stand-in's patch tokenizer (``"bands"`` or ``"colours"``); default
        :data:`IMAGE_FEATURES` of the world.

    Returns
    -------
    (results, timings)
        The named datasets of :func:`astro.analysis.run_study` and seconds per phase.
    """
    from scimech.fingerprint import set_aside_stale
    from scimech.parallel import map_units
    from scimech.results import UnitStore

    from . import analysis as AN

    say = log or (lambda *_: None)
    out = Path(out)
    sz = _check_sizes(sizes)
    given = [x is not None for x in (model, train, test)]
    if catalog is not None:
        if train is not None or test is not None:
            raise ConfigError("--catalog replaces --train and --test (its rows are split into both); give one or "
                              "the other.")
        source = "catalog"
    elif images is not None:
        raise ConfigError("--images goes with --catalog (one cut-out per catalogue row).")
    elif any(given) and not all(given):
        raise ConfigError("give all of --model, --train and --test (an existing study), or none of them "
                          "(synthesise and train here).")
    else:
        source = "given" if all(given) else "synthetic"
    from .synthetic import world_config

    if source != "synthetic" and (planted or world):
        raise ConfigError("--world and --planted shape a synthetic run; a catalogue or an existing study "
                          "(--model/--train/--test) brings its own galaxies.")
    if source == "given" and image_features:
        raise ConfigError("--image-features shapes the stand-in trained here; an existing study brings its model.")
    world = world or DEFAULT_WORLD
    world_config(world)                                   # an unknown world fails before anything runs
    feats = image_features or (IMAGE_FEATURES.get(world, "bands") if source == "synthetic" else "bands")
    if feats not in ("bands", "colours"):
        raise ConfigError(f"image_features must be 'bands' or 'colours'; got {feats!r}.")
    plan = dict(sz, seed=int(seed), source=source, image_tokenizer=str(image_tokenizer) if image_tokenizer else None,
                world=world if source == "synthetic" else None, planted=bool(planted), image_features=feats)
    if source == "catalog":
        if not 0 < test_fraction < 1:
            raise ConfigError(f"test_fraction must be between 0 and 1; got {test_fraction}.")
        for f in (catalog, images, model):
            if f is not None and not Path(f).exists():
                raise FileNotFoundError(f"No file or folder at {f}.")
        plan.update(catalog=str(Path(catalog).resolve()), images=str(Path(images).resolve()) if images else None,
                    test_fraction=float(test_fraction), n_train=None, n_test=None,
                    model=str(Path(model).resolve()) if model is not None else None)
    if source == "given":
        model, train, test = (Path(x).resolve() for x in (model, train, test))
        plan.update(model=str(model), train=str(train), test=str(test), n_train=None, n_test=None, epochs=None,
                    batch_size=None, world=None, planted=None, image_features=None)
        ad = load_adapter(model, image_tokenizer)        # bad inputs fail before the folder is claimed
        train_s, test_s = load_sample(train), load_sample(test)
    fp, parts = input_fingerprint(plan)
    _check_plan(out, plan, write=False)                  # other settings: refused
    inputs = [plan[k] for k in ("catalog", "images", "train", "test", "model", "image_tokenizer") if plan.get(k)]
    set_aside_stale(out, fp, parts=parts, keep=inputs)   # other data under the same settings: set aside
    _check_plan(out, plan)
    store = UnitStore(out / "units")
    timings: dict[str, float] = {}
    t = time.perf_counter()
    if source in ("synthetic", "catalog"):   # absolute paths: units may run on other machines sharing the filesystem
        base = out.resolve()
        train, test = base / "train.fits", base / "test.fits"
        if source == "synthetic":
            say("synthesise (units synth/train, synth/test)")
            map_units(synth_unit, {"synth/train": dict(path=str(train), n=int(sz["n_train"]), seed=int(seed), world=world),
                                   "synth/test": dict(path=str(test), n=int(sz["n_test"]), seed=int(seed) + 1000,
                                                      world=world)},
                      store, client=client, desc="astro synth")
            timings["synthesize"] = time.perf_counter() - t
        else:
            say(f"read and split the catalogue {catalog} (unit catalog/split)")
            got = map_units(catalog_unit, {"catalog/split": dict(
                catalog=plan["catalog"], images=plan["images"], train_path=str(train), test_path=str(test),
                test_fraction=float(test_fraction), seed=int(seed), stamp=None if model is not None else STANDIN_STAMP)},
                store, client=client, desc="astro catalogue")["catalog/split"]
            for w in got["warnings"]:
                say(w)
            say(f"{got['n_train']} training / {got['n_test']} test galaxies; {got['n_rejected']} rows dropped")
            timings["read catalogue"] = time.perf_counter() - t
        t = time.perf_counter()
    if source == "synthetic" or (source == "catalog" and model is None):
        model = out.resolve() / "model"
        say("train the stand-in (unit train)")
        map_units(train_unit, {"train": dict(train_path=str(train), model_dir=str(model), epochs=int(sz["epochs"]),
                                             batch_size=int(sz["batch_size"]), seed=int(seed), planted=bool(planted),
                                             image_features=feats)},
                  store, client=client, desc="astro train")
        timings["train"] = time.perf_counter() - t
        t = time.perf_counter()
    if source in ("synthetic", "catalog"):
        model = Path(model).resolve()
        ad = load_adapter(model, image_tokenizer)
        train_s, test_s = load_sample(train), load_sample(test)
    tok = str(Path(image_tokenizer).resolve()) if image_tokenizer else None

    def intervene(blk: int) -> xr.Dataset:
        units = {f"interventions/block={blk}/rows={a:07d}-{b:07d}":
                 dict(model_dir=str(model), train_path=str(train), test_path=str(test), start=a, stop=b, block=int(blk),
                      seed=int(seed), image_tokenizer=tok)
                 for a, b in AN.chunk_bounds(len(test_s), sz.get("chunk_size"))}
        say(f"head interventions in block {blk}: {len(units)} units of <= {sz.get('chunk_size')} galaxies")
        got = map_units(interventions_unit, units, store, client=client, desc="astro intervention chunks")
        raw = xr.concat([got[k] for k in units], "sample", combine_attrs="drop")
        raw.attrs.update(block=int(blk), seed=int(seed))
        return raw

    res = AN.run_study(ad, train_s, test_s, n_bootstrap=int(sz["n_bootstrap"]), seed=int(seed), block=block, log=say,
                       intervene=intervene)
    timings["study"] = time.perf_counter() - t
    save_study(res, out / "study", config=plan, seed=int(seed))
    return res, timings
