"""One unit of the study: train an OceanCBM model in one regime with one seed and keep its
test-set predictions, concept maps and head weights (:func:`train_unit`).

Training is checkpointed every epoch (:func:`scimech.analysis.concepts.fit_cbm`), so an interrupted
unit resumes where it stopped; ``device`` moves the model and each batch to a torch device
(the results on ``cpu`` are those of the CPU-only code).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import xarray as xr

from scimech.analysis.concepts import REGIMES, LambdaSchedule, fit_cbm
from scimech.errors import DataValidationError

from . import data as odata
from . import heatwaves
from .data import timeaxis
from .model import build_model
from .plan import StudyConfig
from .variables import CONCEPTS, INPUTS, PRESCRIBED

__all__ = [
    "train_unit",
    "budget_weights",
    "unit_dataset",
    "unit_normalizer",
    "study_split",
    "train_model",
    "TrainedModel",
]


def _setup(cfg: StudyConfig, path: Path):
    ds = odata.open_zarr(path, target=cfg.target)
    split = study_split(ds, cfg)
    norm = odata.fit_normalizer(
        ds, split.train, window=cfg.window, lead=cfg.lead, target=cfg.target, concept_scaling=cfg.concept_scaling
    )
    return ds, split, norm


def study_split(ds: xr.Dataset, cfg: StudyConfig) -> odata.Split:
    """The chronological train / val / test split a unit trains on (the training split spans a year)."""
    axis = timeaxis.time_axis(ds)
    return odata.chronological_split(
        ds.sizes["time"],
        window=cfg.window,
        lead=cfg.lead,
        fractions=tuple(cfg.fractions),
        train_min=axis.year_steps,
        time=axis,
    )


def _dataset(ds, t, norm, cfg, *, whole: bool = False, reader=None):
    """The windows ending at ``t``: patches of ``cfg.patch`` for training (sampled from the grid, as
    OceanCBM trains), the whole grid for the test split (``whole``: the model is convolutional, so it
    forecasts any grid, and the unit's maps are whole). ``reader``: the block cache to share with the
    other splits (the training and validation windows read through one cache, bounded in bytes:
    :class:`ocean.data.samples.ChunkedReader`)."""
    patch = tuple(cfg.patch) if cfg.patch and not whole else None
    return odata.WindowDataset(ds, t, norm, window=cfg.window, lead=cfg.lead, patch=patch, reader=reader)


def _test_batch_size(ds: xr.Dataset, cfg: StudyConfig, base: int = 64) -> int:
    """Whole-grid test windows per batch: ``base`` patches' worth of grid points (at least one window)."""
    if not cfg.patch:
        return base
    grid = ds.sizes["lat"] * ds.sizes["lon"]
    return max(1, int(base * cfg.patch[0] * cfg.patch[1] // grid))


@torch.no_grad()
def _predict(model, loader, n_free: int):
    """Forecasts, concepts (and forecasts with the free concepts zeroed) over the test batches,
    on the model's device, with the truths they are scored against; numpy on the CPU."""
    device = next(model.parameters()).device
    ys, cs, y0, hs, ts, ms, vs, yt, ct = [], [], [], [], [], [], [], [], []
    for b in loader:
        x = b["x"].to(device)
        out = model(x)
        ys.append(out.y.cpu().numpy()[:, 0])
        cs.append(out.concepts.cpu().numpy())
        if n_free:
            mask = torch.zeros(out.concepts.shape[1], dtype=torch.bool, device=device)
            mask[-n_free:] = True
            z = model(x, intervene={"values": torch.zeros_like(out.concepts), "mask": mask})
            y0.append(z.y.cpu().numpy()[:, 0])
        yt.append(b["y"].numpy()[:, 0])
        ct.append(b["c"].numpy())
        hs.append(b["hidden"].numpy()[:, 0])
        ts.append(b["t"].numpy())
        ms.append(b["member"].numpy())
        vs.append(b["valid"].numpy()[:, 0])
    cat = np.concatenate
    return {
        "y": cat(ys),
        "c": cat(cs),
        "y0": cat(y0) if y0 else None,
        "hidden": cat(hs),
        "t": cat(ts),
        "member": cat(ms),
        "valid": vs[0][0],
        "y_true": cat(yt),
        "c_true": cat(ct),
    }


def _phase(time: xr.DataArray, axis: timeaxis.TimeAxis) -> np.ndarray:
    """Phase of the year of each date, in its own calendar: its month (1..12) for monthly or coarser
    data, its day of year (1..365, 29 February with 28 February; 1..360 in a ``360_day`` calendar) for
    daily or finer data, and its step of the year for steps of several days (5-daily data: the
    pentad 1..73 that holds its day of year). Continuous 5-day stamps fall one day later in the year
    after each leap year, so a phase by day of year would differ between the training and test years."""
    if axis.unit in ("month", "year"):
        return time.dt.month.values.astype(int)
    doy = heatwaves.phase_of_year(time, 360 if axis.calendar == "360_day" else 365)
    days = axis.size if axis.unit == "day" else 1
    return doy // days + 1


def _climatology(target: xr.DataArray, train_steps: np.ndarray, steps: np.ndarray) -> np.ndarray:
    """The training split's mean of the target per phase of the year and point (:func:`_phase`), at
    the time steps ``steps``: the climatology forecast the model is scored against."""
    clim, phase = phase_means(target, train_steps)
    return at_phases(clim, phase, steps)


def phase_means(target: xr.DataArray, train_steps: np.ndarray) -> tuple[xr.DataArray, np.ndarray]:
    """The mean of ``target`` over ``train_steps`` per phase of the year and point (``phase``, lat, lon;
    over members too), read chunk by chunk from a lazy store, and the phase of every time step."""
    phase = _phase(target["time"], timeaxis.time_axis(target))
    tr = target.isel(time=train_steps).assign_coords(phase=("time", phase[train_steps]))
    return tr.groupby("phase").mean(("member", "time")).compute(), phase


def at_phases(clim: xr.DataArray, phase: np.ndarray, steps: np.ndarray) -> np.ndarray:
    """The climatology ``clim`` (:func:`phase_means`) at the time steps ``steps``: (step, lat, lon)."""
    absent = sorted(set(phase[steps].tolist()) - set(clim["phase"].values.tolist()))
    if absent:
        raise DataValidationError(
            f"The training split holds no step of {len(absent)} phase(s) of the year that the test split has, so the "
            "climatology forecast cannot be scored. Fix: give a longer record (the training split must span a year)."
        )
    return clim.sel(phase=xr.DataArray(phase[steps], dims="sample")).values


def budget_weights(norm: odata.Normalizer) -> list[float]:
    """Head weights of the exact budget in normalised units: target = sum of the terms, so
    the weight of term k is ``scale_k / scale`` (1 for every term with one shared scale).

    Examples
    --------
    >>> import dataclasses
    >>> from ocean.experiment import budget_weights
    >>> from ocean.data.samples import Normalizer
    >>> std = {"q_surf": 50.0, "q_ekman": 10.0, "q_geo": 20.0, "q_entr": 5.0, "q_diff": 2.0}
    >>> norm = Normalizer(mean={}, std=std, scale=100.0, target="dmlhc_dt", concept_scaling="own")
    >>> budget_weights(norm)  # each term scaled by its own std: std_k / 100
    [0.5, 0.1, 0.2, 0.05, 0.02]
    >>> budget_weights(dataclasses.replace(norm, concept_scaling="target"))
    [1.0, 1.0, 1.0, 1.0, 1.0]
    """
    return [norm.scale_of(name) / norm.scale for name in PRESCRIBED]


def _budget_head(model, norm, n_free: int) -> None:
    """Start the head at the budget identity (:func:`budget_weights`); free concepts at 0.1."""
    with torch.no_grad():
        w = model.head.weight.view(-1)
        w[: len(PRESCRIBED)] = torch.tensor(budget_weights(norm), dtype=w.dtype)
        w[len(PRESCRIBED) :] = 0.1  # small, not 0: a zero weight would block the free concept's gradient
        model.head.bias.zero_()


def train_unit(
    config: dict,
    regime: str,
    seed: int,
    data_path: str,
    checkpoint_dir: str,
    progress_bar: bool = False,
    device: str = "cpu",
) -> xr.Dataset:
    """Train one ``(regime, seed)`` model and return its test-set predictions.

    ``config``: the :class:`~ocean.plan.StudyConfig` as a dict (picklable for Dask workers);
    ``device``: torch device of training and forward passes.

    Returns
    -------
    xr.Dataset
        dims ``sample`` (test windows), ``concept``, ``lat``, ``lon``: ``y_true``,
        ``y_pred``, ``y_pred_free0`` (free concepts zeroed), ``y_clim`` (training
        climatology), ``c_true`` (all true concepts incl. ``q_hidden``), ``c_pred``
        (predicted concepts; prescribed ones in W m-2, free ones in target scale units),
        ``head_weight`` (concept; normalised units), ``head_bias``, the training history
        (``epoch``) and ``mask``.

    Examples
    --------
    >>> import dataclasses
    >>> from pathlib import Path
    >>> from ocean.experiment import StudyConfig, prepare_data, train_unit
    >>> cfg = StudyConfig(  # the smallest synthetic ocean: 1 member, 4 years, 8 x 8 points
    ...     synth={"n_members": 1, "years": 4, "ny": 8, "nx": 8, "n_eddies": 2},
    ...     window=2, epochs=1, width=4, regimes=["mixed"], seeds=[0], fractions=[0.6, 0.2, 0.2],
    ... )
    >>> store = prepare_data(cfg, Path("out"))
    >>> unit = train_unit(dataclasses.asdict(cfg), "mixed", 0, str(store), "checkpoints")
    >>> unit["y_pred"].dims, unit["c_pred"].dims
    (('sample', 'lat', 'lon'), ('sample', 'concept', 'lat', 'lon'))
    """
    cfg = StudyConfig(**config)
    before = torch.get_num_threads()
    if cfg.torch_threads > 0:
        torch.set_num_threads(cfg.torch_threads)
    try:
        torch.manual_seed(seed)
        ds, split, norm = _setup(cfg, Path(data_path))
        model, hist, n_free = _fit(cfg, regime, seed, ds, split, norm, checkpoint_dir, progress_bar, device)
        test = _dataset(ds, split.test, norm, cfg, whole=True)
        p = _predict(model, odata.make_batches(test, _test_batch_size(ds, cfg), shuffle=False)(0), n_free)
        return unit_dataset(p, model, hist, ds, split, norm, cfg, config, regime, seed, n_free)
    finally:
        torch.set_num_threads(before)


def _fit(
    cfg: StudyConfig, regime: str, seed: int, ds, split, norm, checkpoint_dir: str, progress_bar: bool, device: str
):
    """Build the model (head at the budget identity when asked) and train it; resumable."""
    n_free = 0 if REGIMES[regime].n_free == 0 else cfg.n_free
    model = build_model(
        cfg.window * len(INPUTS), PRESCRIBED, n_free, width=cfg.width, units={k: "W m-2" for k in PRESCRIBED}, seed=seed
    )
    if cfg.head_init == "budget":
        _budget_head(model, norm, n_free)
    model.to(device)
    train = _dataset(ds, split.train, norm, cfg)
    val = _dataset(ds, split.val, norm, cfg, reader=train.reader)
    batches = odata.make_batches(train, cfg.batch_size, seed=seed)
    val_loader = odata.make_batches(val, cfg.batch_size, shuffle=False)(0)
    reg = REGIMES[regime]
    sched = LambdaSchedule(cfg.lam_max, cfg.lam_min, cfg.epochs) if reg.lam_max not in (0.0, 1.0) else None
    ckpt = Path(checkpoint_dir) / f"{regime}_seed{seed}.safetensors"
    ckpt.parent.mkdir(parents=True, exist_ok=True)
    hist = fit_cbm(
        model,
        batches,
        regime=regime,
        epochs=cfg.epochs,
        lr=cfg.lr,
        val_batches=val_loader,
        checkpoint=ckpt,
        seed=seed,
        lam_schedule=sched,
        progress_bar=progress_bar,
        loss_kind=cfg.loss,
        decorrelation=cfg.decorrelation,
        desc=f"{regime} seed {seed}",
    )
    return model, hist, n_free


def unit_normalizer(unit: xr.Dataset, ds: xr.Dataset, split: odata.Split, cfg: StudyConfig) -> odata.Normalizer:
    """The normalisation the unit's model was trained with: kept in the unit (``normalizer``), else
    (a unit written before it was kept) fitted again on the same training split."""
    if "normalizer" in unit.attrs:
        return odata.Normalizer.from_dict(json.loads(unit.attrs["normalizer"]))
    return odata.fit_normalizer(
        ds, split.train, window=cfg.window, lead=cfg.lead, target=cfg.target, concept_scaling=cfg.concept_scaling
    )


def unit_dataset(
    p: dict,
    model,
    hist: xr.Dataset,
    ds: xr.Dataset,
    split,
    norm,
    cfg: StudyConfig,
    config: dict,
    regime: str,
    seed: int,
    n_free: int,
) -> xr.Dataset:
    """The unit's dataset from the test-set predictions ``p`` (:func:`_predict`), in W m-2."""
    tgt = cfg.target
    s = norm.scale
    y_true = norm.y_inverse(tgt, p["y_true"])
    y_pred = norm.y_inverse(tgt, p["y"])
    c_pred = p["c"].astype(float) * s  # free concepts stay in target-scale units
    for k, name in enumerate(PRESCRIBED):
        c_pred[:, k] = norm.y_inverse(name, p["c"][:, k].astype(float))
    c_true = np.concatenate(
        [
            np.stack([norm.y_inverse(c, p["c_true"][:, k].astype(float)) for k, c in enumerate(PRESCRIBED)], 1),
            (p["hidden"] * norm.scale_of("q_hidden") + norm.mean.get("q_hidden", 0.0))[:, None],
        ],
        1,
    )
    times = ds["time"].values[p["t"] + cfg.lead]
    y_clim = _climatology(ds[tgt], split.train + cfg.lead, p["t"] + cfg.lead)
    land = ~p["valid"].astype(bool)

    def mapvar(a):
        return np.where(land, np.nan, a)

    names = model.concept_names
    coords = {
        "sample": np.arange(len(times)),
        "time": ("sample", times),
        "member": ("sample", p["member"]),
        "concept": names,
        "true_concept": list(CONCEPTS),
        "lat": ds["lat"].values,
        "lon": ds["lon"].values,
        "epoch": hist["epoch"].values,
    }
    unit = xr.Dataset(
        {
            "y_true": (("sample", "lat", "lon"), mapvar(y_true), {"units": "W m-2", "long_name": f"true {tgt}"}),
            "y_pred": (("sample", "lat", "lon"), mapvar(y_pred), {"units": "W m-2", "long_name": f"forecast {tgt}"}),
            "y_clim": (
                ("sample", "lat", "lon"),
                mapvar(y_clim),
                {"units": "W m-2", "long_name": "training climatology"},
            ),
            "c_true": (
                ("sample", "true_concept", "lat", "lon"),
                np.where(land[None, None], np.nan, c_true),
                {"units": "W m-2"},
            ),
            "c_pred": (
                ("sample", "concept", "lat", "lon"),
                np.where(land[None, None], np.nan, c_pred),
                {"units": "W m-2", "long_name": "predicted concepts (free ones: target-scale units)"},
            ),
            "head_weight": (
                "concept",
                model.head_weights()[0].astype(float),
                {"long_name": "1x1 head weight (normalised units; truth = 1 for each budget term)"},
            ),
            "head_bias": ((), float(model.head.bias.detach()[0])),
            "head_weight_true": (
                "concept",
                budget_weights(norm) + [np.nan] * n_free,
                {"long_name": "head weight of the exact budget (target = sum of the terms)"},
            ),
            "mask": (("lat", "lon"), p["valid"].astype(np.int8)),
            **{
                f"hist_{k}": ("epoch", hist[k].values)
                for k in ("lam", "train_loss", "train_task", "train_concept", "val_task")
            },
        },
        coords=coords,
        attrs={
            "regime": regime,
            "seed": int(seed),
            "target": tgt,
            "scale_W_m2": float(s),
            "study_config": json.dumps(config, default=str),
            "normalizer": json.dumps(norm.to_dict()),
            "description": f"OceanCBM unit: {regime}, seed {seed}, test split",
        },
    )
    if p["y0"] is not None:
        unit["y_pred_free0"] = (
            ("sample", "lat", "lon"),
            mapvar(norm.y_inverse(tgt, p["y0"])),
            {"units": "W m-2", "long_name": "forecast with the free concept zeroed"},
        )
    return unit


@dataclass
class TrainedModel:
    """An OceanCBM trained on a store as the study trains it (:func:`train_model`), with the
    store's windows as the model reads them: what a notebook needs to record, splice or steer it.

    ``model`` (eval mode), ``data`` (the opened store), ``split`` (chronological train / val /
    test time steps), ``norm`` (the training split's normalisation; ``norm.y_inverse`` turns a
    forecast back into W m-2) and ``config``.
    """

    model: torch.nn.Module
    data: xr.Dataset
    split: odata.Split
    norm: odata.Normalizer
    config: StudyConfig

    def windows(self, part: str = "test", store: str | Path | None = None):
        """The windows of one part of the split (``"train"``, ``"val"``, ``"test"``) as a
        ``WindowDataset``; ``.items`` gives each window's (member, last input step, tile).
        ``store``: another store on the same grid and calendar (a shifted ocean), normalised
        as the training store."""
        ds = self.data if store is None else odata.open_zarr(store, target=self.config.target)
        return _dataset(ds, getattr(self.split, part), self.norm, self.config)

    def inputs(self, part: str = "test", store: str | Path | None = None) -> torch.Tensor:
        """The model's input tensor of those windows, in ``windows(part).items`` order."""
        batches = odata.make_batches(self.windows(part, store), 64, shuffle=False)(0)
        return torch.cat([b["x"] for b in batches])

    @staticmethod
    def forecast(model: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
        """The forecast tensor (normalised units) of ``model`` on ``x``: the ``forward=`` to give
        ``record`` or ``splice_fidelity`` (OceanCBM returns a structured output otherwise)."""
        return model(x).y


def train_model(
    config: StudyConfig,
    store: str | Path,
    *,
    regime: str = "mixed",
    seed: int = 0,
    checkpoint_dir: str | Path,
    device: str = "cpu",
    progress_bar: bool = True,
) -> TrainedModel:
    """Train OceanCBM on a store in one regime with one seed, exactly as a study unit does
    (checkpointed every epoch in ``checkpoint_dir``; a second call resumes or reloads it)."""
    if regime not in REGIMES:
        raise ValueError(f"unknown regime {regime!r}; choose one of {sorted(REGIMES)}")
    ds, split, norm = _setup(config, Path(store))
    model, _, _ = _fit(config, regime, seed, ds, split, norm, str(checkpoint_dir), progress_bar, device)
    return TrainedModel(model.eval(), ds, split, norm, config)
