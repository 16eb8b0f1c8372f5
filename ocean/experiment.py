"""The OceanCBM study: regimes x seeds on one dataset; skill, fidelity, consistency.

Each ``(regime, seed)`` unit trains a model (checkpointed every epoch, resumable) and
stores its test-set predictions, concept maps and head weights through
:class:`scimech.results.UnitStore`, so a rerun on the same output folder skips finished
units made from the same data and settings (:func:`study_fingerprint`; results of others
are set aside by :func:`prepare_data`). :func:`analyse` turns the units into one labelled
result:

- skill: RMSE (W m-2) and anomaly correlation (against the training climatology of each
  calendar month and point), overall and per season; the RMSE change when the free
  concept is zeroed;
- concept fidelity: Pearson r and R2 of each predicted prescribed concept vs the truth,
  |r| of the free concept with ``q_hidden`` and the best |r| of any channel with it;
- cross-seed consistency of the bottleneck (test points x concepts): pairwise linear CKA
  and Procrustes distance, |r| of the free concept across seeds, and the coefficient of
  variation of the head weights across seeds;
- planted truth vs what the study found (:mod:`ocean.recovery`): the hidden flux in the
  free concept, each budget term in its channel, the budget's head weights, per regime.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
import xarray as xr

from scimech.concepts import REGIMES, fit_cbm
from scimech.errors import ConfigError
from scimech.geometry import linear_cka, pairwise, procrustes_distance

from . import data as odata
from .model import build_model
from .recovery import recovery
from .synthetic import SynthConfig, generate
from .variables import CONCEPTS, INPUTS, PRESCRIBED, VAR_ATTRS

__all__ = ["StudyConfig", "load_config", "prepare_data", "study_fingerprint", "train_unit", "run_study", "analyse", "SEASONS"]

SEASONS = {"DJF": (12, 1, 2), "MAM": (3, 4, 5), "JJA": (6, 7, 8), "SON": (9, 10, 11)}


@dataclass
class StudyConfig:
    """Settings of the study (quick defaults: a few minutes on 2 CPU cores).

    ``synth`` overrides :class:`~ocean.synthetic.SynthConfig` fields; ``data`` points to
    your own zarr store or netCDF file instead, in the study's layout or with ORAS5 / NEMO /
    CMEMS names (:func:`ocean.data.open_store`; ``docs/ocean.md``).
    """

    synth: dict = field(default_factory=lambda: {"years": 12, "ny": 12, "nx": 16})
    data: str | None = None
    window: int = 6
    lead: int = 1
    target: str = "dmlhc_dt"
    regimes: list = field(default_factory=lambda: ["mixed", "prediction_only", "prescription_only"])
    seeds: list = field(default_factory=lambda: [0, 1, 2])
    epochs: int = 30
    lr: float = 3e-3
    batch_size: int = 8
    width: int = 8
    n_free: int = 1
    lam_max: float = 0.8
    lam_min: float = 0.2
    patch: list | None = None
    time_chunk: int = 12
    fractions: list = field(default_factory=lambda: [0.7, 0.1, 0.2])
    loss: str = "l1"  # "l1" (OceanCBM) or "l2"
    concept_scaling: str = "own"  # "target" (shared scale) or "own" (each concept by its own std)
    torch_threads: int = 1  # intra-op threads per unit; 0 = torch's default (all cores). Small grids: 1 is fastest
    head_init: str = "budget"  # "random" or "budget" (prescribed weights start at their budget-closure values)
    decorrelation: float = 0.0  # weight of the free-vs-prescribed decorrelation penalty (leakage control)

    @classmethod
    def quick(cls, **kw) -> StudyConfig:
        return cls(**kw)

    @classmethod
    def full(cls, **kw) -> StudyConfig:
        """ORAS5-like size: 5 members, 40 years, 48 x 72 grid, 5 seeds, 40 epochs."""
        base = dict(synth={"n_members": 5, "years": 40, "ny": 48, "nx": 72}, seeds=[0, 1, 2, 3, 4], epochs=40,
                    lr=1e-3, width=32, batch_size=16, torch_threads=0)
        base.update(kw)
        return cls(**base)


def _refuse_non_string_keys(path, loaded: Mapping, node, fields_of, what: str) -> None:
    """YAML reads on/off/yes/no/true/null keys as bools/None: name them as written."""
    if all(isinstance(k, str) for k in loaded):
        return
    import yaml

    raw = [k.value for k, _ in node.value if not isinstance(yaml.safe_load(k.value or "~"), str)]
    names = sorted(f.name for f in dataclasses.fields(fields_of))
    other = sorted(k for k in loaded if isinstance(k, str) and k not in names)
    raise ConfigError(f"{path}: unknown {what} setting(s) {other + raw} ({raw} are read by YAML as "
                      f"true/false/null, not as names); valid ones are {names}.")


def load_config(path: str | Path | None = None, *, quick: bool = True, **overrides) -> StudyConfig:
    """A :class:`StudyConfig` from a YAML file (keys = field names) plus overrides.

    Raises
    ------
    ConfigError
        Unknown keys, unknown regimes or a file that is not a mapping.
    """
    import yaml

    values: dict[str, Any] = {}
    if path is not None:
        if not Path(path).is_file():
            raise ConfigError(f"No config file at {str(path)!r}. Check the path (or omit --config for the defaults).")
        try:
            loaded = yaml.safe_load(Path(path).read_text()) or {}
        except yaml.YAMLError as err:
            raise ConfigError(f"{path}: not valid YAML ({err}).") from err
        if not isinstance(loaded, Mapping):
            raise ConfigError(f"{path}: the config must be a YAML mapping of StudyConfig fields; got {type(loaded).__name__}.")
        node = yaml.compose(Path(path).read_text())
        _refuse_non_string_keys(path, loaded, node, StudyConfig, "study")
        if isinstance(loaded.get("synth"), Mapping):
            synth_node = next(v for k, v in node.value if k.value == "synth")
            _refuse_non_string_keys(path, loaded["synth"], synth_node, SynthConfig, "synth")
        values.update(loaded)
    values.update({k: v for k, v in overrides.items() if v is not None})
    names = {f.name for f in dataclasses.fields(StudyConfig)}
    unknown = sorted(set(values) - names)
    if unknown:
        raise ConfigError(f"Unknown study setting(s) {unknown}; valid ones are {sorted(names)}.")
    synth_names = {f.name for f in dataclasses.fields(SynthConfig)}
    bad = sorted(set(values.get("synth", {})) - synth_names)
    if bad:
        raise ConfigError(f"Unknown synth setting(s) {bad}; valid ones are {sorted(synth_names)}.")
    defaults = StudyConfig.quick() if quick else StudyConfig.full()
    if isinstance(values.get("synth"), Mapping):  # synth settings add to the defaults' grid, not replace it
        values["synth"] = {**defaults.synth, **values["synth"]}
    for key, value in values.items():  # type check against the defaults: `epochs: many` is an error
        ref = getattr(defaults, key)
        ok_num = isinstance(ref, (int, float)) and not isinstance(ref, bool) and isinstance(value, (int, float)) \
            and not isinstance(value, bool) and (isinstance(ref, float) or float(value).is_integer())
        if ref is not None and value is not None and not ok_num and not isinstance(value, type(ref)) \
                and not (isinstance(ref, (list, tuple)) and isinstance(value, (list, tuple))):
            raise ConfigError(f"Study setting {key!r} must be a {type(ref).__name__} like {ref!r}; got {value!r}.")
    cfg = StudyConfig.quick(**values) if quick else StudyConfig.full(**values)
    for key, allowed in (("concept_scaling", ("target", "own")), ("head_init", ("random", "budget")),
                         ("loss", ("l1", "l2"))):
        if getattr(cfg, key) not in allowed:
            raise ConfigError(f"Study setting {key!r} must be one of {list(allowed)}; got {getattr(cfg, key)!r}.")
    bad_reg = [r for r in cfg.regimes if r not in REGIMES]
    if bad_reg:
        raise ConfigError(f"Unknown regime(s) {bad_reg}; choose from {sorted(REGIMES)}.")
    _check_ranges(cfg)
    return cfg


def _setting_ranges() -> dict:
    """The constraint of every numeric study setting (the command-line options share them)."""
    from scimech.options import number, whole

    frac = number(0.0, maximum=1.0, strict=False)
    return {"epochs": whole(1), "lr": number(0), "batch_size": whole(1), "width": whole(1), "n_free": whole(0),
            "lam_max": frac, "lam_min": frac, "window": whole(1), "lead": whole(1), "time_chunk": whole(1),
            "torch_threads": whole(0), "decorrelation": number(0, strict=False), "seeds": whole(0),
            "fractions": number(0.0, maximum=1.0)}


def _check_ranges(cfg: StudyConfig) -> None:
    """Every numeric setting within its constraint, one message form, before any work."""
    import argparse

    for key, option in _setting_ranges().items():
        value = getattr(cfg, key)
        for v in (value if isinstance(value, (list, tuple)) else [value]):
            try:
                option(str(v))
            except argparse.ArgumentTypeError as err:
                raise ConfigError(f"The {key!r} setting of the ocean study {err}") from None
    if not cfg.seeds:
        raise ConfigError("The 'seeds' setting of the ocean study must list at least one seed. Got [] instead.")
    if len(cfg.fractions) != 3 or abs(sum(cfg.fractions) - 1) > 1e-9:
        raise ConfigError("The 'fractions' setting of the ocean study must be three shares (train, validation, "
                          f"test) that add up to 1. Got {cfg.fractions!r} instead.")
    if cfg.lam_min > cfg.lam_max:
        raise ConfigError(f"The 'lam_min' setting of the ocean study must not exceed lam_max ({cfg.lam_max}). "
                          f"Got {cfg.lam_min} instead.")


#: study settings that do not change a unit's result: units are keyed by regime and seed, the
#: data enter the fingerprint by their values (not by path or generator settings), ``time_chunk``
#: is storage and ``torch_threads`` only reorders float sums
_NOT_IN_FINGERPRINT = ("regimes", "seeds", "data", "synth", "time_chunk", "torch_threads")


def study_fingerprint(cfg: StudyConfig, ds: xr.Dataset) -> tuple[str, dict[str, str]]:
    """The fingerprint an output folder of the study is keyed by, and its parts.

    ``data``: :func:`scimech.fingerprint.fingerprint` of ``ds``, the dataset the units read
    (the synthetic ocean as generated now, or your store as mapped; every value, coordinate
    and attribute, so a changed generator or one changed value in your file changes it);
    ``settings``: the :class:`StudyConfig` fields that change a unit's result (all but
    ``regimes``, ``seeds``, ``data``, ``synth``, ``time_chunk``, ``torch_threads``).
    """
    from scimech.fingerprint import fingerprint

    settings = {k: v for k, v in dataclasses.asdict(cfg).items() if k not in _NOT_IN_FINGERPRINT}
    parts = {"data": fingerprint(ds), "settings": fingerprint(settings)}
    return fingerprint(parts), parts


def prepare_data(cfg: StudyConfig, out: Path) -> Path:
    """The zarr store the study reads, in an output folder keyed by the data.

    Without ``cfg.data``: a synthetic ocean written to ``out/ocean.zarr``. With it: the zarr
    store itself when it is already in the study's layout, else (a netCDF file, or ORAS5 /
    NEMO / CMEMS names and units) the store mapped by :func:`ocean.data.open_store` and
    written to ``out/ocean.zarr``. Before anything is written, :func:`study_fingerprint` of
    the data (the synthetic ocean generated anew, your store read through) and the settings is
    compared with the one ``out`` holds (``out/data_fingerprint.txt``): results of another
    (a changed generator or file, other settings) are moved to ``out/stale-<fingerprint>/``
    with a warning and never resumed; under the same one ``out/ocean.zarr`` is reused.

    Raises
    ------
    ConfigError
        ``out/ocean.zarr`` was mapped from another file (a rerun into a folder of another study).
    """
    from scimech.fingerprint import set_aside_stale

    out = Path(out)
    path = out / "ocean.zarr"
    source = str(Path(cfg.data).resolve()) if cfg.data else None
    in_place = False
    if source is not None:
        ds = odata.open_store(cfg.data, target=cfg.target)
        in_place = not ds.attrs.get("mapping") and Path(cfg.data).is_dir()
    if not in_place and (path / "zarr.json").exists():
        held = xr.open_zarr(path, consolidated=False).attrs.get("mapped_from")
        if held != source:
            raise ConfigError(f"{out} holds a study of {held or 'the synthetic ocean'}, not of "
                              f"{source or 'the synthetic ocean'}; its finished units would be mixed with this "
                              "run's. Use another --out, or delete that folder to start afresh.")
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


def _setup(cfg: StudyConfig, path: Path):
    ds = odata.open_zarr(path, target=cfg.target)
    split = odata.chronological_split(ds.sizes["time"], window=cfg.window, lead=cfg.lead,
                                      fractions=tuple(cfg.fractions))
    norm = odata.fit_normalizer(ds, split.train, window=cfg.window, lead=cfg.lead, target=cfg.target,
                                concept_scaling=cfg.concept_scaling)
    return ds, split, norm


def _dataset(ds, t, norm, cfg):
    return odata.WindowDataset(ds, t, norm, window=cfg.window, lead=cfg.lead,
                               patch=tuple(cfg.patch) if cfg.patch else None, max_blocks=64)


@torch.no_grad()
def _predict(model, loader, n_free: int):
    ys, cs, y0, hs, ts, ms, vs, yt, ct = [], [], [], [], [], [], [], [], []
    for b in loader:
        out = model(b["x"])
        ys.append(out.y.numpy()[:, 0])
        cs.append(out.concepts.numpy())
        if n_free:
            mask = torch.zeros(out.concepts.shape[1], dtype=torch.bool)
            mask[-n_free:] = True
            z = model(b["x"], intervene={"values": torch.zeros_like(out.concepts), "mask": mask})
            y0.append(z.y.numpy()[:, 0])
        yt.append(b["y"].numpy()[:, 0])
        ct.append(b["c"].numpy())
        hs.append(b["hidden"].numpy()[:, 0])
        ts.append(b["t"].numpy())
        ms.append(b["member"].numpy())
        vs.append(b["valid"].numpy()[:, 0])
    cat = np.concatenate
    return {"y": cat(ys), "c": cat(cs), "y0": cat(y0) if y0 else None, "hidden": cat(hs), "t": cat(ts),
            "member": cat(ms), "valid": vs[0][0], "y_true": cat(yt), "c_true": cat(ct)}


def budget_weights(norm: odata.Normalizer) -> list[float]:
    """Head weights of the exact budget in normalised units: target = sum of the terms, so
    the weight of term k is ``scale_k / scale`` (1 for every term with one shared scale)."""
    return [norm.scale_of(name) / norm.scale for name in PRESCRIBED]


def _budget_head(model, norm, n_free: int) -> None:
    """Start the head at the budget identity (:func:`budget_weights`); free concepts at 0.1."""
    with torch.no_grad():
        w = model.head.weight.view(-1)
        w[:len(PRESCRIBED)] = torch.tensor(budget_weights(norm), dtype=w.dtype)
        w[len(PRESCRIBED):] = 0.1  # small, not 0: a zero weight would block the free concept's gradient
        model.head.bias.zero_()


def train_unit(config: dict, regime: str, seed: int, data_path: str, checkpoint_dir: str,
               progress_bar: bool = False) -> xr.Dataset:
    """Train one ``(regime, seed)`` model and return its test-set predictions.

    Returns
    -------
    xr.Dataset
        dims ``sample`` (test windows), ``concept``, ``lat``, ``lon``: ``y_true``,
        ``y_pred``, ``y_pred_free0`` (free concepts zeroed), ``y_clim`` (training
        climatology), ``c_true`` (all true concepts incl. ``q_hidden``), ``c_pred``
        (predicted concepts; prescribed ones in W m-2, free ones in target scale units),
        ``head_weight`` (concept; normalised units), ``head_bias``, the training history
        (``epoch``) and ``mask``.
    """
    cfg = StudyConfig(**config)
    before = torch.get_num_threads()
    if cfg.torch_threads > 0:
        torch.set_num_threads(cfg.torch_threads)
    try:
        return _train_unit(cfg, config, regime, seed, data_path, checkpoint_dir, progress_bar)
    finally:
        torch.set_num_threads(before)


def _train_unit(cfg: StudyConfig, config: dict, regime: str, seed: int, data_path: str, checkpoint_dir: str,
                progress_bar: bool) -> xr.Dataset:
    torch.manual_seed(seed)
    ds, split, norm = _setup(cfg, Path(data_path))
    n_free = 0 if REGIMES[regime].n_free == 0 else cfg.n_free
    model = build_model(cfg.window * len(INPUTS), PRESCRIBED, n_free, width=cfg.width,
                        units={k: "W m-2" for k in PRESCRIBED}, seed=seed)
    if cfg.head_init == "budget":
        _budget_head(model, norm, n_free)
    train = _dataset(ds, split.train, norm, cfg)
    val = _dataset(ds, split.val, norm, cfg)
    test = _dataset(ds, split.test, norm, cfg)
    batches = odata.make_batches(train, cfg.batch_size, seed=seed)
    val_loader = odata.make_batches(val, cfg.batch_size, shuffle=False)(0)
    from scimech.concepts import LambdaSchedule

    reg = REGIMES[regime]
    sched = LambdaSchedule(cfg.lam_max, cfg.lam_min, cfg.epochs) if reg.lam_max not in (0.0, 1.0) else None
    ckpt = Path(checkpoint_dir) / f"{regime}_seed{seed}.pt"
    ckpt.parent.mkdir(parents=True, exist_ok=True)
    hist = fit_cbm(model, batches, regime=regime, epochs=cfg.epochs, lr=cfg.lr, val_batches=val_loader,
                   checkpoint=ckpt, seed=seed, lam_schedule=sched, progress_bar=progress_bar, loss_kind=cfg.loss,
                   decorrelation=cfg.decorrelation,
                   desc=f"{regime} seed {seed}")
    p = _predict(model, odata.make_batches(test, 64, shuffle=False)(0), n_free)
    tgt = cfg.target
    s = norm.scale
    y_true = norm.y_inverse(tgt, p["y_true"])
    y_pred = norm.y_inverse(tgt, p["y"])
    c_pred = p["c"].astype(float) * s  # free concepts stay in target-scale units
    for k, name in enumerate(PRESCRIBED):
        c_pred[:, k] = norm.y_inverse(name, p["c"][:, k].astype(float))
    c_true = np.concatenate([np.stack([norm.y_inverse(c, p["c_true"][:, k].astype(float))
                                       for k, c in enumerate(PRESCRIBED)], 1),
                             (p["hidden"] * norm.scale_of("q_hidden") + norm.mean.get("q_hidden", 0.0))[:, None]], 1)
    times = ds["time"].values[p["t"] + cfg.lead]
    # climatology of the target per calendar month and point, training split only
    tr = ds[tgt].isel(time=split.train + cfg.lead)
    clim = tr.groupby("time.month").mean(("member", "time")).compute()
    months = xr.DataArray(np.asarray([np.datetime64(t, "M").astype(int) % 12 + 1 for t in times]), dims="sample")
    y_clim = clim.sel(month=months).values
    land = ~p["valid"].astype(bool)

    def mapvar(a):
        return np.where(land, np.nan, a)

    names = model.concept_names
    coords = {"sample": np.arange(len(times)), "time": ("sample", times), "member": ("sample", p["member"]),
              "concept": names, "true_concept": list(CONCEPTS), "lat": ds["lat"].values, "lon": ds["lon"].values,
              "epoch": hist["epoch"].values}
    unit = xr.Dataset(
        {
            "y_true": (("sample", "lat", "lon"), mapvar(y_true), {"units": "W m-2", "long_name": f"true {tgt}"}),
            "y_pred": (("sample", "lat", "lon"), mapvar(y_pred), {"units": "W m-2", "long_name": f"forecast {tgt}"}),
            "y_clim": (("sample", "lat", "lon"), mapvar(y_clim), {"units": "W m-2",
                                                                  "long_name": "training climatology"}),
            "c_true": (("sample", "true_concept", "lat", "lon"), np.where(land[None, None], np.nan, c_true),
                       {"units": "W m-2"}),
            "c_pred": (("sample", "concept", "lat", "lon"), np.where(land[None, None], np.nan, c_pred),
                       {"units": "W m-2", "long_name": "predicted concepts (free ones: target-scale units)"}),
            "head_weight": ("concept", model.head_weights()[0].astype(float),
                            {"long_name": "1x1 head weight (normalised units; truth = 1 for each budget term)"}),
            "head_bias": ((), float(model.head.bias.detach()[0])),
            "head_weight_true": ("concept", budget_weights(norm) + [np.nan] * n_free,
                                 {"long_name": "head weight of the exact budget (target = sum of the terms)"}),
            "mask": (("lat", "lon"), p["valid"].astype(np.int8)),
            **{f"hist_{k}": ("epoch", hist[k].values) for k in ("lam", "train_loss", "train_task",
                                                                "train_concept", "val_task")},
        },
        coords=coords,
        attrs={"regime": regime, "seed": int(seed), "target": tgt, "scale_W_m2": float(s),
               "study_config": json.dumps(config, default=str),
               "description": f"OceanCBM unit: {regime}, seed {seed}, test split"},
    )
    if p["y0"] is not None:
        unit["y_pred_free0"] = (("sample", "lat", "lon"), mapvar(norm.y_inverse(tgt, p["y0"])),
                                {"units": "W m-2", "long_name": "forecast with the free concept zeroed"})
    return unit


def run_study(cfg: StudyConfig, out: str | Path, *, client=None, progress_bar: bool = False
              ) -> tuple[xr.Dataset, dict[tuple[str, int], xr.Dataset]]:
    """Train every ``(regime, seed)`` unit (skipping finished ones) and analyse them.

    Returns
    -------
    (summary, units)
        ``summary`` from :func:`analyse` (also saved to ``out/summary.nc``); ``units`` maps
        ``(regime, seed)`` to each unit's dataset.
    """
    from scimech import results
    from scimech.parallel import map_units

    out = Path(out)
    path = prepare_data(cfg, out)
    store = results.UnitStore(out / "units")
    todo = {f"{r}/seed={s}": dict(config=dataclasses.asdict(cfg), regime=r, seed=int(s), data_path=str(path),
                                  checkpoint_dir=str(out / "checkpoints"), progress_bar=progress_bar)
            for r in cfg.regimes for s in cfg.seeds}
    loaded = map_units(train_unit, todo, store, client=client, desc="ocean study units")
    units = {(v["regime"], int(v["seed"])): loaded[k] for k, v in todo.items()}
    summary = analyse(units)
    results.save(summary, out / "summary.nc", config=dataclasses.asdict(cfg))
    return summary, units


def _corr(a: np.ndarray, b: np.ndarray) -> float:
    ok = np.isfinite(a) & np.isfinite(b)
    a, b = a[ok] - a[ok].mean(), b[ok] - b[ok].mean()
    den = np.sqrt((a * a).sum() * (b * b).sum())
    return float((a * b).sum() / den) if den > 0 else np.nan


def _r2(pred: np.ndarray, true: np.ndarray) -> float:
    ok = np.isfinite(pred) & np.isfinite(true)
    sst = ((true[ok] - true[ok].mean()) ** 2).sum()
    return float(1 - ((pred[ok] - true[ok]) ** 2).sum() / sst) if sst > 0 else np.nan


def _rmse(a, b) -> float:
    d = (a - b)[np.isfinite(a - b)]
    return float(np.sqrt((d**2).mean()))


def _hidden_probe_r2(unit: xr.Dataset) -> float:
    """Held-out R2 of a ridge probe from all bottleneck channels to ``q_hidden``: does the
    regime represent the hidden process anywhere, whichever channel holds it? Fitted on the
    first half of the test samples (in time), scored on the second half."""
    from sklearn.linear_model import RidgeCV

    c = unit["c_pred"].transpose("sample", "lat", "lon", "concept").values
    h = unit["c_true"].sel(true_concept="q_hidden").values
    ok = unit["mask"].values.astype(bool)
    X, y = c[:, ok], h[:, ok]
    half = len(X) // 2
    if half < 1:
        return np.nan
    Xa, ya = X[:half].reshape(-1, X.shape[-1]), y[:half].ravel()
    Xb, yb = X[half:].reshape(-1, X.shape[-1]), y[half:].ravel()
    keep_a, keep_b = np.isfinite(Xa).all(1) & np.isfinite(ya), np.isfinite(Xb).all(1) & np.isfinite(yb)
    probe = RidgeCV(alphas=np.logspace(-3, 3, 7)).fit(Xa[keep_a], ya[keep_a])
    return _r2(probe.predict(Xb[keep_b]), yb[keep_b])


def _bottleneck(unit: xr.Dataset, max_points: int = 4000) -> np.ndarray:
    """(test points, concepts) matrix of the predicted concept maps at ocean points."""
    c = unit["c_pred"].transpose("sample", "lat", "lon", "concept").values
    ok = unit["mask"].values.astype(bool)
    X = c[:, ok].reshape(-1, c.shape[-1])
    if len(X) > max_points:
        X = X[np.random.default_rng(0).choice(len(X), max_points, replace=False)]
    return X


def analyse(units: Mapping[tuple[str, int], xr.Dataset]) -> xr.Dataset:
    """Skill, fidelity and cross-seed consistency of finished units (see module doc).

    Returns
    -------
    xr.Dataset
        dims ``regime``, ``seed``, ``season``, ``concept`` (prescribed + ``free_0``),
        ``seed_other``, ``truth``; per-unit metrics over (regime, seed), consistency
        matrices over (regime, seed, seed_other), summaries over regime, and the planted
        truth's recovery over (truth, regime) (:func:`ocean.recovery.recovery`).
    """
    regimes = list(dict.fromkeys(r for r, _ in units))
    seeds = sorted({s for _, s in units})
    concepts = [*PRESCRIBED, "free_0"]
    R, S = len(regimes), len(seeds)
    nan = lambda *shape: np.full(shape, np.nan)  # noqa: E731
    m = {k: nan(R, S) for k in ("rmse", "acc", "rmse_free0", "delta_rmse_free0", "free_hidden_abs_r",
                                 "hidden_best_abs_r", "rmse_climatology", "hidden_probe_r2")}
    acc_season = nan(R, S, 4)
    rmse_season = nan(R, S, 4)
    fid_r, fid_r2 = nan(R, S, len(concepts)), nan(R, S, len(concepts))
    head = nan(R, S, len(concepts))
    cka, proc, free_r, cka_std = nan(R, S, S), nan(R, S, S), nan(R, S, S), nan(R, S, S)
    agree = nan(R, S, S)
    concept_agree = nan(R, len(concepts))
    head_true = nan(len(concepts))
    for (reg, seed), u in units.items():
        i, j = regimes.index(reg), seeds.index(seed)
        yt, yp, yc = u["y_true"].values, u["y_pred"].values, u["y_clim"].values
        m["rmse"][i, j] = _rmse(yp, yt)
        m["rmse_climatology"][i, j] = _rmse(yc, yt)
        m["acc"][i, j] = _corr(yp - yc, yt - yc)
        mon = np.asarray([np.datetime64(t, "M").astype(int) % 12 + 1 for t in u["time"].values])
        for k, (_, months) in enumerate(SEASONS.items()):
            sel = np.isin(mon, months)
            if sel.sum() > 0:
                acc_season[i, j, k] = _corr(yp[sel] - yc[sel], yt[sel] - yc[sel])
                rmse_season[i, j, k] = _rmse(yp[sel], yt[sel])
        if "y_pred_free0" in u:
            m["rmse_free0"][i, j] = _rmse(u["y_pred_free0"].values, yt)
            m["delta_rmse_free0"][i, j] = m["rmse_free0"][i, j] - m["rmse"][i, j]
        cn = list(u["concept"].values)
        if "head_weight_true" in u:
            for k, name in enumerate(PRESCRIBED):
                head_true[k] = float(u["head_weight_true"].sel(concept=name))
        hidden = u["c_true"].sel(true_concept="q_hidden").values
        for k, name in enumerate(concepts):
            if name in cn:
                cp = u["c_pred"].sel(concept=name).values
                head[i, j, k] = float(u["head_weight"].sel(concept=name))
                if name in PRESCRIBED:
                    ct = u["c_true"].sel(true_concept=name).values
                    fid_r[i, j, k] = _corr(cp, ct)
                    fid_r2[i, j, k] = _r2(cp, ct)
                else:
                    fid_r[i, j, k] = _corr(cp, hidden)
        if "free_0" in cn:
            m["free_hidden_abs_r"][i, j] = abs(_corr(u["c_pred"].sel(concept="free_0").values, hidden))
        m["hidden_best_abs_r"][i, j] = max(abs(_corr(u["c_pred"].sel(concept=c).values, hidden)) for c in cn)
        m["hidden_probe_r2"][i, j] = _hidden_probe_r2(u)
    for i, reg in enumerate(regimes):
        have = [s for s in seeds if (reg, s) in units]
        reps = {s: _bottleneck(units[(reg, s)]) for s in have}
        if len(have) < 2:
            continue
        idx = [seeds.index(s) for s in have]
        ck = pairwise(reps, linear_cka).values
        pr = pairwise(reps, procrustes_distance).values
        zs = {k: (v - v.mean(0)) / np.where(v.std(0) > 0, v.std(0), 1.0) for k, v in reps.items()}
        cz = pairwise(zs, linear_cka).values
        chans = {s: units[(reg, s)]["c_pred"].transpose("concept", ...).values.reshape(
            units[(reg, s)].sizes["concept"], -1) for s in have}
        names_i = list(units[(reg, have[0])]["concept"].values)
        per_pair = {}
        for a, b in itertools.product(range(len(have)), repeat=2):
            per_pair[a, b] = [_corr(x, y) for x, y in zip(chans[have[a]], chans[have[b]])]
            agree[i, idx[a], idx[b]] = np.mean(per_pair[a, b])
            cka[i, idx[a], idx[b]] = ck[a, b]
            cka_std[i, idx[a], idx[b]] = cz[a, b]
            proc[i, idx[a], idx[b]] = pr[a, b]
        for k, name in enumerate(concepts):
            if name in names_i:
                c = names_i.index(name)
                vals = [per_pair[a, b][c] for a, b in per_pair if a != b]
                concept_agree[i, k] = float(np.mean(vals))
        if "free_0" in units[(reg, have[0])]["concept"].values:
            fr = {s: units[(reg, s)]["c_pred"].sel(concept="free_0").values.ravel() for s in have}
            for a, b in itertools.product(range(len(have)), repeat=2):
                free_r[i, idx[a], idx[b]] = abs(_corr(fr[have[a]], fr[have[b]]))
    off = ~np.eye(S, dtype=bool)

    def offdiag_mean(arr):
        vals = [arr[i][off] for i in range(R)]
        return np.array([np.nanmean(v) if S > 1 and np.isfinite(v).any() else np.nan for v in vals])

    def offdiag_sd(arr):
        vals = [arr[i][np.triu_indices(S, 1)] for i in range(R)]  # each unordered seed pair once
        return np.array([np.nanstd(v, ddof=1) if np.isfinite(v).sum() > 1 else np.nan for v in vals])

    with np.errstate(invalid="ignore", divide="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN columns: concepts a regime lacks
        hm = np.nanmean(head, 1)
        hs = np.nanstd(head, 1)
        head_cv = hs / np.abs(hm)
        cv_mean = np.nanmean(head_cv[:, :len(PRESCRIBED)], 1) if R else np.zeros(0)
    dims_rs = ("regime", "seed")
    ds = xr.Dataset(
        {
            "rmse": (dims_rs, m["rmse"], {"units": "W m-2", "long_name": "RMSE of the MLHC tendency forecast"}),
            "rmse_climatology": (dims_rs, m["rmse_climatology"], {"units": "W m-2",
                                                                  "long_name": "RMSE of the climatology forecast"}),
            "acc": (dims_rs, m["acc"], {"units": "1", "long_name": "anomaly correlation"}),
            "acc_season": ((*dims_rs, "season"), acc_season, {"units": "1"}),
            "rmse_season": ((*dims_rs, "season"), rmse_season, {"units": "W m-2"}),
            "rmse_free0": (dims_rs, m["rmse_free0"], {"units": "W m-2", "long_name": "RMSE, free concept zeroed"}),
            "delta_rmse_free0": (dims_rs, m["delta_rmse_free0"],
                                 {"units": "W m-2", "long_name": "RMSE increase when the free concept is zeroed"}),
            "fidelity_r": ((*dims_rs, "concept"), fid_r, {"units": "1",
                           "long_name": "Pearson r of predicted vs true concept (free_0: vs q_hidden)"}),
            "fidelity_r2": ((*dims_rs, "concept"), fid_r2, {"units": "1", "long_name": "R2 of predicted concept"}),
            "free_hidden_abs_r": (dims_rs, m["free_hidden_abs_r"], {"units": "1",
                                                                    "long_name": "|r| of free concept with q_hidden"}),
            "hidden_best_abs_r": (dims_rs, m["hidden_best_abs_r"],
                                  {"units": "1", "long_name": "max over bottleneck channels of |r| with q_hidden"}),
            "head_weight": ((*dims_rs, "concept"), head, {"units": "1", "long_name": "head weight (normalised)"}),
            "head_weight_true": ("concept", head_true,
                                 {"units": "1", "long_name": "head weights of the exact budget (normalised units)"}),
            "head_weight_cv": (("regime", "concept"), head_cv,
                               {"units": "1", "long_name": "coefficient of variation of head weights over seeds"}),
            "cka": (("regime", "seed", "seed_other"), cka, {"units": "1", "long_name": "linear CKA of bottlenecks"}),
            "procrustes": (("regime", "seed", "seed_other"), proc, {"units": "1",
                                                                    "long_name": "Procrustes distance"}),
            "free_abs_r": (("regime", "seed", "seed_other"), free_r,
                           {"units": "1", "long_name": "|r| of the free concept between seeds"}),
            "cka_mean": ("regime", offdiag_mean(cka), {"units": "1", "long_name": "mean pairwise CKA over seeds"}),
            "cka_std": (("regime", "seed", "seed_other"), cka_std,
                        {"units": "1", "long_name": "linear CKA with each concept channel standardised"}),
            "cka_std_mean": ("regime", offdiag_mean(cka_std),
                             {"units": "1", "long_name": "mean pairwise CKA, channels standardised"}),
            "procrustes_mean": ("regime", offdiag_mean(proc), {"units": "1"}),
            "channel_agreement": (("regime", "seed", "seed_other"), agree,
                                  {"units": "1", "long_name": "mean over bottleneck channels of the signed r of the "
                                                              "same channel in two seeds"}),
            "channel_agreement_mean": ("regime", offdiag_mean(agree),
                                       {"units": "1", "long_name": "mean pairwise channel agreement over seeds"}),
            "channel_agreement_sd": ("regime", offdiag_sd(agree),
                                     {"units": "1", "long_name": "sd over seed pairs of the channel agreement"}),
            "concept_agreement": (("regime", "concept"), concept_agree,
                                  {"units": "1", "long_name": "signed r of each named bottleneck channel between "
                                                              "seeds (mean over seed pairs)"}),
            "hidden_probe_r2": (dims_rs, m["hidden_probe_r2"],
                                {"units": "1", "long_name": "held-out R2 of a linear probe from the whole "
                                                            "bottleneck to q_hidden"}),
            "free_abs_r_mean": ("regime", offdiag_mean(free_r), {"units": "1"}),
            "head_weight_cv_mean": ("regime", cv_mean,
                                    {"units": "1", "long_name": "mean CV of prescribed-concept head weights"}),
        },
        coords={"regime": regimes, "seed": seeds, "seed_other": seeds, "season": list(SEASONS), "concept": concepts},
        attrs={"description": "OceanCBM study: skill, concept fidelity, cross-seed consistency and the "
                              "recovery of the planted truth (recovery_* over truth x regime)",
               "target_units": VAR_ATTRS["dmlhc_dt"]["units"]},
    )
    return ds.merge(recovery(units))
