"""The study's evidence: finished units analysed into one labelled summary (:func:`analyse`).

- skill: RMSE (W m-2) and anomaly correlation (against the training climatology of each
  calendar month and point), overall and per season; the RMSE change when the free
  concept is zeroed;
- concept fidelity: Pearson r and R2 of each predicted prescribed concept vs the truth,
  |r| of the free concept with ``q_hidden``, the best |r| of any channel with it and the
  held-out R2 of a linear probe of the whole bottleneck;
- cross-seed consistency of the bottleneck (test points x concepts): pairwise linear CKA
  and Procrustes distance, channel agreement, |r| of the free concept across seeds, and the
  coefficient of variation of the head weights across seeds;
- planted truth vs what the study found (:mod:`ocean.recovery`): the hidden flux in the
  free concept, each budget term in its channel, the budget's head weights, per regime.
"""

from __future__ import annotations

import itertools
import json
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import xarray as xr
from sklearn.linear_model import RidgeCV

from scimech.analysis.geometry import linear_cka, pairwise, procrustes_distance
from scimech.errors import ConfigError
from scimech.run import results
from scimech.studies.evidence import Evidence as StudyEvidence
from scimech.studies.verdicts import PlantedTruthRow

from .plan import StudyConfig
from .recovery import recovery
from .variables import PRESCRIBED, VAR_ATTRS

__all__ = ["analyse", "SEASONS", "Evidence", "load_evidence", "store_of"]

SEASONS = {"DJF": (12, 1, 2), "MAM": (3, 4, 5), "JJA": (6, 7, 8), "SON": (9, 10, 11)}
CONCEPT_COLUMNS = [*PRESCRIBED, "free_0"]
#: per-unit measures over (regime, seed)
_PER_UNIT = (
    "rmse",
    "acc",
    "rmse_free0",
    "delta_rmse_free0",
    "free_hidden_abs_r",
    "hidden_best_abs_r",
    "rmse_climatology",
    "hidden_probe_r2",
)


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


def _nan(*shape) -> np.ndarray:
    return np.full(shape, np.nan)


def _months(times) -> np.ndarray:
    # the month of each time in any calendar (a 360_day 30 February has no numpy datetime64)
    return xr.DataArray(np.asarray(times), dims="t").dt.month.values


def _unit_measures(u: xr.Dataset, ev: dict, i: int, j: int) -> None:
    """Skill and fidelity of one unit into row ``(i, j)`` of the arrays in ``ev``."""
    m = ev["m"]
    yt, yp, yc = u["y_true"].values, u["y_pred"].values, u["y_clim"].values
    m["rmse"][i, j] = _rmse(yp, yt)
    m["rmse_climatology"][i, j] = _rmse(yc, yt)
    m["acc"][i, j] = _corr(yp - yc, yt - yc)
    mon = _months(u["time"].values)
    for k, (_, months) in enumerate(SEASONS.items()):
        sel = np.isin(mon, months)
        if sel.sum() > 0:
            ev["acc_season"][i, j, k] = _corr(yp[sel] - yc[sel], yt[sel] - yc[sel])
            ev["rmse_season"][i, j, k] = _rmse(yp[sel], yt[sel])
    if "y_pred_free0" in u:
        m["rmse_free0"][i, j] = _rmse(u["y_pred_free0"].values, yt)
        m["delta_rmse_free0"][i, j] = m["rmse_free0"][i, j] - m["rmse"][i, j]
    cn = list(u["concept"].values)
    if "head_weight_true" in u:
        for k, name in enumerate(PRESCRIBED):
            ev["head_true"][k] = float(u["head_weight_true"].sel(concept=name))
    hidden = u["c_true"].sel(true_concept="q_hidden").values
    for k, name in enumerate(CONCEPT_COLUMNS):
        if name in cn:
            cp = u["c_pred"].sel(concept=name).values
            ev["head"][i, j, k] = float(u["head_weight"].sel(concept=name))
            if name in PRESCRIBED:
                ct = u["c_true"].sel(true_concept=name).values
                ev["fid_r"][i, j, k] = _corr(cp, ct)
                ev["fid_r2"][i, j, k] = _r2(cp, ct)
            else:
                ev["fid_r"][i, j, k] = _corr(cp, hidden)
    if "free_0" in cn:
        m["free_hidden_abs_r"][i, j] = abs(_corr(u["c_pred"].sel(concept="free_0").values, hidden))
    m["hidden_best_abs_r"][i, j] = max(abs(_corr(u["c_pred"].sel(concept=c).values, hidden)) for c in cn)
    m["hidden_probe_r2"][i, j] = _hidden_probe_r2(u)


