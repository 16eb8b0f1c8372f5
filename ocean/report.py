"""The study report: ``report.md`` / ``report.html`` opening with the model's competence (OceanCBM
against climatology, persistence and damped persistence, :mod:`ocean.competence`), then the verdict,
the planted truth, the figures, and the tables of skill, fidelity and consistency (:class:`scimech.studies.report.Report`). The outcome files
``findings.txt`` / ``recovery.txt`` are written by the study contract
(:meth:`scimech.studies.contract.Study.outcome`)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd
import torch
import xarray as xr

from scimech.analysis.attribution import attribute
from scimech.run.results import load_state
from scimech.studies.competence import save_competence
from scimech.studies.report import Report

from . import data as odata
from . import plots
from .competence import ocean_competence, world_of, yardstick_forecasts
from .data.reading import product_words
from .findings import consistency_ranking, findings_lines, verdict
from .model import build_model
from .plan import StudyConfig
from .recovery import recovery_table, summary_line
from .training import study_split, unit_normalizer
from .variables import INPUTS, PRESCRIBED

__all__ = ["write_report"]


def write_report(
    out: str | Path,
    summary: xr.Dataset,
    units: Mapping[tuple[str, int], xr.Dataset],
    cfg,
    *,
    seconds: float | None = None,
    data: str | Path | None = None,
) -> Path:
    """Write ``out/report.md`` (+ html): the model's competence first, then the verdict, the planted truth,
    the figures and the tables; the competence table is saved beside it (``competence.nc``, ``.csv``).

    The outcome files are written apart (:meth:`scimech.studies.contract.Study.outcome`). ``data``: the
    study's zarr store, for the persistence yardsticks and the ensemble and attribution figures.
    """
    out = Path(out)
    cfgd = dataclasses.asdict(cfg) if dataclasses.is_dataclass(cfg) else dict(cfg)
    config = cfg if isinstance(cfg, StudyConfig) else StudyConfig(**cfgd)
    world = world_of(config)
    rep = Report(out, title="OceanCBM study (scimech ocean)", world=world)
    table = competence_of(units, config, data)
    save_competence(table, out)
    rep.competence(table)
    real = bool(cfgd.get("data"))
    _introduction(rep, cfgd, real, data, seconds)
    rep.heading("Verdict (measured)")
    rep.text(verdict(summary))
    rep.text("\n".join(f"- {line}" for line in findings_lines(summary)))
    planted = "recovered" in summary and not real
    if planted:
        rep.heading("Planted truth vs what the study found")
        rep.text(
            f"**{summary_line(summary)}.** The synthetic ocean is built with answers: the hidden eddy heat "
            "flux `q_hidden` is in the target but never prescribed (only the free concept can carry it), each "
            "prescribed channel has its budget term, and the exact budget fixes the head weights. Each row of "
            "the planted-truth table (under Tables) says whether this run found them: RECOVERED when the whole "
            "bootstrap interval clears the threshold, MISSED otherwise, NOT ASSESSED without an interval. Rows "
            "marked 'no (contrast)' are regimes not built to recover that truth (prediction-only: no channel is "
            "tied to a term); they are reported, not counted."
        )
    rep.heading("Figures")
    _figures(rep, out, summary, units, cfg, data, real, yardsticks=_yardstick_rmse(table))
    rep.heading("Tables")
    if planted:
        _planted_tables(rep, summary)
    _tables(rep, summary, real)
    return rep.write()


def competence_of(units: Mapping[tuple[str, int], xr.Dataset], cfg: StudyConfig, data: str | Path | None):
    """The competence table (:func:`ocean.competence.ocean_competence`); without the study's store only
    the climatology yardstick (the units keep it)."""
    first = next(iter(units.values()))
    try:
        forecasts = yardstick_forecasts(first, data, cfg) if data is not None and Path(data).is_dir() else None
    except (OSError, ValueError, KeyError) as err:  # a store the yardsticks cannot read: say so, keep the rest
        forecasts, why = None, f"{type(err).__name__}: {err}"
    else:
        why = "the study's store is not there"
    if forecasts is None:
        forecasts = {"climatology": first["y_clim"].values}
        table = ocean_competence(units, forecasts, cfg, yardsticks=("climatology",))
        table.attrs["protocol"] += f"; persistence yardsticks not computed ({why})"
        return table
    return ocean_competence(units, forecasts, cfg)


#: what each supervision regime trains (:data:`scimech.analysis.concepts.REGIMES`), in the report's words
REGIME_WORDS = {
    "mixed": "forecast and budget-term losses together, plus a free concept",
    "prediction_only": "forecast loss only, no channel tied to a budget term",
    "prescription_only": "forecast and budget-term losses, no free concept",
}

#: the names the report's tables and figures use, said once (``{hidden}``: the synthetic ocean's hidden flux,
#: which a product does not have)
GLOSSARY = (
    "Names used below: MLHC, mixed-layer heat content; the budget terms (W m-2) q_surf (surface heat flux), "
    "q_ekman (Ekman advection), q_geo (geostrophic advection), q_entr (entrainment/detrainment){hidden} q_diff "
    "(horizontal diffusion){hidden_name}; free_0, the unsupervised (free) concept; "
    "RMSE, root-mean-square error of the forecast tendency (W m-2); ACC, anomaly correlation coefficient "
    "(forecast vs true anomaly from the climatology); CKA, centred kernel alignment of the bottleneck between "
    "seeds (1: the same up to rotation and scale); Procrustes distance (0: the same up to rotation); CV, "
    "coefficient of variation (sd / mean) of the head weights over seeds; n/a, a quantity the regime does not have "
    "(prescription_only has no free concept)."
)


def glossary(real: bool) -> str:
    """:data:`GLOSSARY` for a report on your product (``real``: no hidden flux to name) or on the synthetic ocean."""
    if real:
        return GLOSSARY.format(hidden=" and", hidden_name="")
    return GLOSSARY.format(hidden=",", hidden_name=" and q_hidden (the hidden eddy heat flux)")


def _words(values) -> str:
    """``a, b, c`` from a list (``[0, 1, 2]`` -> ``0, 1, 2``)."""
    return ", ".join(str(v) for v in (values or []))


def _introduction(rep: Report, cfgd: Mapping, real: bool, data, seconds: float | None) -> None:
    regimes = [str(r) for r in cfgd.get("regimes") or []]
    said = "; ".join(f"{r} ({REGIME_WORDS[r]})" if r in REGIME_WORDS else r for r in regimes)
    runs = (
        f" Supervision regimes: {said}. Seeds {_words(cfgd.get('seeds'))}; {cfgd.get('epochs')} epochs each."
        + (f" Wall time {seconds:.0f} s." if seconds else "")
        + " "
        + glossary(real)
    )
    if real:
        reading, lead, window = _what_was_read(cfgd, data)
        rep.text(reading.markdown())
        rep.text(
            f"Concept bottleneck forecasts of the mixed-layer heat content tendency (dMLHC/dt, W m-2) {lead} ahead "
            f"from {window} of inputs, on your product {product_words(reading)} "
            f"({reading.sections.get('time', {}).get('frequency', 'frequency not read')}). The budget concepts are "
            "computed from the product's own fields (ocean.concepts, as in the table above); a real product has no "
            "planted truth, so nothing here is scored against one." + runs
        )
    else:
        rep.text(
            "Concept bottleneck forecasts of the mixed-layer heat content tendency (dMLHC/dt, W m-2) one month ahead "
            f"from {cfgd.get('window')} months of inputs, on the synthetic mixed-layer ocean (exact heat budget; the "
            "hidden eddy heat flux `q_hidden` is never prescribed)." + runs
        )


def _yardstick_rmse(table: xr.Dataset) -> dict[str, float]:
    """The RMSE of each yardstick of the competence table (:func:`competence_of`)."""
    try:
        rmse = table["value"].sel(metric="RMSE")
        return {
            str(m): float(rmse.sel(model=m))
            for m, role in zip(table["model"].values, table["role"].values)
            if role == "yardstick"
        }
    except (KeyError, ValueError):  # a table without an RMSE row: the summary's climatology instead
        return {}


def _figures(
    rep: Report,
    out: Path,
    summary: xr.Dataset,
    units,
    cfg,
    data,
    real: bool,
    yardsticks: dict[str, float] | None = None,
) -> None:
    lines = ", ".join(yardsticks) if yardsticks else "climatology"
    rep.figure(
        plots.skill_figure(summary, yardsticks or None),
        "skill",
        caption="Skill on the test split: RMSE and anomaly correlation coefficient (ACC, forecast vs true anomaly from "
        f"the climatology) per supervision regime, dots the seeds, lines the yardsticks ({lines}); right: ACC per "
        "season (DJF: December-February, ...), mean over seeds",
    )
    first = (
        units.get(("mixed", min(s for r, s in units if r == "mixed")))
        if any(r == "mixed" for r, _ in units)
        else next(iter(units.values()))
    )
    free = "" if real else "; the free concept fitted to the hidden flux's scale"
    _figure(
        rep,
        lambda: plots.maps_figure(first),
        "maps",
        "One test month: true and forecast MLHC tendency, then each true term beside its predicted concept on one "
        f"shared colour scale (W m-2{free}); land grey",
    )
    who = f"{first.attrs.get('regime', '')} seed {first.attrs.get('seed', '')}"
    _figure(
        rep,
        lambda: plots.seasonal_skill_maps(first),
        "seasonal_skill",
        f"Anomaly correlation of the forecast per grid point and season ({who}; n: the season's test months over "
        "all members), the four seasons on one scale from -1 to 1 with one colour bar",
    )
    rep.figure(
        plots.cka_heatmaps(summary, "channel_agreement"),
        "channel_agreement",
        caption="Seed x seed channel agreement (signed r of the same named channel, mean over channels); panel "
        "title: the mean over seed pairs",
    )
    rep.figure(
        plots.cka_heatmaps(summary),
        "cka",
        caption="Seed x seed linear CKA of the bottleneck; panel title: the mean over seed pairs",
    )
    rep.figure(
        plots.head_weights_figure(summary),
        "head_weights",
        caption="Head weight of each concept per regime (bars: mean over seeds, dots: seeds; normalised units)"
        + ("" if real else "; red dashes: the exact budget's weights"),
    )
    if data is not None and Path(data).exists():
        ds = odata.open_zarr(data)
        _figure(
            rep,
            lambda: plots.ensemble_spread_figure(ds),
            "ensemble",
            "Area-mean MLHC over the record: ensemble mean and +/- one standard deviation over members (J m-2)",
        )
        try:
            fig = _attribution(out, ds, cfg, first)
            rep.figure(
                fig,
                "attribution",
                caption=f"GradientShap |attribution| of the area-mean forecast ({who}) to each input variable "
                "(captum), summed over the input months, mean over the first test windows (up to 4); every variable "
                "on one colour "
                "scale, so the maps compare variables",
            )
        except Exception as err:  # report the failure, keep the report
            rep.text(f"Attribution maps could not be made: {type(err).__name__}: {err}")


def _planted_tables(rep: Report, summary: xr.Dataset) -> None:
    tab = recovery_table(summary)
    rep.table(
        tab.drop(columns=["interval", "criterion"]).rename(columns={"expected": "built to recover"}).set_index("truth"),
        caption="Planted truth per regime (value: the measure with its interval)",
    )
    rep.table(
        pd.DataFrame(
            {
                "measure": summary["recovery_measure"].to_series(),
                "interval": summary["recovery_interval"].to_series(),
                "recovered when": summary["recovery_criterion"].to_series(),
            }
        ),
        caption="How each planted truth is scored",
    )


def _tables(rep: Report, summary: xr.Dataset, real: bool) -> None:
    skill = pd.DataFrame(
        {
            "RMSE (W m-2)": summary["rmse"].mean("seed").to_series(),
            "RMSE sd over seeds": summary["rmse"].std("seed").to_series(),
            "ACC": summary["acc"].mean("seed").to_series(),
            "RMSE climatology (W m-2)": summary["rmse_climatology"].mean("seed").to_series(),
            "RMSE increase, free zeroed (W m-2)": summary["delta_rmse_free0"].mean("seed").to_series(),
        }
    )
    _table(rep, skill, caption="Skill on the test split (mean over seeds)")
    _table(rep, summary["acc_season"].mean("seed").to_pandas(), caption="Anomaly correlation per season")
    _table(
        rep,
        summary["fidelity_r"].mean("seed").to_pandas(),
        caption="Pearson r of predicted vs true concept (free_0: "
        + ("no truth on a product" if real else "vs q_hidden")
        + "); mean over seeds",
    )
    _table(rep, summary["fidelity_r2"].mean("seed").to_pandas(), caption="R2 of predicted prescribed concepts")
    if not real:  # q_hidden is the synthetic ocean's: a product has none
        _table(
            rep,
            pd.DataFrame(
                {
                    "|r| free vs q_hidden": summary["free_hidden_abs_r"].mean("seed").to_series(),
                    "best |r| any channel vs q_hidden": summary["hidden_best_abs_r"].mean("seed").to_series(),
                    "probe R2 (all channels) vs q_hidden": summary["hidden_probe_r2"].mean("seed").to_series(),
                }
            ),
            caption="Where the hidden process went",
        )
    _table(rep, consistency_ranking(summary), caption="Each consistency measure and the regime it ranks first")
    _table(
        rep,
        summary["concept_agreement"].to_pandas(),
        caption="Signed r of each named channel between seeds (mean over seed pairs)",
    )
    _table(
        rep,
        pd.DataFrame(
            {
                "CKA": summary["cka_mean"].to_series(),
                "CKA (channels standardised)": summary["cka_std_mean"].to_series(),
                "Procrustes distance": summary["procrustes_mean"].to_series(),
                "|r| free across seeds": summary["free_abs_r_mean"].to_series(),
                "CV head weights (prescribed)": summary["head_weight_cv_mean"].to_series(),
            }
        ),
        caption="Cross-seed consistency, mean over seed pairs",
    )
    heads = summary["head_weight"].mean("seed").to_pandas()
    if "head_weight_true" in summary and not real:
        heads.loc["exact budget"] = summary["head_weight_true"].to_series()
    _table(
        rep,
        heads,
        caption="Head weights (normalised units; mean over seeds"
        + ("" if real else "; last row: the exact budget")
        + ")",
    )


def _table(rep: Report, table, caption: str) -> None:
    """A table with its missing numbers written ``n/a`` (a quantity the regime does not have: prescription_only's
    free concept) and the columns with no number at all left out."""
    df = table if isinstance(table, pd.DataFrame) else pd.DataFrame(table)
    df = df.loc[:, df.notna().any(axis=0)]
    rep.table(df.astype(object).where(df.notna(), "n/a"), caption=caption)


def _figure(rep: Report, make, name: str, caption: str) -> None:
    """A figure, or where it could not be drawn (a product's calendar the plot cannot label) one line saying so;
    the report is kept either way."""
    try:
        fig = make()
    except (TypeError, ValueError) as err:
        rep.text(f"Figure '{name}' ({caption}) could not be drawn: {type(err).__name__}: {err}")
        return
    rep.figure(fig, name, caption=caption)


def _what_was_read(cfgd: Mapping, data: str | Path | None):
    """The reading of your product (kept by the mapped store, else read again: seconds, no training) and the
    lead and window in the product's own frequency (:func:`ocean.timeaxis.step_words`)."""
    from .data.products import inspect, open_product
    from .data.reading import reading_of
    from .data.timeaxis import read_time, step_words

    store = odata.open_zarr(data, validate_schema=False) if data is not None and Path(data).exists() else None
    reading = reading_of(store) if store is not None else None
    if reading is None:
        product = dict(cfgd.get("product") or {})
        reading = inspect(cfgd["data"], **{k: product[k] for k in ("select", "member", "mesh_mask") if k in product})
    timed = store if store is not None else read_time(open_product(cfgd["data"]))
    return reading, step_words(timed, int(cfgd.get("lead", 1))), step_words(timed, int(cfgd.get("window", 1)))


def _attribution(out: Path, ds: xr.Dataset, cfg, unit: xr.Dataset):
    """GradientShap attributions of the basin-mean forecast of one unit's model."""
    regime, seed = unit.attrs["regime"], int(unit.attrs["seed"])
    if "study_config" in unit.attrs:
        cfg = StudyConfig(**json.loads(unit.attrs["study_config"]))
    ckpt = Path(out) / "run" / "checkpoints" / f"{regime}_seed{seed}.safetensors"
    if not ckpt.exists():
        ckpt = Path(out) / "checkpoints" / f"{regime}_seed{seed}.safetensors"
    state = load_state(ckpt)
    n_free = int(sum(str(c).startswith("free") for c in unit["concept"].values))
    model = build_model(cfg.window * len(INPUTS), PRESCRIBED, n_free, width=cfg.width)
    model.load_state_dict(state["model"])
    split = study_split(ds, cfg)
    norm = unit_normalizer(unit, ds, split, cfg)
    region = _attribution_region(ds["mask"], cfg.patch)
    test = odata.WindowDataset(ds.isel(region), split.test, norm, window=cfg.window, lead=cfg.lead)
    x = torch.stack([test[i]["x"] for i in range(min(4, len(test)))])
    sea = ds["mask"].isel(region)
    mask = torch.from_numpy(sea.values.astype(np.float32))
    attr = attribute(
        model,
        x,
        method="gradient_shap",
        n_samples=8,
        reduce_output=lambda y: (y[:, 0] * mask).sum((-1, -2)) / mask.sum(),
    )
    fig = plots.attribution_figure(attr, sea, list(INPUTS), cfg.window)
    if region:
        fig.suptitle(
            "On the region with the most ocean: "
            f"rows {region['lat'].start}-{region['lat'].stop - 1}, columns {region['lon'].start}-{region['lon'].stop - 1} "
            f"of {ds.sizes['lat']} x {ds.sizes['lon']}",
            fontsize=9,
        )
    return fig


#: grid points above which attribution maps are drawn on one region, not the whole grid:
#: GradientShap's 8 samples x 4 windows of the whole ORCA025 grid (1021 x 1442) need 14 GB
WHOLE_GRID_POINTS = 512 * 512
#: the side of that region, in grid points (rounded down to whole training patches): 256 x 256 points
#: need about 1/22 of the whole grid's memory, and are wide enough that the model's zero-padded edges
#: do not fill the map (on one 32 x 32 training patch they did)
REGION_SIDE = 256


def _attribution_region(mask: xr.DataArray, patch) -> dict[str, slice]:
    """``{}`` (the whole grid) for a grid of at most :data:`WHOLE_GRID_POINTS`; else the tile of
    :data:`REGION_SIDE` points a side (whole training patches ``cfg.patch`` where given) with the most
    ocean points, where the convolutional model forecasts as it does on the globe."""
    ny, nx = mask.sizes["lat"], mask.sizes["lon"]
    if ny * nx <= WHOLE_GRID_POINTS:
        return {}

    def side(p: int | None, n: int) -> int:
        return min(n, REGION_SIDE if not p else max(int(p), REGION_SIDE // int(p) * int(p)))

    py, px = (side(patch[0], ny), side(patch[1], nx)) if patch else (side(None, ny), side(None, nx))
    sea = mask.values.astype(bool)
    tiles = [(i, j) for i in range(0, ny - py + 1, py) for j in range(0, nx - px + 1, px)]
    i, j = max(tiles, key=lambda t: (sea[t[0] : t[0] + py, t[1] : t[1] + px].sum(), -t[0], -t[1]))
    return {"lat": slice(i, i + py), "lon": slice(j, j + px)}
