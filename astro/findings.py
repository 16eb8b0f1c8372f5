"""The four findings of the reference study, tested on a run's evidence, and the planted truth
of a planted stand-in against what the study found.

Every verdict is reached blind to what (if anything) was planted: :func:`findings` reads
only the evidence (:mod:`astro.evidence`); :func:`planted_recovery` then compares the
heads it named with the ``planted*`` attributes the planted model wrote.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import xarray as xr

from scimech.studies.verdicts import Finding, PlantedTruthRow, assess, planted_wording, text_table, truth_word
from scimech.studies.verdicts import recovery_line as shared_recovery_line

from .measures import localised_block

__all__ = [
    "findings",
    "advantage_finding",
    "layer_finding",
    "colour_head_finding",
    "image_head_finding",
    "head_effects",
    "colour_heads",
    "planted_recovery",
    "planted_findings",
    "verdict_wording",
    "recovery_line",
    "study_findings",
    "recovery_text",
]


def _ci_text(v: float, lo: float, hi: float, fmt: str = ".4f") -> str:
    return f"{v:{fmt}} [{lo:{fmt}}, {hi:{fmt}}]"


def head_effects(
    res: Mapping[str, xr.Dataset], head: int, population: str = "all", var: str = "advantage_lost"
) -> dict[str, tuple[float, float, float]]:
    """``{intervention: (value, low, high)}`` of an effect (``advantage_lost`` or ``delta_abs_dz``) of one head."""
    iv = res["interventions"]
    sel = dict(head=head, population=population)
    return {
        str(m): tuple(float(iv[k].sel(intervention=m, **sel)) for k in (var, f"{var}_low", f"{var}_high"))
        for m in iv.intervention.values
    }


def colour_heads(res: Mapping[str, xr.Dataset]) -> tuple[np.ndarray, np.ndarray]:
    """Per head: mean colour-probe R2 (g-r, r-i, i-z) and mean colour selectivity (R2 minus control)."""
    hp = res["head_probes"]
    cols = ["g-r", "r-i", "i-z"]
    r2 = hp["score"].sel(target=cols).mean("target").values
    sel = hp["selectivity"].sel(target=cols).mean("target").values if "selectivity" in hp else r2
    return r2, sel


def findings(res: Mapping[str, xr.Dataset], *, null_effect: float = 0.25) -> list[dict[str, Any]]:
    """Test the four findings of the reference study on these results, plainly.

    Every verdict is reached without knowing what (if anything) was planted in the model.
    Heads are judged under every intervention (zero, mean, resample ablation and patching),
    each reported with its 95% bootstrap interval over galaxies.

    * 1: the advantage on all galaxies has an interval above 0 and is larger on extended
      than compact and on dusty than clean galaxies (both differences' intervals above 0).
    * 3: the colour head is the head with the most selective colour probes (R2 minus
      control); it *encodes colours* when each colour's R2 interval is above 0, and has *no
      measurable effect* under an intervention when the intervals of both its change of
      mean|dz| and its ``advantage_lost`` lie within +- ``null_effect`` x the advantage.
    * 4: the other head whose resample ablation removes the most of the dusty advantage
      (``advantage_lost``); it *carries the advantage* under an intervention when its
      ``advantage_lost`` on all galaxies has an interval above 0 and exceeds every other
      head's; the finding also needs the dusty advantage left <= ``null_effect`` and a
      steeper dz-vs-A_V slope than photometry-only.

    Returns
    -------
    list of dict
        ``finding``, ``verdict`` ("REPRODUCED", "NOT reproduced" or "NOT ASSESSED" when a
        number it rests on is missing or not finite, :func:`scimech.studies.contract.assess`),
        ``reason`` (why not assessed), ``reproduced`` (the verdict is REPRODUCED),
        ``evidence``, ``numbers``, ``line``; findings 3 and 4 also ``head``, the
        per-intervention effects and checks (``no_effect`` / ``carries``).
    """
    adv = _advantages(res)
    f3 = colour_head_finding(res, adv, null_effect)
    out = [advantage_finding(res, adv), layer_finding(res), f3, image_head_finding(res, adv, f3["head"], null_effect)]
    for (
        f
    ) in out:  # a verdict only from finite numbers (scimech.studies.contract.assess): NaN never reads "NOT reproduced"
        judged = assess(f["finding"], f["reproduced"], f["evidence"], numbers=f["numbers"])
        f.update(
            verdict=judged.verdict, reason=judged.reason, reproduced=judged.verdict == "REPRODUCED", line=judged.line()
        )
    return out


def _advantages(res: Mapping[str, xr.Dataset]) -> dict[str, dict[str, float]]:
    """``{"value" | "low" | "high": {population: advantage}}``."""
    adv = res["advantage"]
    return {
        q: {p: float(adv[k].sel(population=p)) for p in adv.population.values}
        for q, k in (("value", "advantage"), ("low", "advantage_low"), ("high", "advantage_high"))
    }


def advantage_finding(res: Mapping[str, xr.Dataset], advantages: Mapping[str, Mapping[str, float]]) -> dict[str, Any]:
    """Finding 1: the advantage concentrates on extended and dust-attenuated galaxies."""
    adv = res["advantage"]
    a, lo, hi = advantages["value"], advantages["low"], advantages["high"]

    def ci(p):
        return _ci_text(a[p], lo[p], hi[p])

    if "advantage_difference" in adv:
        d = {
            str(c): tuple(
                float(adv[k].sel(contrast=c))
                for k in ("advantage_difference", "advantage_difference_low", "advantage_difference_high")
            )
            for c in adv.contrast.values
        }
        larger = {c: v[1] > 0 for c, v in d.items()}
        diff_text = "; ".join(f"{c}: {_ci_text(*v)}" for c, v in d.items())
    else:  # results saved before the differences existed
        larger = {"extended - compact": a["extended"] > a["compact"], "dusty - clean": a["dusty"] > a["clean"]}
        diff_text = "differences without intervals (older results)"
    nums1 = {f"advantage on {p} galaxies": a[p] for p in ("all", "extended", "compact", "dusty", "clean") if p in a}
    nums1["lower bound of the advantage on all galaxies"] = lo["all"]
    if "advantage_difference" in adv:
        nums1.update({f"lower bound of {c}": v[1] for c, v in d.items()})
    return dict(
        finding="the multimodal advantage concentrates on extended and dust-attenuated galaxies",
        reproduced=bool(lo["all"] > 0 and all(larger.values())),
        larger=larger,
        numbers=nums1,
        evidence=(
            f"advantage (mean|dz| phot - multi, 95% CI): all {ci('all')}, "
            f"extended {ci('extended')} vs compact {ci('compact')}, "
            f"dusty {ci('dusty')} vs clean {ci('clean')}; differences {diff_text}"
        ),
    )


def layer_finding(res: Mapping[str, xr.Dataset]) -> dict[str, Any]:
    """Finding 2: layerwise probing localises the gain to the first encoder block."""
    layers = res["layers"]
    blk = localised_block(layers)
    g = layers["gain"].sel(target="z").values
    return dict(
        finding="layerwise probing localises the gain to the first encoder block",
        reproduced=bool(blk == 0 and g[0] > 0),
        block=blk,
        numbers={f"z-probe R2 gain of block {i}": float(v) for i, v in enumerate(g)},
        evidence=f"z-probe R2 gain (multi - phot) per block: {np.round(g, 3).tolist()}; localised block {blk}",
    )


def _has_lost(iv: xr.Dataset) -> bool:
    return "advantage_lost" in iv and bool(np.isfinite(iv["advantage_lost"].values).all())


def colour_head_finding(
    res: Mapping[str, xr.Dataset], advantages: Mapping[str, Mapping[str, float]], null_effect: float = 0.25
) -> dict[str, Any]:
    """Finding 3: one head encodes colours and organises its image output radially, yet
    intervening on it has no measurable effect."""
    hp, rad, iv = res["head_probes"], res["radial"], res["interventions"]
    col, col_sel = colour_heads(res)
    h1 = int(np.argmax(col_sel))
    cols = ["g-r", "r-i", "i-z"]
    # each colour's R2 interval above 0 (results saved before the intervals: the R2 itself)
    low = hp["score_low" if "score_low" in hp else "score"].sel(head=h1, target=cols).values
    encodes = bool(np.all(low > 0))
    eps = null_effect * max(advantages["value"]["all"], 0.0)

    def within(t):
        return bool(-eps <= t[1] and t[2] <= eps)

    left = iv["advantage_left"]
    if "delta_abs_dz_low" in iv:
        d1 = head_effects(res, h1, var="delta_abs_dz")
        l1 = head_effects(res, h1) if _has_lost(iv) else {}
        no_effect = {m: within(d1[m]) and (within(l1[m]) if l1 else True) for m in d1}
    else:  # results saved before the intervals: the point rule of then
        d1, l1 = {}, {}
        no_effect = {
            str(m): bool(abs(float(left.sel(head=h1, population="all", intervention=m)) - 1) < null_effect)
            for m in left.intervention.values
        }
    radial = bool(rad["radial_score"].values[h1] >= np.median(rad["radial_score"].values))
    eff_text = "; ".join(
        f"{m}: change of mean|dz| {_ci_text(*d1[m])}" + (f", advantage lost {_ci_text(*l1[m])}" if l1 else "")
        for m in d1
    )
    return dict(
        finding="one head encodes colours and organises its image output radially, yet intervening on it "
        "has no measurable effect",
        reproduced=bool(encodes and no_effect and all(no_effect.values()) and radial),
        head=h1,
        encodes_colours=encodes,
        no_effect=no_effect,
        radial=radial,
        numbers={
            **{f"lower bound of the {c} probe R2 of head {h1}": float(v) for c, v in zip(cols, low)},
            f"radial score of head {h1}": float(rad["radial_score"].values[h1]),
            **{f"{m} {q} of head {h1}": float(x) for m in d1 for q, x in zip(("low", "high"), d1[m][1:])},
        },
        effects={m: {"delta_abs_dz": d1[m], "advantage_lost": l1.get(m)} for m in d1},
        evidence=(
            f"head {h1}: colour probe R2 {col[h1]:.3f}, selectivity {col_sel[h1]:.3f} (heads: "
            f"{np.round(col_sel, 3).tolist()}), R2 lower bounds {np.round(low, 3).tolist()}; radial "
            f"score {rad['radial_score'].values[h1]:.3f}; null band +-{eps:.4f}; {eff_text or 'no intervals'}; "
            f"advantage left {np.round(left.sel(head=h1, population='all').values, 2).tolist()}"
        ),
    )


def image_head_finding(
    res: Mapping[str, xr.Dataset],
    advantages: Mapping[str, Mapping[str, float]],
    colour_head: int,
    null_effect: float = 0.25,
) -> dict[str, Any]:
    """Finding 4: another head (not ``colour_head``) without a distinctive probe signature removes
    the advantage on dusty galaxies when ablated and amplifies the attenuation bias."""
    iv = res["interventions"]
    h1 = colour_head
    a = advantages["value"]
    col, col_sel = colour_heads(res)
    others = [h for h in range(len(col)) if h != h1]
    dusty_left = iv["advantage_left"].sel(population="dusty", intervention="resample").values
    if _has_lost(iv):
        lost_dusty = iv["advantage_lost"].sel(population="dusty", intervention="resample").values
        h2 = others[int(np.argmax(lost_dusty[others]))] if others else h1
        both_left = 1 - lost_dusty[h2] / a["dusty"] if abs(a["dusty"]) > 1e-12 else np.nan
        lost_all = iv["advantage_lost"].sel(population="all")
        carries = {}
        for m in iv.intervention.values:
            v = lost_all.sel(intervention=m).values
            rest = np.delete(v, h2)
            carries[str(m)] = bool(
                float(iv["advantage_lost_low"].sel(intervention=m, head=h2, population="all")) > 0
                and v[h2] > rest.max()
            )
        l2 = head_effects(res, h2)
    else:  # results saved before both-mode ablations
        h2 = others[int(np.argmin(dusty_left[others]))] if others else h1
        both_left, carries, l2 = dusty_left[h2], {}, {}
    bias = res["bias"]
    amp = float(bias["dust_slope"].sel(prediction=f"multimodal_ablate_h{h2}", population="dusty"))
    ph = float(bias["dust_slope"].sel(prediction="photometry", population="dusty"))
    removes = bool(both_left <= null_effect)
    amplifies = abs(amp) > abs(ph)
    return dict(
        finding="another head without a distinctive probe signature removes the advantage on dusty "
        "galaxies when ablated and amplifies the attenuation bias beyond photometry-only",
        reproduced=bool(removes and amplifies and col_sel[h2] < col_sel[h1]),
        head=h2,
        carries=carries,
        removes=removes,
        amplifies=amplifies,
        numbers={
            f"dusty advantage left after ablating head {h2}": float(both_left),
            "dz-vs-A_V slope, head ablated": amp,
            "dz-vs-A_V slope, photometry-only": ph,
        },
        effects={m: {"advantage_lost": l2.get(m)} for m in carries},
        evidence=(
            f"head {h2}: colour selectivity {col_sel[h2]:.3f}; dusty advantage left after resample "
            f"ablation {both_left:.2f} (both modes ablated; {dusty_left[h2]:.2f} against the "
            f"untouched photometry-only run); advantage lost on all galaxies "
            + ("; ".join(f"{m}: {_ci_text(*l2[m])}" for m in l2) or "n/a")
            + f"; dz-vs-A_V slope on dusty: ablated {amp:.4f} vs photometry-only {ph:.4f}"
        ),
    )


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
    f = findings(res, null_effect=null_effect)
    eps = null_effect * max(_advantages(res)["value"]["all"], 0.0)
    return [_image_head_row(res, f[3]), _inert_head_row(res, f[2], eps)]


def _image_head_row(res: Mapping[str, xr.Dataset], f4: Mapping[str, Any]) -> PlantedTruthRow:
    iv = res["interventions"]
    blk, pb, img = int(iv.attrs.get("block", 0)), int(iv.attrs["planted_block"]), int(iv.attrs["planted_image_head"])
    lost_img = head_effects(res, img)
    ok_img = blk == pb and f4["head"] == img and bool(f4["carries"]) and all(f4["carries"].values())
    fails = [m for m, ok in f4["carries"].items() if not ok]
    named = "" if f4["head"] == img else f" (the study named head {f4['head']})"
    found = (
        f"block {blk}; finding 4 names head {f4['head']}; advantage lost by head {img}: "
        + "; ".join(f"{m} {_ci_text(*v)}" for m, v in lost_img.items())
        + (f"; not the largest with an interval above 0 under {fails}" if fails else "")
    )
    summary = f"image head block{pb}.h{img}{named}: advantage lost " + ", ".join(
        f"{m} {_ci_text(*lost_img[m])}" for m in ("resample", "patch") if m in lost_img
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
        f"effect intervals within +-{worst:.1e}"
    )
    summary = (
        f"inert colour head block{pb}.h{inert}{named}: colour selectivity {col_sel[inert]:.3f} (others <= "
        f"{rest.max():.3f}), effects within +-{worst:.1e} under every intervention"
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
    out = {}
    for i, recovered in sorted(planted.items()):
        own = fnd[i]["verdict"]
        differs = recovered is not None and own != "NOT ASSESSED" and (own == "REPRODUCED") != recovered
        out[i] = (
            recovered,
            f"; the reference's whole claim, with what was not planted in this model, is {own} here" if differs else "",
        )
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
