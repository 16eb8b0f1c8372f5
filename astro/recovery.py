"""Planted truth vs what the study found: a planted stand-in's heads, known by construction, against
the heads the reference findings named.

Every verdict is reached blind to what (if anything) was planted: :func:`astro.findings.findings`
reads only the evidence (:mod:`astro.evidence`); :func:`planted_recovery` then compares the heads it
named with the ``planted*`` attributes the planted model wrote, one
:class:`scimech.studies.verdicts.PlantedTruthRow` per planted fact (the row every study shares), and
:func:`recovery_line` sums them up in the one line of every study
(:func:`scimech.studies.verdicts.recovery_line`). On a planted model a finding that was planted reads
``RECOVERED (planted)`` or ``MISSED (planted)`` (:func:`verdict_wording`, :func:`study_findings`), never
"REPRODUCED"; :func:`recovery_text` is ``recovery.txt``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import xarray as xr

from scimech.studies.verdicts import Finding, PlantedTruthRow, planted_wording, text_table, truth_word
from scimech.studies.verdicts import recovery_line as shared_recovery_line

from .findings import ci_text, colour_heads, findings, head_effects
from .measures import HEAD_STUDY, at_block

__all__ = [
    "planted_recovery",
    "recovery_line",
    "planted_findings",
    "verdict_wording",
    "study_findings",
    "recovery_text",
]


def planted_recovery(res: Mapping[str, xr.Dataset], *, null_effect: float = 0.25) -> list[PlantedTruthRow]:
    """The planted truth of the model (if any) against what :func:`findings` found, one row per planted fact.

    The truth comes from the ``planted*`` attributes of ``res["interventions"]`` (written by
    :func:`astro.evidence.gather_evidence` from :meth:`astro.models.planted.PlantedAION.planted_truth`);
    an empty list for a model without a planted mechanism. A row is not assessed (``recovered``
    ``None``, neither recovered nor missed) when the head's effect intervals are not finite
    numbers. The image head is recovered when finding 4 names it and it carries the advantage
    under every intervention; the inert colour head when finding 3 names it, its colour probes
    have R2 intervals above 0 and it has no measurable effect under every intervention.
    """
    iv = res["interventions"]
    if not int(iv.attrs.get("planted", 0)):
        return []
    res = planted_block(res)
    f = findings(res, null_effect=null_effect)
    eps = null_effect * max(float(res["advantage"]["advantage"].sel(population="all")), 0.0)
    return [_image_head_row(res, f[3]), _inert_head_row(res, f[2], eps)]


def planted_block(res: Mapping[str, xr.Dataset]) -> dict[str, xr.Dataset]:
    """The head study read in the block the heads were planted in (:func:`astro.measures.at_block`), where
    the study covered it (every block by default); otherwise as it is (``--block`` named another block:
    the rows then say which block was studied)."""
    pb = int(res["interventions"].attrs["planted_block"])
    studied = [res[n] for n in HEAD_STUDY if n in res and "block" in res[n].dims]
    if studied and all(pb in ds["block"].values for ds in studied):  # each part read where it has blocks
        return at_block(res, pb)
    return dict(res)


def _image_head_row(res: Mapping[str, xr.Dataset], f4: Mapping[str, Any]) -> PlantedTruthRow:
    iv = res["interventions"]
    blk, pb, img = int(iv.attrs.get("block", 0)), int(iv.attrs["planted_block"]), int(iv.attrs["planted_image_head"])
    lost_img = head_effects(res, img)
    ok_img = blk == pb and f4["head"] == img and bool(f4["carries"]) and all(f4["carries"].values())
    fails = [m for m, ok in f4["carries"].items() if not ok]
    named = "" if f4["head"] == img else f" (the study named head {f4['head']})"
    found = (
        f"block {blk}; finding 4 names head {f4['head']}; advantage lost by head {img}: "
        + "; ".join(f"{m} {ci_text(*v)}" for m, v in lost_img.items())
        + (f"; not the largest with an interval above 0 under {fails}" if fails else "")
    )
    summary = f"image head block{pb}.h{img}{named}: advantage lost " + ", ".join(
        f"{m} {ci_text(*lost_img[m])}" for m in ("resample", "patch") if m in lost_img
    )
    estimate, low, high = lost_img.get("resample", (np.nan, np.nan, np.nan))
    return PlantedTruthRow(
        f"image head block{pb}.h{img}: {iv.attrs['planted_image_truth']}",
        "advantage lost, resample ablation, all galaxies",
        estimate,
        low,
        high,
        0.0,
        bool(ok_img) if _all_finite(lost_img) else None,
        found=found,
        summary=summary,
        label=f"block{pb}.h{img}",
    )


def _inert_head_row(res: Mapping[str, xr.Dataset], f3: Mapping[str, Any], eps: float) -> PlantedTruthRow:
    iv = res["interventions"]
    blk, pb = int(iv.attrs.get("block", 0)), int(iv.attrs["planted_block"])
    inert = int(iv.attrs["planted_inert_head"])
    col, col_sel = colour_heads(res)
    d_inert = head_effects(res, inert, var="delta_abs_dz")
    l_inert = head_effects(res, inert) if np.isfinite(iv["advantage_lost"].values).all() else {}
    effects = [*d_inert.values(), *l_inert.values()]
    worst = max(max(abs(v[1]), abs(v[2])) for v in effects)
    ok_inert = (
        blk == pb
        and f3["head"] == inert
        and f3["encodes_colours"]
        and bool(f3["no_effect"])
        and all(f3["no_effect"].values())
    )
    rest = np.delete(col_sel, inert)
    named = "" if f3["head"] == inert else f" (the study named head {f3['head']})"
    found = (
        f"block {blk}; finding 3 names head {f3['head']} (colour selectivity per head "
        f"{np.round(col_sel, 3).tolist()}); encodes colours: {f3['encodes_colours']}; no effect under "
        f"{[m for m, ok in f3['no_effect'].items() if ok]} of {list(f3['no_effect'])}; head {inert}'s "
        f"effect intervals {_within(worst)}"
    )
    summary = (
        f"inert colour head block{pb}.h{inert}{named}: colour selectivity {col_sel[inert]:.3f} (others <= "
        f"{rest.max():.3f}), effects {_within(worst)} under every intervention"
    )
    return PlantedTruthRow(
        f"inert colour head block{pb}.h{inert}: {iv.attrs['planted_inert_truth']}",
        "widest bound of the head's effect intervals, any intervention",
        worst,
        min(v[1] for v in effects),
        max(v[2] for v in effects),
        eps,
        bool(ok_inert) if _all_finite({**d_inert, **l_inert}) else None,
        found=found,
        summary=summary,
        label=f"block{pb}.h{inert}",
    )


def recovery_line(rows: Sequence[PlantedTruthRow], domain: str = "astro", world: str = "") -> str:
    """One line: how many planted facts the study recovered, with the key numbers
    (:func:`scimech.studies.verdicts.recovery_line`, the summary of every study; a row not assessed is
    named, not counted); ``world``: the data, at the line's end."""
    tag = f" [{world}]" if world else ""
    if not rows:
        return (
            f"{domain} planted truth: none in this model (unplanted stand-in or a real checkpoint); run "
            "`scimech astro study --quick --planted` to check that the study finds a planted mechanism" + tag
        )
    parts = [("NOT ASSESSED " if not r.assessed else "" if r.recovered else "MISSED ") + r.summary for r in rows]
    return shared_recovery_line(domain, rows, "; ".join(parts), world=world)


