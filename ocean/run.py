"""Running the study: the data it reads, the units it trains, resumption that never mixes data.

:func:`run_units` trains every ``(regime, seed)`` unit (:func:`ocean.training.train_unit`)
through :func:`scimech.run.parallel.map_units` (serially or on a Dask client) into
:class:`scimech.run.results.UnitStore`, so a rerun on the same output folder skips finished
units made from the same data and settings. The folder is keyed by
:func:`study_fingerprint` (the data as generated or read now, and the settings that change
a unit's result); results of other data or settings are set aside by :func:`prepare_data`,
never resumed. The finished units are analysed into ``summary.nc``
(:func:`ocean.evidence.analyse`).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import xarray as xr

from scimech._moved import warn_moved
from scimech.errors import ConfigError
from scimech.run import results
from scimech.run.fingerprint import fingerprint, set_aside_stale
from scimech.run.parallel import map_units

from . import data as odata
from .data.files import is_many, is_zarr_store, source_text
from .evidence import analyse
from .plan import StudyConfig
from .synthetic import SynthConfig, generate
from .training import train_unit

__all__ = ["study_fingerprint", "prepare_data", "run_units"]

#: study settings that do not change a unit's result: units are keyed by regime and seed, the
#: data enter the fingerprint by their values (not by path, generator or ``product`` settings), ``time_chunk``
#: is storage and ``torch_threads`` only reorders float sums
_NOT_IN_FINGERPRINT = ("regimes", "seeds", "data", "synth", "product", "time_chunk", "torch_threads")


def study_fingerprint(cfg: StudyConfig, ds: xr.Dataset) -> tuple[str, dict[str, str]]:
    """The fingerprint an output folder of the study is keyed by, and its parts.

    ``data``: :func:`scimech.run.fingerprint.fingerprint` of ``ds``, the dataset the units read
    (the synthetic ocean as generated now, or your store as mapped; every value, coordinate
    and attribute, so a changed generator or one changed value in your file changes it);
    ``settings``: the :class:`StudyConfig` fields that change a unit's result (all but
    ``regimes``, ``seeds``, ``data``, ``synth``, ``product``, ``time_chunk``, ``torch_threads``).

    Examples
    --------
    >>> import dataclasses
    >>> from pathlib import Path
    >>> from ocean.experiment import StudyConfig, prepare_data, study_fingerprint
    >>> cfg = StudyConfig(  # the smallest synthetic ocean: 1 member, 4 years, 8 x 8 points
    ...     synth={"n_members": 1, "years": 4, "ny": 8, "nx": 8, "n_eddies": 2},
    ...     window=2, epochs=1, width=4, regimes=["mixed"], seeds=[0], fractions=[0.6, 0.2, 0.2],
    ... )
    >>> ds = xr.open_zarr(prepare_data(cfg, Path("out")), consolidated=False)
    >>> key, parts = study_fingerprint(cfg, ds)
    >>> sorted(parts)
    ['data', 'settings']
    >>> _, longer = study_fingerprint(dataclasses.replace(cfg, epochs=2), ds)  # same data, other settings
    >>> longer["data"] == parts["data"], longer["settings"] == parts["settings"]
    (True, False)
    """
    settings = {k: v for k, v in dataclasses.asdict(cfg).items() if k not in _NOT_IN_FINGERPRINT}
    parts = {"data": fingerprint(ds), "settings": fingerprint(settings)}
    return fingerprint(parts), parts


def prepare_data(cfg: StudyConfig, out: Path) -> Path:
    """The zarr store the study reads, in an output folder keyed by the data.

    Without ``cfg.data``: a synthetic ocean written to ``out/ocean.zarr``. With it: the zarr
    store itself when it is already in the study's layout, else (a netCDF file, a product's many
    files, or ORAS5 / NEMO / CMEMS names and units) the store mapped by :func:`ocean.data.open_store`
    and written to ``out/ocean.zarr``. Before anything is written, :func:`study_fingerprint` of
    the data (the synthetic ocean generated anew, your store read through) and the settings is
    compared with the one ``out`` holds (``out/data_fingerprint.txt``): results of another
    (a changed generator or file, other settings) are moved to ``out/stale-<fingerprint>/``
    with a warning and never resumed; under the same one ``out/ocean.zarr`` is reused.

    Raises
    ------
    ConfigError
        ``out/ocean.zarr`` was mapped from another file (a rerun into a folder of another study).

    Examples
    --------
    >>> from pathlib import Path
    >>> from ocean.experiment import StudyConfig, prepare_data
    >>> cfg = StudyConfig(  # the smallest synthetic ocean: 1 member, 4 years, 8 x 8 points
    ...     synth={"n_members": 1, "years": 4, "ny": 8, "nx": 8, "n_eddies": 2},
    ...     window=2, epochs=1, width=4, regimes=["mixed"], seeds=[0], fractions=[0.6, 0.2, 0.2],
    ... )
    >>> store = prepare_data(cfg, Path("out"))
    >>> store.name, dict(xr.open_zarr(store, consolidated=False).sizes)["lat"]
    ('ocean.zarr', 8)
    """
    out = Path(out)
    path = out / "ocean.zarr"
    source = source_text(cfg.data) if cfg.data else None
    in_place = False
    if source is not None:
        # NaN/inf at ocean points are refused here (the training reader would fill them with the
        # mean): one read of every value, which the training repeats many times anyway
        ds = odata.open_store(cfg.data, target=cfg.target, check_nans=True, **cfg.product)
        in_place = not ds.attrs.get("mapping") and not is_many(cfg.data) and is_zarr_store(cfg.data)
    if not in_place and (path / "zarr.json").exists():
        held = xr.open_zarr(path, consolidated=False).attrs.get("mapped_from")
        if held != source:
            raise ConfigError(
                f"{out} holds a study of {held or 'the synthetic ocean'}, not of "
                f"{source or 'the synthetic ocean'}; its finished units would be mixed with this "
                "run's. Use another --out, or delete that folder to start afresh."
            )
    if source is None:
        ds = generate(SynthConfig(**cfg.synth))
    fp, parts = study_fingerprint(cfg, ds)
    set_aside_stale(out, fp, parts=parts, keep=[source] if source else [], stacklevel=3)
    if in_place:
        return Path(cfg.data)
    if (path / "zarr.json").exists():
        return path
    if source is not None:
        ds = ds.chunk({d: {"member": 1, "time": cfg.time_chunk}.get(str(d), -1) for d in ds.dims})
        ds.attrs["mapped_from"] = source
    odata.write_zarr(ds, path, time_chunk=cfg.time_chunk)
    return path


def run_units(
    cfg: StudyConfig, out: str | Path, *, client=None, progress_bar: bool = False, device: str = "cpu"
) -> tuple[xr.Dataset, dict[tuple[str, int], xr.Dataset]]:
    """Train every ``(regime, seed)`` unit (skipping finished ones) and analyse them.

    ``client``: a Dask client (``None``: serially here); ``device``: torch device of each unit.
    The whole study from Python (report, findings, planted truth) is :func:`ocean.run_study`;
    this is its unit runner (``ocean.run.run_study`` until scimech 0.3.0).

    Returns
    -------
    (summary, units)
        ``summary`` from :func:`ocean.evidence.analyse` (also saved to ``out/summary.nc``);
        ``units`` maps ``(regime, seed)`` to each unit's dataset.

    Examples
    --------
    >>> from ocean.experiment import StudyConfig, run_units
    >>> cfg = StudyConfig(  # the smallest synthetic ocean: 1 member, 4 years, 8 x 8 points
    ...     synth={"n_members": 1, "years": 4, "ny": 8, "nx": 8, "n_eddies": 2},
    ...     window=2, epochs=1, width=4, regimes=["mixed"], seeds=[0], fractions=[0.6, 0.2, 0.2],
    ... )
    >>> summary, units = run_units(cfg, "out")
    >>> list(units), summary["rmse"].dims
    ([('mixed', 0)], ('regime', 'seed'))
    """
    out = Path(out)
    path = prepare_data(cfg, out)
    store = results.UnitStore(out / "units")
    todo = {
        f"{r}/seed={s}": dict(
            config=dataclasses.asdict(cfg),
            regime=r,
            seed=int(s),
            data_path=str(path),
            checkpoint_dir=str(out / "checkpoints"),
            progress_bar=progress_bar,
            device=device,
        )
        for r in cfg.regimes
        for s in cfg.seeds
    }
    loaded = map_units(train_unit, todo, store, client=client, desc="ocean study units")
    units = {(v["regime"], int(v["seed"])): loaded[k] for k, v in todo.items()}
    summary = analyse(units)
    results.save(summary, out / "summary.nc", config=dataclasses.asdict(cfg))
    return summary, units


def __getattr__(name: str):
    if name == "run_study":  # the unit runner's old name, until scimech 0.3.0
        warn_moved(f"{__name__}.run_study", f"{__name__}.run_units")
        return run_units
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
