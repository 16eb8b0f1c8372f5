"""The resumable units of the astro study, each a task of :func:`scimech.run.parallel.map_units`:

* ``synth/train``, ``synth/test``: :func:`synth_unit`, the synthetic samples;
* ``catalog/split``: :func:`catalog_unit`, your catalogue's objects split at random into those two files;
* ``train``: :func:`train_unit`, the stand-in AION (written to a temporary sibling and moved
  into place, so a killed training leaves no model that looks finished);
* ``interventions/block=B/rows=A-Z``: :func:`interventions_unit`, the head study of block ``B``
  on test galaxies ``A:Z``, the part that grows with the catalogue; the unit at galaxy 0 also
  saves what its verbs assumed about the model (:mod:`astro.measures.assumptions`).

Units run single-threaded (torch and the BLAS / OpenMP pools), so their results do not depend
on where they ran; parallelism comes from running several units at once.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
import warnings
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
import xarray as xr
from threadpoolctl import threadpool_limits

from scimech.errors import MissingVariableError

from .data.catalog import read_legacy_survey
from .data.files import load_adapter, load_sample, save_sample
from .data.splits import MIN_TEST, split_catalogue  # noqa: F401  (MIN_TEST: re-exported)
from .measures import intervention_chunk, study_batches
from .models import standin
from .synthetic import make_galaxies
from .training import train_standin

__all__ = ["synth_unit", "catalog_unit", "train_unit", "interventions_unit", "single_thread", "STUDY_TRUTH"]

#: catalogue columns the study needs besides the survey's own
STUDY_TRUTH = {
    "z": "a redshift column Z (or REDSHIFT, Z_SPEC), e.g. DESI spectroscopic redshifts joined to the rows",
    "a_v": "an attenuation column A_V (or AV) in mag, e.g. from the DESI FastSpecFit value-added catalogue",
}


@contextmanager
def single_thread():
    """torch and the BLAS / OpenMP pools (numpy, scikit-learn) on one thread, restored after."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with threadpool_limits(1):
            yield
    finally:
        torch.set_num_threads(n)


def synth_unit(path: str, n: int, seed: int, world: str = "standard") -> dict[str, Any]:
    """Draw ``n`` synthetic galaxies (catalogue + images) of ``world`` with ``seed`` and write them to ``path``."""
    t0 = time.perf_counter()
    with single_thread():
        s = make_galaxies(int(n), seed=int(seed), world=world)
    save_sample(s, path)
    return {"file": str(path), "n": len(s), "seed": int(seed), "world": world, "seconds": time.perf_counter() - t0}


def catalog_unit(
    catalog: str,
    images: str | None,
    train_path: str,
    test_path: str,
    test_fraction: float,
    seed: int,
    stamp: int | None,
) -> dict[str, Any]:
    """Read a Legacy Survey catalogue (and cut-outs), split its *objects* at random (``seed``) into
    ``test_fraction`` test and the rest training galaxies (:func:`astro.data.splits.split_by_object`: the
    rows of one object stay on one side), and write both samples. The result carries the reading
    (``reading``: :meth:`scimech.studies.reading.Reading.to_dict`, its ``split`` section filled)."""
    with warnings.catch_warnings(record=True) as caught:  # the dropped-rows count goes into the result
        warnings.simplefilter("always")
        s = read_legacy_survey(catalog, images, stamp=stamp)
    lacking = [why for k, why in STUDY_TRUTH.items() if k not in s.catalog.colnames]
    if lacking:
        raise MissingVariableError(
            f"{catalog}: the study scores redshifts and reads dust, so it needs {'; '.join(lacking)}."
        )
    train, test = split_catalogue(s, test_fraction, seed)
    save_sample(s[train], train_path)
    save_sample(s[test], test_path)
    return {
        "n_train": len(train),
        "n_test": len(test),
        "n_rejected": int(s.meta["n_rejected"]),
        "rejected": s.meta["rejected"],
        "warnings": [str(w.message) for w in caught],
        "reading": json.dumps(s.meta["reading"].to_dict()),
    }  # a string: the store keeps its order


def train_unit(
    train_path: str,
    model_dir: str,
    epochs: int,
    batch_size: int,
    seed: int,
    planted: bool = False,
    image_features: str = "bands",
    device: str = "cpu",
) -> dict[str, Any]:
    """Train the stand-in (or the planted stand-in) on ``train_path`` (on ``device``) and move the
    checkpoint into ``model_dir`` when complete."""
    model_dir = Path(model_dir)
    with single_thread():
        ad, hist = train_standin(
            load_sample(train_path),
            epochs=int(epochs),
            batch_size=int(batch_size),
            seed=int(seed),
            planted=bool(planted),
            image_features=image_features,
            device=device,
        )
    ad.to("cpu")  # checkpoints are saved from the CPU
    model_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{model_dir.name}.", suffix=".tmp", dir=model_dir.parent))
    try:
        standin.save(ad, tmp / "model")
        (tmp / "model" / "history.json").write_text(json.dumps(hist))
        if model_dir.exists():
            os.replace(model_dir, tmp / "previous")  # same folder: atomic; removed with tmp
        os.replace(tmp / "model", model_dir)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return hist


def interventions_unit(
    model_dir: str,
    train_path: str,
    test_path: str,
    start: int,
    stop: int,
    block: int,
    seed: int,
    n_reference: int = 256,
    batch_size: int = 256,
    methods: tuple[str, ...] = ("zero", "mean", "resample"),
    image_tokenizer: str | None = None,
    device: str = "cpu",
    dtype: str = "float32",
) -> xr.Dataset:
    """Head interventions of ``block`` on test galaxies ``start:stop``, on ``device`` in ``dtype``
    (see :func:`astro.measures.intervention_chunk`)."""
    t0 = time.perf_counter()
    with single_thread():
        ad = load_adapter(model_dir, image_tokenizer, device=device, dtype=dtype)
        test = load_sample(test_path, rows=slice(int(start), int(stop)))
        train = load_sample(train_path, rows=slice(0, int(n_reference)))
        multi, phot, reference = study_batches(ad, train, test, n_reference=int(n_reference))
        ds = intervention_chunk(
            ad,
            multi,
            phot,
            reference,
            int(block),
            methods=tuple(methods),
            seed=int(seed),
            batch_size=int(batch_size),
            start=int(start),
        )
    ds.attrs["seconds"] = time.perf_counter() - t0
    return ds
