"""The astro study's report, as ``report.md`` and ``report.html`` (:class:`scimech.studies.report.Report`):
the model's competence first (:mod:`astro.competence`), the plain list of which findings reproduce and
(for a planted stand-in) the planted truth against what the study found, then figures, then tables."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd

from scimech.studies.competence import save_competence
from scimech.studies.reading import Reading
from scimech.studies.report import Report

from . import plots
from .competence import astro_competence, world_of
from .findings import findings, studied_block
from .measures.assumptions import site_profile_table
from .plan import StudySettings
from .recovery import planted_findings, planted_recovery, recovery_line, verdict_wording

__all__ = ["write_report", "galaxies_text"]

#: the heading of the section on what the verbs assumed
ASSUMED = "## What the verbs assumed about the model"


def galaxies_text(settings: StudySettings) -> str | None:
    """What a study ran on, for the report's first paragraph (``None``: the stand-in's synthetic galaxies)."""
    s = settings
    if s.source != "catalog":
        return None
    return (
        f"Galaxies: the Legacy Survey catalogue {s.catalog}"
        + (f" with the cut-outs {s.images}" if s.images else " (photometry only)")
        + f", its objects split at random (seed {s.seed}) into training and {s.test_fraction:.0%} test galaxies, "
        + "each object's rows on one side; "
        + (f"model {s.model}." if s.model else "a stand-in `aion.AION` trained on the training rows.")
    )


def write_report(
    res: dict,
    out: Path,
    *,
    title: str = "AION-1 redshift head analysis (stand-in)",
    timings: dict | None = None,
    galaxies: str | None = None,
    reading: Reading | None = None,
) -> Path:
    """The model's competence first (its redshifts against the template fit and the colour kNN on the same
    galaxies, :mod:`astro.competence`, saved as ``competence.nc`` / ``.csv``), then the plain list of which
    findings reproduce, the planted truth (for a planted stand-in), the figures and the tables.

    ``galaxies`` says what the study ran on (default: the synthetic galaxies of the stand-in);
    ``reading``: what was read from your catalogue (:func:`astro.data.catalog.read_legacy_survey`),
    shown after the competence table."""
    iv = res["interventions"]
    planted = bool(int(iv.attrs.get("planted", 0)))
    world = world_of(res["predictions"], reading)
    rep = Report(out, title=title.replace("(stand-in)", "(planted stand-in)") if planted else title, world=world)
    table = astro_competence(res["predictions"], world=world)
    if table is not None:
        save_competence(table, out)
        rep.competence(table)
    if reading is not None:
        rep.text(reading.markdown())
    rep.text(_introduction(res, galaxies, planted))
    rows = planted_recovery(res)
    if rows:
        rep.text(
            "## Planted truth vs what the study found\n\n"
            + recovery_line(rows)
            + "\n\nA planted fact is RECOVERED when the study, blind to what was planted, named the planted head "
            "and its effect intervals say what was planted; MISSED otherwise (table under Tables)."
        )
    fnd = findings(res)
    rep.text(_findings_text(res, fnd))
    rep.heading("Figures")
    _figures(rep, res, fnd)
    rep.heading("Tables")
    if rows:
        rep.table(
            pd.DataFrame(
                [{"truth": r.truth, "found": r.found, "verdict": r.verdict} for r in rows],
                index=[r.label for r in rows],
            ),
            caption="Planted truth vs what the study found (findings 3 and 4, every intervention)",
        )
    _tables(rep, res, timings)
    _assumptions(rep, res)
    return rep.write()


def _findings_text(res: dict, fnd) -> str:
    """The reference findings, one item each. A finding planted in the stand-in reads its planted verdict
    (``RECOVERED (planted)`` / ``MISSED (planted)``, from the planted-truth row on the planted block); where
    the reference's whole claim (with what was not planted) reads otherwise, that verdict follows on its own
    line with the block its evidence reads, so no line mixes two verdicts unattributed."""
    planted = planted_findings(res, fnd) if planted_recovery(res) else {}
    iv = res["interventions"].attrs
    pb, studied = int(iv.get("planted_block", -1)), int(iv.get("block", -1))
    lines = ["## Findings of the reference study, tested here", ""]
    for i, (f, (wording, qualifier, _)) in enumerate(zip(fnd, verdict_wording(res, fnd))):
        why = f" ({f['reason']})" if f["verdict"] == "NOT ASSESSED" else ""
        if i not in planted:
            lines.append(f"- **{wording or f['verdict']}**{qualifier}{why}: {f['finding']}. Evidence: {f['evidence']}.")
            continue
        recovered = planted[i][0]
        differs = (
            recovered is not None and f["verdict"] != "NOT ASSESSED" and (f["verdict"] == "REPRODUCED") != recovered
        )
        where = (
            f" Verdict read on the planted head of block {pb} (the planted-truth table under Tables)."
            if i in (2, 3) and pb >= 0
            else ""
        )
        lines.append(f"- **{wording}**{why}: {f['finding']}.{where}")
        if differs or (i in (2, 3) and pb != studied):
            block = f", read blind in block {studied} (the layer probes' block)" if i in (2, 3) and studied >= 0 else ""
            lines.append(
                f"  - The reference's whole claim, with what was not planted in this model{block}: "
                f"**{f['verdict']}**{why}. Evidence: {f['evidence']}."
            )
        else:
            lines.append(f"  - Evidence: {f['evidence']}.")
    return "\n".join(lines)


def _introduction(res: dict, galaxies: str | None, planted: bool) -> str:
    model = res["predictions"].attrs.get("model_note", "")
    return (
        (
            galaxies
            or "Stand-in: a small `aion.AION` subclass (coarse 6x6 image-token grid) trained on "
            "synthetic galaxies (kcorrect SEDs, Calzetti dust, DECam photometry, bulge+disk Sersic images)."
        )
        + (f" {model}" if model else "")
        + " 'photometry' hides the image tokens with AION's input mask; 'multimodal' shows them."
        + (
            " This is the *planted* stand-in: image tokens reach the redshift only through one head of "
            "block 0, and another head of block 0 encodes colours but is cut from the output "
            "(astro.models.planted); the study is run blind to that and compared with it below."
            if planted
            else ""
        )
    )


def _figures(rep: Report, res: dict, fnd) -> None:
    adv, iv = res["advantage"], res["interventions"]
    rep.figure(
        plots.z_scatter(res["predictions"]),
        "z_scatter",
        "Photometric redshift z_phot against the true redshift z_spec of every test galaxy: the dissected model "
        "(photometry-only, multimodal) and the yardsticks (template fit, colour kNN); dashes z_phot = z_spec, dotted "
        "the |dz| = 0.15 outlier bounds, dz = (z_phot - z_spec) / (1 + z_spec)",
    )
    rep.figure(
        plots.metrics_by_population(adv),
        "metrics_by_population",
        "sigma_NMAD of dz per population of test galaxies, the dissected model beside the yardsticks; bars: 95% "
        f"bootstrap intervals ({adv.attrs.get('n_bootstrap', 'n')} resamples)",
    )
    rep.figure(
        plots.layer_curves(res["layers"]),
        "layer_curves",
        "Cross-validated linear-probe R2 of z and of the dust attenuation A_V from each encoder block's catalogue "
        "tokens, photometry-only and multimodal runs; bands: 95% bootstrap intervals",
    )
    studied = studied_block(res)
    blk = int(studied["interventions"].attrs.get("block", 0))
    lost = "advantage_lost_low" in iv  # a study saved before the intervals: the share of the dusty advantage
    right = (
        "multimodal advantage lost on all test galaxies when the head is intervened on in both modes, in mean|dz| "
        "(the advantage is the photometry-only minus the multimodal mean|dz|); * marks an effect whose 95% "
        "bootstrap interval excludes 0"
        if lost
        else "share of the dusty galaxies' multimodal advantage lost when the head is intervened on (no intervals "
        "saved with this study)"
    )
    rep.figure(
        plots.head_heatmap(res["head_probes"], iv, **(dict(population="all", effect="lost") if lost else {})),
        "head_heatmap",
        f"Heads of {_blocks_text(res)}, one row per block. Left: cross-validated probe R2 of each head's output "
        f"for colours (g-r, r-i, i-z), the template-fit redshift (z_template), z and A_V (a_v). Right: {right}. "
        f"Findings 3 and 4 read block {blk}, the one the layer probes localise the gain to",
    )
    rep.figure(
        plots.radial_maps(res["radial"]),
        "radial_maps",
        f"Each head's image-token output on the {_grid_text(res['radial'])} token grid, {_blocks_text(res)}: the mean "
        "projection on the "
        "head's first principal component (PC1), one colour scale for every head; |rho| with radius: the rank "
        "correlation (Spearman) of the map with the distance from the grid's centre (1: organised radially)",
    )
    h2 = int(fnd[3]["head"])
    rep.figure(
        plots.dz_vs_av(res["predictions"], studied["interventions"], h2),
        "dz_vs_av",
        f"Median dz = (z_phot - z_spec) / (1 + z_spec) in bins of intrinsic dust attenuation A_V (mag): "
        f"photometry-only, multimodal, and multimodal with block {blk}, head {h2} resample-ablated",
    )


def _grid_text(rad) -> str:
    """The image-token grid's size in words (``6 x 6``)."""
    return f"{rad.sizes.get('y', '?')} x {rad.sizes.get('x', '?')}"