def _regime_consistency(units: Mapping[tuple[str, int], xr.Dataset], reg: str, i: int, seeds: list, ev: dict) -> None:
    """Seed x seed consistency of regime ``reg`` into row ``i`` of the arrays in ``ev``."""
    have = [s for s in seeds if (reg, s) in units]
    reps = {s: _bottleneck(units[(reg, s)]) for s in have}
    if len(have) < 2:
        return
    idx = [seeds.index(s) for s in have]
    ck = pairwise(reps, linear_cka).values
    pr = pairwise(reps, procrustes_distance).values
    zs = {k: (v - v.mean(0)) / np.where(v.std(0) > 0, v.std(0), 1.0) for k, v in reps.items()}
    cz = pairwise(zs, linear_cka).values
    chans = {
        s: units[(reg, s)]["c_pred"].transpose("concept", ...).values.reshape(units[(reg, s)].sizes["concept"], -1)
        for s in have
    }
    names_i = list(units[(reg, have[0])]["concept"].values)
    per_pair = {}
    for a, b in itertools.product(range(len(have)), repeat=2):
        per_pair[a, b] = [_corr(x, y) for x, y in zip(chans[have[a]], chans[have[b]])]
        ev["agree"][i, idx[a], idx[b]] = np.mean(per_pair[a, b])
        ev["cka"][i, idx[a], idx[b]] = ck[a, b]
        ev["cka_std"][i, idx[a], idx[b]] = cz[a, b]
        ev["proc"][i, idx[a], idx[b]] = pr[a, b]
    for k, name in enumerate(CONCEPT_COLUMNS):
        if name in names_i:
            c = names_i.index(name)
            vals = [per_pair[a, b][c] for a, b in per_pair if a != b]
            ev["concept_agree"][i, k] = float(np.mean(vals))
    if "free_0" in units[(reg, have[0])]["concept"].values:
        fr = {s: units[(reg, s)]["c_pred"].sel(concept="free_0").values.ravel() for s in have}
        for a, b in itertools.product(range(len(have)), repeat=2):
            ev["free_r"][i, idx[a], idx[b]] = abs(_corr(fr[have[a]], fr[have[b]]))


def _offdiag_mean(arr: np.ndarray, S: int) -> np.ndarray:
    """Per regime: the mean over ordered seed pairs (NaN with one seed)."""
    off = ~np.eye(S, dtype=bool)
    vals = [arr[i][off] for i in range(arr.shape[0])]
    return np.array([np.nanmean(v) if S > 1 and np.isfinite(v).any() else np.nan for v in vals])


def _offdiag_sd(arr: np.ndarray, S: int) -> np.ndarray:
    """Per regime: the sd over unordered seed pairs (each pair once)."""
    vals = [arr[i][np.triu_indices(S, 1)] for i in range(arr.shape[0])]
    return np.array([np.nanstd(v, ddof=1) if np.isfinite(v).sum() > 1 else np.nan for v in vals])