def _within(worst: float) -> str:
    """The widest effect bound in words: "exactly 0" when every interval is [0, 0] (a head wired to nothing)."""
    return "exactly 0" if worst == 0 else f"within +-{worst:.1e}"


def _all_finite(effects: Mapping[str, tuple]) -> bool:
    """Every (estimate, low, high) of a head's effects is a finite number (and there is one)."""
    return bool(effects) and all(np.isfinite(np.asarray(v, float)).all() for v in effects.values() if v is not None)


def planted_findings(
    res: Mapping[str, xr.Dataset], fnd: Sequence[Mapping[str, Any]] | None = None, *, null_effect: float = 0.25
) -> dict[int, tuple[bool | None, str]]:
    """On a planted model, ``{finding index: (recovered, note)}`` of each reference finding that was
    planted in it (empty for a model without a planted mechanism); the rest are not planted.

    Finding 2 (the gain in the first block) is planted when the planted block is block 0, and
    recovered when its verdict holds; finding 3 is the inert colour head, finding 4 the image
    head, each recovered as its :func:`planted_recovery` row says. ``note``: what the finding's
    own verdict says when it differs (finding 3's radial organisation was not planted): evidence for the
    report, never part of the line (a line reads one verdict).
    """
    rows = planted_recovery(res, null_effect=null_effect)
    if not rows:
        return {}
    fnd = findings(res, null_effect=null_effect) if fnd is None else fnd
    planted = {2: rows[1].recovered, 3: rows[0].recovered}
    if int(res["interventions"].attrs.get("planted_block", -1)) == 0:
        planted[1] = None if fnd[1]["verdict"] == "NOT ASSESSED" else fnd[1]["verdict"] == "REPRODUCED"
    iv = res["interventions"].attrs
    pb, studied = int(iv.get("planted_block", -1)), int(iv.get("block", -1))
    out = {}
    for i, recovered in sorted(planted.items()):
        own = fnd[i]["verdict"]
        differs = recovered is not None and own != "NOT ASSESSED" and (own == "REPRODUCED") != recovered
        note = (
            f"; the reference's whole claim, with what was not planted in this model, is {own} here" if differs else ""
        )
        if i in (2, 3) and pb != studied:  # the verdict and the evidence above read different blocks: say so
            note += (
                f"; the verdict is the planted-truth row's, on the head planted in block {pb} (recovery.txt), "
                f"while the evidence above reads block {studied}, the layer probes' block"
            )
        out[i] = (recovered, note)
    return out