def _blocks_text(res: dict) -> str:
    """The encoder blocks the head study covered, in words: ``every encoder block (0-2)`` or ``block 1``."""
    iv = res.get("interventions", res.get("site_profile"))
    if iv is None or "block" not in iv.dims:
        b = iv.attrs.get("block") if iv is not None else None
        return f"blocks {', '.join(map(str, b))}" if isinstance(b, (list, tuple, np.ndarray)) else f"block {b}"
    blocks = [int(b) for b in iv["block"].values]
    return f"every encoder block ({blocks[0]}-{blocks[-1]})" if len(blocks) > 1 else f"block {blocks[0]}"


#: the photo-z metrics' names in the tables
METRIC_NAMES = {
    "sigma_nmad": "sigma_NMAD",
    "outlier_fraction": "outlier fraction",
    "bias": "bias (median dz)",
    "mean_abs_dz": "mean|dz|",
}


def _with_interval(value, low, high, digits: int = 4) -> str:
    """``value [low, high]`` rounded to ``digits`` decimals (no ``-0``)."""

    def num(v) -> str:
        if not np.isfinite(v):
            return "n/a"
        text = f"{float(v):.{digits}f}"
        return text[1:] if text.startswith("-") and not text.strip("-0.") else text

    return f"{num(value)} [{num(low)}, {num(high)}]"


