"""Running an astro study as resumable, distributable units (``scimech astro study``).

The study is cut into the units of :mod:`astro.units`, each saved in a
:class:`scimech.run.results.UnitStore` under ``<out>/units``, so a run can go to a Dask cluster
and a rerun with the same ``--out`` redoes only the units that did not finish: the samples
(``<out>/train.fits``, ``<out>/test.fits``), the stand-in (``<out>/model/``) and the head
interventions over chunks of the test set. What remains (classical photo-z, metrics, probes,
radial maps, the bias signatures: :func:`astro.evidence.gather_evidence`) is cheap and runs in
the calling process from the saved files; the results are saved under ``<out>/study``.
Which folder may be resumed is :mod:`astro.resume`'s call.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from scimech.errors import ConfigError
from scimech.run.parallel import map_units
from scimech.run.results import UnitStore
from scimech.studies.reading import Reading

from .data.files import load_adapter, load_sample, save_study
from .evidence import gather_evidence
from .measures import chunk_bounds
from .measures.assumptions import ATTR
from .models.shipped import choose_shipped
from .plan import STANDIN_STAMP, StudySettings, resolve_settings
from .resume import claim_folder
from .units import catalog_unit, interventions_unit, synth_unit, train_unit

__all__ = ["run_resumable_study", "run_settings", "with_standin", "READING_FILE", "STANDIN_CHOICES"]

#: what the reader read from a catalogue (scimech.studies.reading.Reading as JSON), in the run folder
READING_FILE = "reading.json"

Log = Callable[[str], None]

#: what a synthetic study studies: the stand-in shipped for its world (``astro.models.shipped``), or one
#: trained here (``--train-afresh``)
STANDIN_CHOICES = ("shipped", "train")


def run_resumable_study(
    out: str | Path,
    *,
    sizes: Mapping[str, Any] | None = None,
    seed: int = 0,
    model: str | Path | None = None,
    train: str | Path | None = None,
    test: str | Path | None = None,
    image_tokenizer: str | Path | None = None,
    block: int | None = None,
    client=None,
    catalog: str | Path | None = None,
    images: str | Path | None = None,
    test_fraction: float = 0.25,
    world: str | None = None,
    planted: bool = False,
    image_features: str | None = None,
    device: str = "cpu",
    dtype: str = "float32",
    standin: str | None = None,
    log: Log | None = None,
) -> tuple[dict[str, xr.Dataset], dict[str, float]]:
    """The whole astro study as resumable units; results saved under ``out/study``.

    Parameters
    ----------
    out
        Run folder: ``units/`` (the unit store), ``plan.json``, samples and model when
        synthesised here, ``study/*.nc``.
    sizes
        ``n_train``, ``n_test``, ``epochs``, ``batch_size`` (synthetic run), ``n_bootstrap``,
        ``chunk_size`` (test galaxies per intervention unit); missing keys from
        :data:`astro.plan.QUICK`.
    model, train, test
        An existing checkpoint folder and samples: then nothing is synthesised or trained.
    catalog, images, test_fraction
        Your Legacy Survey catalogue (and ``(N, 4, H, W)`` cut-outs) instead of synthetic
        galaxies (:func:`astro.data.catalog.read_legacy_survey`; it needs ``Z`` and ``A_V``
        columns): its objects are split at random (``seed``) into ``test_fraction`` test and
        training galaxies; with ``model`` that checkpoint is studied, without it a stand-in
        is trained on the training rows (cut-outs centre-cropped to 24 x 24 pixels).
    client
        A Dask client (``scimech.run.parallel.client_from_args``), or ``None`` to run the units
        here one after the other.
    world
        The synthetic world (:data:`astro.synthetic.WORLDS`) of a synthetic run (default
        :data:`astro.plan.DEFAULT_WORLD`).
    planted
        Train the planted stand-in (:class:`astro.models.planted.PlantedAION`) instead of
        the stand-in; the report then compares what the study found with what was planted.
    image_features
        Features of the stand-in's patch tokenizer (``"bands"`` or ``"colours"``); default
        :data:`astro.plan.IMAGE_FEATURES` of the world.
    device
        Torch device of the training and the forward passes (``"cpu"``, ``"cuda"``, ...).
    dtype
        Floating-point type of the studied transformer's forward passes (``"float32"``,
        ``"bfloat16"``, ``"float16"``; :data:`astro.models.aion.DTYPES`); a stand-in trained here is
        trained in float32. Probes and read-outs see float32.
    standin
        Synthetic galaxies only: ``"shipped"`` studies the stand-in shipped for the world
        (:mod:`astro.models.shipped`; trained here instead, with the reason logged, where none may be
        used), ``"train"`` trains one here. Default: ``"train"`` when ``sizes`` names ``epochs`` or
        ``batch_size`` (a training was asked for), else ``"shipped"``.

    Returns
    -------
    (results, timings)
        The named datasets of :func:`astro.evidence.gather_evidence` and seconds per phase.
    """
    settings = resolve_settings(
        out,
        sizes=sizes,
        seed=seed,
        model=model,
        train=train,
        test=test,
        image_tokenizer=image_tokenizer,
        block=block,
        catalog=catalog,
        images=images,
        test_fraction=test_fraction,
        world=world,
        planted=planted,
        image_features=image_features,
        device=device,
        dtype=dtype,
    )
    if standin is None:
        standin = "train" if {"epochs", "batch_size"} & set(sizes or {}) else "shipped"
    settings = dataclasses.replace(settings, extra={**settings.extra, "standin": standin})
    return run_settings(settings, client=client, log=log)


def with_standin(settings: StudySettings, log: Log | None = None) -> StudySettings:
    """``settings`` with the model of a synthetic study decided: the shipped stand-in of its world
    (``extra["shipped"]``, and the record's ``standin`` / ``standin_weights``) when
    ``extra["standin"]`` is ``"shipped"`` (the default) and it may be used, else one trained here
    (record ``standin = "trained here"``; the reason the shipped one was refused is logged and kept as
    ``extra["standin_reason"]``). Other sources are returned unchanged."""
    s, say = settings, log or (lambda *_: None)
    if s.source != "synthetic" or "shipped" in s.extra:
        return s
    asked = s.extra.get("standin", "shipped")
    if asked not in STANDIN_CHOICES:
        raise ConfigError(f"standin must be one of {', '.join(STANDIN_CHOICES)}; got {asked!r}.")
    reason = "a stand-in trained here was asked for (--train-afresh, --epochs or --batch-size)"
    if asked == "shipped":
        choice = choose_shipped(str(s.world), s.planted, s.image_features)
        if choice.shipped is not None:
            say(f"model: {choice.shipped.summary()}")
            record = {
                **s.record,
                "standin": f"shipped {choice.shipped.name}",
                "standin_weights": choice.shipped.record["weights_fingerprint"],
            }
            return dataclasses.replace(s, record=record, extra={**s.extra, "shipped": choice.shipped})
        reason = choice.reason
        say(f"the shipped stand-in is not used: {reason}; training a stand-in here")
    record = {**s.record, "standin": "trained here"}
    return dataclasses.replace(s, record=record, extra={**s.extra, "shipped": None, "standin_reason": reason})


def run_settings(
    settings: StudySettings, *, client=None, log: Log | None = None
) -> tuple[dict[str, xr.Dataset], dict[str, float]]:
    """Run resolved :class:`~astro.plan.StudySettings` (see :func:`run_resumable_study`)."""
    say = log or (lambda *_: None)
    s = with_standin(settings, say)
    shipped = s.extra.get("shipped")
    adapter = None
    if s.model is not None:  # bad inputs fail before the folder is claimed
        adapter = load_adapter(s.model, s.image_tokenizer, device=s.device, dtype=s.dtype)
    if s.source == "given":
        train_s, test_s = load_sample(s.train), load_sample(s.test)
    claim_folder(s)
    store = UnitStore(s.out / "units")
    timings: dict[str, float] = {}
    train, test, model = s.train, s.test, s.model
    if s.source in ("synthetic", "catalog"):  # absolute paths: units may run on other machines sharing the filesystem
        base = s.out.resolve()
        train, test = base / "train.fits", base / "test.fits"
        t = time.perf_counter()
        if s.source == "synthetic":
            _synthesise(s, train, test, store, client, say)
            timings["synthesize"] = time.perf_counter() - t
        else:
            _split_catalogue(s, train, test, store, client, say)
            timings["read catalogue"] = time.perf_counter() - t
    if shipped is not None:
        model = shipped.folder
    elif s.trains_standin:
        t = time.perf_counter()
        model = s.out.resolve() / "model"
        say("train the stand-in (unit train)")
        map_units(
            train_unit,
            {
                "train": dict(
                    train_path=str(train),
                    model_dir=str(model),
                    epochs=int(s.sizes["epochs"]),
                    batch_size=int(s.sizes["batch_size"]),
                    seed=s.seed,
                    planted=s.planted,
                    image_features=s.image_features,
                    device=s.device,
                )
            },
            store,
            client=client,
            desc="astro train",
        )
        timings["train"] = time.perf_counter() - t
    t = time.perf_counter()
    if s.source in ("synthetic", "catalog"):
        if adapter is None:  # the stand-in trained here
            adapter = load_adapter(Path(model).resolve(), s.image_tokenizer, device=s.device, dtype=s.dtype)
        train_s, test_s = load_sample(train), load_sample(test)
    intervene = _intervener(s, Path(model).resolve(), train, test, len(test_s), store, client, say)
    res = gather_evidence(
        adapter,
        train_s,
        test_s,
        n_bootstrap=int(s.sizes["n_bootstrap"]),
        seed=s.seed,
        block=s.block,
        log=say,
        intervene=intervene,
    )
    timings["study"] = time.perf_counter() - t
    if "predictions" in res:  # "catalog": real galaxies, no planted truth to report
        res["predictions"].attrs["galaxies"] = s.source
        res["predictions"].attrs.update(model_provenance(s))
    save_study(res, s.out / "study", config=dict(s.record), seed=s.seed)
    return res, timings


def model_provenance(s: StudySettings) -> dict[str, str]:
    """Which model a study read, as attributes of its ``predictions`` (what the report prints):
    ``model_origin`` (``"shipped"``, ``"trained here"`` or ``"given"``) and ``model_note`` (one line)."""
    shipped = s.extra.get("shipped")
    if shipped is not None:
        return {"model_origin": "shipped", "model_note": f"Model: the {shipped.summary()}."}
    if s.trains_standin:
        sz = s.sizes
        why = s.extra.get("standin_reason")
        note = (
            f"Model: a stand-in trained here ({sz['epochs']} epochs of batch {sz['batch_size']} on the "
            "study's training galaxies)" + (f", because {why}." if why else ".")
        )
        return {"model_origin": "trained here", "model_note": note}
    return {"model_origin": "given", "model_note": f"Model: {s.model}, studied as it is (nothing trained)."}


def _synthesise(s: StudySettings, train: Path, test: Path, store: UnitStore, client, say: Log) -> None:
    say("synthesise (units synth/train, synth/test)")
    map_units(
        synth_unit,
        {
            "synth/train": dict(path=str(train), n=int(s.sizes["n_train"]), seed=s.seed, world=s.world),
            "synth/test": dict(path=str(test), n=int(s.sizes["n_test"]), seed=s.seed + 1000, world=s.world),
        },
        store,
        client=client,
        desc="astro synth",
    )


def _split_catalogue(s: StudySettings, train: Path, test: Path, store: UnitStore, client, say: Log) -> None:
    say(f"read and split the catalogue {s.catalog} (unit catalog/split)")
    got = map_units(
        catalog_unit,
        {
            "catalog/split": dict(
                catalog=s.record["catalog"],
                images=s.record["images"],
                train_path=str(train),
                test_path=str(test),
                test_fraction=s.test_fraction,
                seed=s.seed,
                stamp=None if s.model is not None else STANDIN_STAMP,
            )
        },
        store,
        client=client,
        desc="astro catalogue",
    )["catalog/split"]
    for w in got["warnings"]:
        say(w)
    if "reading" in got:  # what was read, said back: the report on real data opens with it
        reading = got["reading"]
        Reading.from_dict(json.loads(reading) if isinstance(reading, str) else reading).save(s.out / READING_FILE)
    say(f"{got['n_train']} training / {got['n_test']} test galaxies; {got['n_rejected']} rows dropped")


def _intervener(
    s: StudySettings, model: Path, train: Path, test: Path, n_test: int, store: UnitStore, client, say: Log
) -> Callable[[int], xr.Dataset]:
    """``intervene(blocks)``: the head interventions of each block as resumable units over chunks of the test
    set (one unit per block and chunk), stacked along ``block``."""
    tok = str(s.image_tokenizer) if s.image_tokenizer else None
    chunk = s.sizes.get("chunk_size")

    def intervene(blocks: int | list[int]) -> xr.Dataset:
        one = isinstance(blocks, (int, np.integer))
        blocks = [int(blocks)] if one else [int(b) for b in blocks]
        spans = chunk_bounds(n_test, chunk)
        units = {
            f"interventions/block={blk}/rows={a:07d}-{b:07d}": dict(
                model_dir=str(model),
                train_path=str(train),
                test_path=str(test),
                start=a,
                stop=b,
                block=int(blk),
                seed=s.seed,
                image_tokenizer=tok,
                device=s.device,
                dtype=s.dtype,
            )
            for blk in blocks
            for a, b in spans
        }
        say(f"head interventions in blocks {list(blocks)}: {len(units)} units of <= {chunk} galaxies")
        got = map_units(interventions_unit, units, store, client=client, desc="astro intervention chunks")
        per_block = []
        for blk in blocks:
            keys = [f"interventions/block={blk}/rows={a:07d}-{b:07d}" for a, b in spans]
            part = xr.concat([got[k] for k in keys], "sample", combine_attrs="drop")
            per_block.append(part.expand_dims(block=[int(blk)]).transpose("intervention", "block", "head", "sample"))
        raw = xr.concat(per_block, "block", data_vars="minimal", coords="different", compat="equals")
        raw.attrs.update(block=[int(b) for b in blocks], seed=s.seed)
        if one:  # one block asked for as a number: its dataset as the head study of one block writes it
            raw = raw.isel(block=0, drop=True)
            raw.attrs.update(block=blocks[0])
        first = got[next(iter(units))].attrs  # the chunk at galaxy 0 measured what the verbs assumed
        if ATTR in first:
            raw.attrs[ATTR] = first[ATTR]
        return raw

    return intervene