def verdict_wording(
    res: Mapping[str, xr.Dataset], fnd: Sequence[Mapping[str, Any]] | None = None, *, null_effect: float = 0.25
) -> list[tuple[str, str, str]]:
    """Per finding, ``(wording, qualifier, note)``: on a planted model a planted finding reads
    :func:`scimech.studies.verdicts.planted_wording` (``RECOVERED (planted)``, never "REPRODUCED"), the
    others their verdict qualified ``(planted stand-in)``; on any other model, the verdict. ``note``: the
    reference's whole claim where it differs (for the evidence, not the line)."""
    fnd = findings(res, null_effect=null_effect) if fnd is None else fnd
    planted = planted_findings(res, fnd, null_effect=null_effect)
    if not planted_recovery(res, null_effect=null_effect):
        return [("", "", "")] * len(fnd)
    return [
        (planted_wording(planted[i][0]), "", planted[i][1]) if i in planted else ("", " (planted stand-in)", "")
        for i in range(len(fnd))
    ]


def study_findings(res: Mapping[str, xr.Dataset], *, null_effect: float = 0.25) -> list[Finding]:
    """:func:`findings` as :class:`scimech.studies.verdicts.Finding` objects, numbered as the reference study
    numbers them; on the planted stand-in a finding that was planted reads "RECOVERED (planted)" or
    "MISSED (planted)" (:func:`verdict_wording`), the others say they were tested on it; the numbers
    (and the reference's whole claim where it differs) are left to the report (``terse``); each line is
    tagged with the galaxies it was tested on (:func:`astro.competence.world_of`)."""
    from .competence import world_of

    fnd = findings(res, null_effect=null_effect)
    words = verdict_wording(res, fnd, null_effect=null_effect)
    world = world_of(res["predictions"]) if "predictions" in res else ""
    return [
        Finding(
            f["finding"],
            f["verdict"],
            f["evidence"] + note,
            f["reason"],
            f["numbers"],
            label=f"{i}. ",
            wording=w,
            qualifier=q,
            terse=True,
            world=world,
        )
        for i, (f, (w, q, note)) in enumerate(zip(fnd, words), 1)
    ]


def recovery_text(res: Mapping[str, xr.Dataset], *, null_effect: float = 0.25) -> str:
    """``recovery.txt``: the :func:`recovery_line`, then (for a planted model) one row per planted fact."""
    from .competence import world_of

    rows = planted_recovery(res, null_effect=null_effect)
    lines = [recovery_line(rows, world=world_of(res["predictions"]) if "predictions" in res else "")]
    if rows:
        lines += [
            "",
            text_table(
                ["planted truth", "what the study found", "verdict"],
                [[r.truth, r.found, truth_word(r.recovered)] for r in rows],
                sep=" | ",
                aligned=False,
            ),
        ]
    return "\n".join(lines) + "\n"