def _tables(rep: Report, res: dict, timings: dict | None) -> None:
    adv, iv = res["advantage"], res["interventions"]
    metrics = [m for m in METRIC_NAMES if m in adv["metric"].values]
    rows = {}
    for mode in adv["mode"].values:
        for pop in adv["population"].values:
            cell = adv.sel(mode=mode, population=pop)
            rows[(plots.MODE_NAMES.get(str(mode), str(mode)), str(pop))] = {
                METRIC_NAMES[m]: _with_interval(
                    cell["value"].sel(metric=m), cell["ci_low"].sel(metric=m), cell["ci_high"].sel(metric=m)
                )
                for m in metrics
            }
    tab = pd.DataFrame.from_dict(rows, orient="index")
    tab.index = pd.MultiIndex.from_tuples(tab.index, names=["prediction", "test galaxies"])
    rep.table(
        tab,
        caption="Photo-z metrics per prediction and population of test galaxies, dz = (z_phot - z_spec) / "
        f"(1 + z_spec); outliers |dz| > 0.15; [95% bootstrap interval, {adv.attrs.get('n_bootstrap', 'n')} resamples]",
    )
    rep.table(
        pd.DataFrame(
            {
                "advantage, mean|dz| [95% interval]": [
                    _with_interval(v, lo, hi)
                    for v, lo, hi in zip(
                        adv["advantage"].values, adv["advantage_low"].values, adv["advantage_high"].values
                    )
                ],
                "galaxies": adv["n"].values,
            },
            index=pd.Index(adv.population.values, name="test galaxies"),
        ),
        caption="Multimodal advantage: mean|dz| photometry-only minus multimodal (paired bootstrap 95% interval)",
    )
    if "advantage_difference" in adv:
        rep.table(
            pd.DataFrame(
                {
                    "difference of advantages [95% interval]": [
                        _with_interval(v, lo, hi)
                        for v, lo, hi in zip(
                            adv["advantage_difference"].values,
                            adv["advantage_difference_low"].values,
                            adv["advantage_difference_high"].values,
                        )
                    ]
                },
                index=pd.Index(adv.contrast.values, name="contrast"),
            ),
            caption="Is the advantage larger on extended / dusty galaxies? (two-sample bootstrap 95% interval)",
        )
    if "advantage_lost_low" in iv:
        eff = (
            iv[
                [
                    "advantage_lost",
                    "advantage_lost_low",
                    "advantage_lost_high",
                    "delta_abs_dz",
                    "delta_abs_dz_low",
                    "delta_abs_dz_high",
                ]
            ]
            .sel(population="all")
            .to_dataframe()
        )
        keys = [k for k in ("block", "intervention", "head") if k in eff.index.names]
        eff = eff.reset_index()
        compact = eff[keys].copy()
        compact["advantage lost [95% interval]"] = [
            _with_interval(r.advantage_lost, r.advantage_lost_low, r.advantage_lost_high) for r in eff.itertuples()
        ]
        compact["change of multimodal mean|dz| [95% interval]"] = [
            _with_interval(r.delta_abs_dz, r.delta_abs_dz_low, r.delta_abs_dz_high) for r in eff.itertuples()
        ]
        rep.table(
            compact.set_index(keys[0]),
            caption="Per head and intervention, all galaxies: advantage lost (advantage minus the advantage "
            "with the head intervened in both modes) and change of the multimodal mean|dz|, in mean|dz|, "
            "95% bootstrap intervals",
        )
    rep.table(
        _bias_table(res["bias"]),
        caption="Attenuation-bias signatures on all and on dusty galaxies: dilution in colour cells and slope of dz "
        "on A_V (per mag); the untouched predictions once, then the multimodal run with each head ablated, per block "
        "(every population in study/bias.nc)",
    )
    pops = [p for p in ("all", "extended", "dusty") if p in iv["population"].values]
    clear = [
        p
        for p in pops
        if float(adv["advantage_low"].sel(population=p)) > 0 or float(adv["advantage_high"].sel(population=p)) < 0
    ]
    hidden = [p for p in pops if p not in clear]
    why = (
        f" Not shown on {', '.join(hidden)} galaxies: there the advantage's 95% interval includes 0, so a share of it "
        "is noise (the advantage lost above is the measure)."
        if hidden
        else ""
    )
    if clear:
        rep.table(
            iv["advantage_left"].sel(population=clear).to_dataframe()["advantage_left"].unstack("population").round(2)
            + 0.0,
            caption="Fraction of the multimodal advantage left after each intervention (multimodal run intervened vs "
            "the untouched photometry-only run; 1: untouched, 0: all lost, < 0: worse than photometry-only)." + why,
        )
    else:
        rep.text("The fraction of the multimodal advantage left after each intervention is not shown." + why)
    if timings:
        rep.table(pd.DataFrame({"seconds": timings}).round(1), caption="Timings")