def _head_spread(head: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Coefficient of variation of the head weights over seeds, and its mean over the prescribed ones."""
    with np.errstate(invalid="ignore", divide="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN columns: concepts a regime lacks
        hm = np.nanmean(head, 1)
        hs = np.nanstd(head, 1)
        head_cv = hs / np.abs(hm)
        cv_mean = np.nanmean(head_cv[:, : len(PRESCRIBED)], 1) if head.shape[0] else np.zeros(0)
    return head_cv, cv_mean


def analyse(units: Mapping[tuple[str, int], xr.Dataset]) -> xr.Dataset:
    """Skill, fidelity and cross-seed consistency of finished units (see module doc).

    Returns
    -------
    xr.Dataset
        dims ``regime``, ``seed``, ``season``, ``concept`` (prescribed + ``free_0``),
        ``seed_other``, ``truth``; per-unit metrics over (regime, seed), consistency
        matrices over (regime, seed, seed_other), summaries over regime, and the planted
        truth's recovery over (truth, regime) (:func:`ocean.recovery.recovery`).

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
    >>> from ocean.experiment import analyse
    >>> summary = analyse({("mixed", 0): unit})
    >>> summary["rmse"].dims, summary["regime"].values.tolist()
    (('regime', 'seed'), ['mixed'])
    """
    regimes = list(dict.fromkeys(r for r, _ in units))
    seeds = sorted({s for _, s in units})
    R, S, C = len(regimes), len(seeds), len(CONCEPT_COLUMNS)
    ev = {
        "m": {k: _nan(R, S) for k in _PER_UNIT},
        "acc_season": _nan(R, S, 4),
        "rmse_season": _nan(R, S, 4),
        "fid_r": _nan(R, S, C),
        "fid_r2": _nan(R, S, C),
        "head": _nan(R, S, C),
        "head_true": _nan(C),
        **{k: _nan(R, S, S) for k in ("cka", "proc", "free_r", "cka_std", "agree")},
        "concept_agree": _nan(R, C),
    }
    for (reg, seed), u in units.items():
        _unit_measures(u, ev, regimes.index(reg), seeds.index(seed))
    for i, reg in enumerate(regimes):
        _regime_consistency(units, reg, i, seeds, ev)
    summary = _summary_dataset(ev, regimes, seeds).merge(recovery(units))
    summary.attrs["world"] = _world(next(iter(units.values())))
    return summary


def _world(unit: xr.Dataset) -> str:
    """What the units were trained and tested on: ``synthetic world (...)`` or ``your product (...)``."""
    from .competence import world_of

    text = unit.attrs.get("study_config")
    try:
        cfg = StudyConfig(**json.loads(text)) if text else StudyConfig()
    except (TypeError, ValueError):
        return ""
    return world_of(cfg)


def _summary_dataset(ev: dict, regimes: list, seeds: list) -> xr.Dataset:
    """The summary's variables, each with its units and long name."""
    m, S = ev["m"], len(seeds)
    head_cv, cv_mean = _head_spread(ev["head"])
    acc_season, rmse_season, fid_r, fid_r2, head, head_true = (
        ev[k] for k in ("acc_season", "rmse_season", "fid_r", "fid_r2", "head", "head_true")
    )
    cka, proc, free_r, cka_std, agree, concept_agree = (
        ev[k] for k in ("cka", "proc", "free_r", "cka_std", "agree", "concept_agree")
    )

    def offdiag_mean(arr):
        return _offdiag_mean(arr, S)

    def offdiag_sd(arr):
        return _offdiag_sd(arr, S)

    dims_rs = ("regime", "seed")
    ds = xr.Dataset(
        {
            "rmse": (dims_rs, m["rmse"], {"units": "W m-2", "long_name": "RMSE of the MLHC tendency forecast"}),
            "rmse_climatology": (
                dims_rs,
                m["rmse_climatology"],
                {"units": "W m-2", "long_name": "RMSE of the climatology forecast"},
            ),
            "acc": (dims_rs, m["acc"], {"units": "1", "long_name": "anomaly correlation"}),
            "acc_season": ((*dims_rs, "season"), acc_season, {"units": "1"}),
            "rmse_season": ((*dims_rs, "season"), rmse_season, {"units": "W m-2"}),
            "rmse_free0": (dims_rs, m["rmse_free0"], {"units": "W m-2", "long_name": "RMSE, free concept zeroed"}),
            "delta_rmse_free0": (
                dims_rs,
                m["delta_rmse_free0"],
                {"units": "W m-2", "long_name": "RMSE increase when the free concept is zeroed"},
            ),
            "fidelity_r": (
                (*dims_rs, "concept"),
                fid_r,
                {"units": "1", "long_name": "Pearson r of predicted vs true concept (free_0: vs q_hidden)"},
            ),
            "fidelity_r2": ((*dims_rs, "concept"), fid_r2, {"units": "1", "long_name": "R2 of predicted concept"}),
            "free_hidden_abs_r": (
                dims_rs,
                m["free_hidden_abs_r"],
                {"units": "1", "long_name": "|r| of free concept with q_hidden"},
            ),
            "hidden_best_abs_r": (
                dims_rs,
                m["hidden_best_abs_r"],
                {"units": "1", "long_name": "max over bottleneck channels of |r| with q_hidden"},
            ),
            "head_weight": ((*dims_rs, "concept"), head, {"units": "1", "long_name": "head weight (normalised)"}),
            "head_weight_true": (
                "concept",
                head_true,
                {"units": "1", "long_name": "head weights of the exact budget (normalised units)"},
            ),
            "head_weight_cv": (
                ("regime", "concept"),
                head_cv,
                {"units": "1", "long_name": "coefficient of variation of head weights over seeds"},
            ),
            "cka": (("regime", "seed", "seed_other"), cka, {"units": "1", "long_name": "linear CKA of bottlenecks"}),
            "procrustes": (("regime", "seed", "seed_other"), proc, {"units": "1", "long_name": "Procrustes distance"}),
            "free_abs_r": (
                ("regime", "seed", "seed_other"),
                free_r,
                {"units": "1", "long_name": "|r| of the free concept between seeds"},
            ),
            "cka_mean": ("regime", offdiag_mean(cka), {"units": "1", "long_name": "mean pairwise CKA over seeds"}),
            "cka_std": (
                ("regime", "seed", "seed_other"),
                cka_std,
                {"units": "1", "long_name": "linear CKA with each concept channel standardised"},
            ),
            "cka_std_mean": (
                "regime",
                offdiag_mean(cka_std),
                {"units": "1", "long_name": "mean pairwise CKA, channels standardised"},
            ),
            "procrustes_mean": ("regime", offdiag_mean(proc), {"units": "1"}),
            "channel_agreement": (
                ("regime", "seed", "seed_other"),
                agree,
                {
                    "units": "1",
                    "long_name": "mean over bottleneck channels of the signed r of the same channel in two seeds",
                },
            ),
            "channel_agreement_mean": (
                "regime",
                offdiag_mean(agree),
                {"units": "1", "long_name": "mean pairwise channel agreement over seeds"},
            ),
            "channel_agreement_sd": (
                "regime",
                offdiag_sd(agree),
                {"units": "1", "long_name": "sd over seed pairs of the channel agreement"},
            ),
            "concept_agreement": (
                ("regime", "concept"),
                concept_agree,
                {
                    "units": "1",
                    "long_name": "signed r of each named bottleneck channel between seeds (mean over seed pairs)",
                },
            ),
            "hidden_probe_r2": (
                dims_rs,
                m["hidden_probe_r2"],
                {"units": "1", "long_name": "held-out R2 of a linear probe from the whole bottleneck to q_hidden"},
            ),
            "free_abs_r_mean": ("regime", offdiag_mean(free_r), {"units": "1"}),
            "head_weight_cv_mean": (
                "regime",
                cv_mean,
                {"units": "1", "long_name": "mean CV of prescribed-concept head weights"},
            ),
        },
        coords={
            "regime": regimes,
            "seed": seeds,
            "seed_other": seeds,
            "season": list(SEASONS),
            "concept": CONCEPT_COLUMNS,
        },
        attrs={
            "description": "OceanCBM study: skill, concept fidelity, cross-seed consistency and the "
            "recovery of the planted truth (recovery_* over truth x regime)",
            "target_units": VAR_ATTRS["dmlhc_dt"]["units"],
        },
    )
    return ds


@dataclass
class Evidence(StudyEvidence):
    """What a run hands to the findings and the report (the evidence every study hands on,
    :class:`scimech.studies.evidence.Evidence`): the ``summary`` (:func:`ocean.evidence.analyse`),
    the finished ``units`` by ``(regime, seed)``, the settings, the wall time and the study's
    zarr store (``None`` when it is not there)."""

    summary: xr.Dataset
    units: dict[tuple[str, int], xr.Dataset]
    config: StudyConfig
    seconds: float | None = None
    data: Path | None = None

    def measurements(self) -> dict[str, xr.Dataset]:
        """``{"summary": summary}``: every measure over (regime, seed), saved as ``summary.nc``."""
        return {"summary": self.summary}

    def planted_rows(self) -> list[PlantedTruthRow] | None:
        """Each (truth, regime) cell (:func:`ocean.recovery.planted_rows`); ``None`` for your product."""
        from .recovery import planted_rows

        if getattr(self.config, "data", None) or "recovered" not in self.summary:
            return None
        return planted_rows(self.summary)

    def phase_seconds(self) -> dict[str, float]:
        """``{"run": seconds}`` of the units and their analysis (``{}`` for a folder read back)."""
        return {} if self.seconds is None else {"run": float(self.seconds)}


def store_of(run_dir: Path, cfg: StudyConfig) -> Path | None:
    """The zarr store a run read: ``run_dir/ocean.zarr``, or your store read in place."""
    for path in (run_dir / "ocean.zarr", Path(cfg.data) if isinstance(cfg.data, str) else None):
        if path is not None and path.is_dir():
            return path
    return None


def load_evidence(folder: str | Path) -> Evidence:
    """The evidence of a finished (or partly finished) study folder: its units analysed anew.

    Reads ``folder/units`` (a ``scimech ocean study --out`` folder) or ``folder/run/units``
    (a ``scimech demo`` folder).

    Raises
    ------
    ConfigError
        No finished units in the folder.
    """
    folder = Path(folder)
    run_dir = folder if (folder / "units").is_dir() or not (folder / "run" / "units").is_dir() else folder / "run"
    store = results.UnitStore(run_dir / "units")
    units = {}
    for k in store.keys():
        u = store.load(k)
        units[(u.attrs["regime"], int(u.attrs["seed"]))] = u
    if not units:
        raise ConfigError(f"No finished units in {folder}; run `scimech ocean study --out {folder}` first.")
    first = next(iter(units.values()))
    cfg = StudyConfig(**json.loads(first.attrs["study_config"])) if "study_config" in first.attrs else StudyConfig()
    return Evidence(analyse(units), units, cfg, None, store_of(run_dir, cfg))
