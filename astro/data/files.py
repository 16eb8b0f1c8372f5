"""The astro study's files: galaxy samples (``.fits`` / ``.zarr``), model checkpoints (the
stand-in's or AION-1's) and the saved study results (one netCDF per part)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import xarray as xr

from scimech.errors import ConfigError
from scimech.run import results

from ..models import standin
from ..models.aion import AIONRedshift
from ..synthetic import GalaxySample

__all__ = ["load_sample", "save_sample", "load_adapter", "save_study", "load_study", "STUDY_NAMES", "OPTIONAL_NAMES"]

#: the parts of a study's results, one ``<name>.nc`` each (:func:`save_study`)
STUDY_NAMES = ("advantage", "layers", "head_probes", "radial", "interventions", "bias", "predictions", "site_profile")
#: parts a study folder may lack (its intervention units saved before they were recorded): loaded where present
OPTIONAL_NAMES = ("site_profile",)


def load_sample(path: str | Path, rows: slice | None = None) -> GalaxySample:
    """A :class:`~astro.synthetic.GalaxySample` from ``.fits`` or ``.zarr`` (optionally rows ``rows``)."""
    path = Path(path)
    s = GalaxySample.from_zarr(path) if path.suffix == ".zarr" or path.is_dir() else GalaxySample.from_fits(path)
    return s if rows is None else s[rows]


def save_sample(sample: GalaxySample, path: str | Path) -> Path:
    """Write a sample to ``.zarr`` or (any other suffix) FITS, atomically."""
    path = Path(path)
    return sample.to_zarr(path) if path.suffix == ".zarr" else sample.to_fits(path)


def load_adapter(
    folder: str | Path, image_tokenizer: str | Path | None = None, *, device: str = "cpu", dtype: str = "float32"
) -> AIONRedshift:
    """:class:`~astro.models.aion.AIONRedshift` from a stand-in or AION-1 checkpoint folder, on ``device``,
    its transformer in ``dtype`` (:data:`astro.models.aion.DTYPES`).

    The image tokenizer is ``image_tokenizer`` (a stand-in ``.npz``) if given, else the
    folder's ``image_tokenizer.npz`` (stand-in), else its ``codecs/image/`` (AION-1), else none.
    """
    folder = Path(folder)
    tok_path = Path(image_tokenizer) if image_tokenizer else folder / "image_tokenizer.npz"
    if image_tokenizer and not tok_path.is_file():
        raise ConfigError(
            f"--image-tokenizer {tok_path} does not exist; give the image_tokenizer.npz written "
            "by `scimech astro train`, or leave it out to use the checkpoint's own."
        )
    tok = standin.PatchTokenizer.load(tok_path) if tok_path.is_file() else None
    return AIONRedshift.from_folder(folder, image_tokenizer=tok, device=device, dtype=dtype)


def save_study(res: Mapping[str, xr.Dataset], out: Path, config: dict | None = None, seed: int = 0) -> None:
    """One netCDF per study part under ``out`` (atomic, with provenance)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    for name, ds in res.items():
        results.save(ds, out / f"{name}.nc", config=config, seed=seed)


def load_study(out: Path) -> dict[str, xr.Dataset]:
    """The parts written by :func:`save_study` (``CheckpointError`` naming a missing one; those of
    :data:`OPTIONAL_NAMES` where present)."""
    out = Path(out)
    return {
        n: results.load(out / f"{n}.nc") for n in STUDY_NAMES if n not in OPTIONAL_NAMES or (out / f"{n}.nc").exists()
    }