def _bias_table(bias, populations=("all", "dusty")) -> pd.DataFrame:
    """The attenuation-bias table on ``populations`` (one column per signature and population): the predictions no
    head intervention touches (photometry-only, multimodal, template fit) once when they are the same in every
    block, then each block's multimodal run with one head ablated."""
    pops = [p for p in populations if p in bias["population"].values]
    tab = bias[["dilution", "dust_slope"]].sel(population=pops).to_dataframe()[["dilution", "dust_slope"]]
    tab = tab.unstack("population").round(4)
    names = {"dilution": "dilution", "dust_slope": "dz slope on A_V"}
    tab.columns = [f"{names[v]} ({p})" for v, p in tab.columns]
    tab = tab.reset_index()
    if "block" not in tab.columns:
        tab["block"] = "any"
    ablated = tab["prediction"].astype(str).str.contains("ablate")
    values = [c for c in tab.columns if c not in ("block", "prediction")]
    same = tab[~ablated].groupby("prediction")[values].nunique(dropna=False)
    if not (same > 1).any().any():  # the untouched predictions are the same in every block: once
        untouched = tab[~ablated].drop_duplicates("prediction").assign(block="any")
        tab = pd.concat([untouched, tab[ablated]], ignore_index=True)
    tab["prediction"] = [
        plots.MODE_NAMES.get(
            p, p.replace("multimodal_ablate_h", "multimodal, head ") + " ablated" if "ablate" in p else p
        )
        for p in tab["prediction"].astype(str)
    ]
    return tab.set_index("block")[["prediction", *values]]


