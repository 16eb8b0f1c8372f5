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
from .recovery import planted_recovery, recovery_line, verdict_wording

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
            + "\n\nRECOVERED: the study, blind to what was planted, named the planted head and its effect "
            "intervals say what was planted (table under Tables)."
        )
    fnd = findings(res)
    lines = ["## Findings of the reference study, tested here", ""]
    for f, (wording, qualifier, note) in zip(fnd, verdict_wording(res, fnd)):
        why = f" ({f['reason']})" if f["verdict"] == "NOT ASSESSED" else ""
        lines.append(
            f"- **{wording or f['verdict']}**{qualifier}{why}: {f['finding']}. Evidence: {f['evidence']}{note}."
        )
    rep.text("\n".join(lines))
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
    rep.figure(plots.z_scatter(res["predictions"]), "z_scatter", "z true vs predicted per mode")
    rep.figure(plots.metrics_by_population(adv), "metrics_by_population", "sigma_NMAD by population")
    rep.figure(plots.layer_curves(res["layers"]), "layer_curves", "Layerwise probe R2 (z, A_V), both modes")
    studied = studied_block(res)
    blk = int(studied["interventions"].attrs.get("block", 0))
    rep.figure(
        plots.head_heatmap(res["head_probes"], iv),
        "head_heatmap",
        f"Heads of {_blocks_text(res)}: probe R2 and intervention effect (share of the dusty advantage lost), "
        f"each panel with its colour bar; findings 3 and 4 read block {blk}, the one the layer probes localise "
        "the gain to",
    )
    rep.figure(
        plots.radial_maps(res["radial"]),
        "radial_maps",
        f"Each head's image-token output on the token grid, {_blocks_text(res)} (one colour scale for every head)",
    )
    h2 = int(fnd[3]["head"])
    rep.figure(
        plots.dz_vs_av(res["predictions"], studied["interventions"], h2),
        "dz_vs_av",
        f"dz vs A_V (block {blk}, head {h2} resample-ablated)",
    )


def _blocks_text(res: dict) -> str:
    """The encoder blocks the head study covered, in words: ``every encoder block (0-2)`` or ``block 1``."""
    iv = res.get("interventions", res.get("site_profile"))
    if iv is None or "block" not in iv.dims:
        b = iv.attrs.get("block") if iv is not None else None
        return f"blocks {', '.join(map(str, b))}" if isinstance(b, (list, tuple, np.ndarray)) else f"block {b}"
    blocks = [int(b) for b in iv["block"].values]
    return f"every encoder block ({blocks[0]}-{blocks[-1]})" if len(blocks) > 1 else f"block {blocks[0]}"


def _tables(rep: Report, res: dict, timings: dict | None) -> None:
    adv, iv = res["advantage"], res["interventions"]
    tab = (
        adv["value"]
        .sel(metric=["sigma_nmad", "outlier_fraction", "bias", "mean_abs_dz"])
        .to_dataframe()
        .unstack("metric")
    )
    rep.table(tab["value"].round(4), caption="Photo-z metrics per mode and population (bootstrap CIs in advantage.nc)")
    rep.table(
        pd.DataFrame(
            {
                "advantage": adv["advantage"].values,
                "ci_low": adv["advantage_low"].values,
                "ci_high": adv["advantage_high"].values,
                "n": adv["n"].values,
            },
            index=adv.population.values,
        ).round(4),
        caption="Multimodal advantage: mean|dz| photometry-only minus multimodal (paired bootstrap 95% CI)",
    )
    if "advantage_difference" in adv:
        rep.table(
            pd.DataFrame(
                {
                    "difference": adv["advantage_difference"].values,
                    "ci_low": adv["advantage_difference_low"].values,
                    "ci_high": adv["advantage_difference_high"].values,
                },
                index=adv.contrast.values,
            ).round(4),
            caption="Is the advantage larger on extended / dusty galaxies? (two-sample bootstrap 95% CI)",
        )
    if "advantage_lost_low" in iv:
        keep = ["advantage_lost", "advantage_lost_low", "advantage_lost_high"]
        keep += ["delta_abs_dz", "delta_abs_dz_low", "delta_abs_dz_high"]
        eff = iv[keep].sel(population="all").to_dataframe()
        rep.table(
            eff.drop(columns=[c for c in eff.columns if c not in iv.data_vars]).round(4),
            caption="Per head and intervention, all galaxies: advantage lost (advantage minus the advantage "
            "with the head intervened in both modes) and change of the multimodal mean|dz|, "
            "95% bootstrap intervals",
        )
    rep.table(
        res["bias"].to_dataframe().round(4),
        caption="Attenuation-bias signatures (dilution in colour cells; slope of dz on A_V)",
    )
    rep.table(
        iv["advantage_left"]
        .sel(population=["all", "extended", "dusty"])
        .to_dataframe()["advantage_left"]
        .unstack("population")
        .round(3),
        caption="Fraction of the multimodal advantage left after each intervention (multimodal run "
        "intervened vs the untouched photometry-only run)",
    )
    if timings:
        rep.table(pd.DataFrame({"seconds": timings}).round(1), caption="Timings")


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
    rep.table(table, caption="What the verbs assumed, per input signature they ran and site intervened on", index=False)