def _assumptions(rep: Report, res: dict) -> None:
    """The profile of the sites the head study intervened on (:mod:`astro.measures.assumptions`), its own
    section after the tables; a line where the run's saved units predate it."""
    ds = res.get("site_profile")
    if ds is None:
        rep.text(
            f"{ASSUMED}\n\nNot recorded: this run's intervention units were saved before the study recorded "
            "the model profile of the sites it intervened on (rerun with a new --out to record it)."
        )
        return
    table, line = site_profile_table(ds)
    profiled = sorted({int(m) for m in re.findall(r"encoder\.(\d+)\.", " ".join(map(str, ds["site"].values)))})
    if profiled and "interventions" in res:  # which blocks' sites the profile watched (the first unit's)
        line += (
            f" Profiled at the head sites of block{'s' if len(profiled) > 1 else ''} {', '.join(map(str, profiled))}."
        )
    rep.text(
        f"{ASSUMED}\n\nThe head ablations and patching of {_blocks_text(res)} rest on these "
        "facts about the model at the sites they intervened on (`scimech.profile`): calls per forward pass, "
        "the shape of each call, the dtype and the tolerance two passes may differ by in it, the layout "
        "(declared or inferred), whether the rows are independent galaxies, whether two unchanged passes "
        "agree, whether the forward needs autograd and whether the model writes into the site's output. " + line
    )
    rep.table(
        _narrow_profile(table),
        caption="What the verbs assumed, per input signature they ran and site intervened on",
        index=False,
    )


def _narrow_profile(table: pd.DataFrame) -> pd.DataFrame:
    """The profile table in at most :data:`scimech.studies.report.MAX_COLUMNS` columns, so every row keeps its
    run and site: the calls with their shape, the dtype with its tolerance, the three yes/no facts in one column."""
    t = table.copy()
    if {"calls per pass", "shape of each call"} <= set(t.columns):
        t.insert(
            t.columns.get_loc("calls per pass"),
            "calls per pass x shape",
            [f"{c} x ({s})" for c, s in zip(t.pop("calls per pass"), t.pop("shape of each call"))],
        )
    if {"dtype", "tolerance"} <= set(t.columns):
        t.insert(
            t.columns.get_loc("dtype"),
            "dtype (tolerance)",
            [f"{d} ({tol})" for d, tol in zip(t.pop("dtype"), t.pop("tolerance"))],
        )
    flags = [c for c in ("repeatable", "needs grad", "in place") if c in t.columns]
    if len(flags) > 1:
        t[" / ".join(flags)] = [" / ".join(map(str, row)) for row in zip(*(t.pop(c) for c in flags))]
    return t
