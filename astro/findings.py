"""The four findings of the reference study, tested on a run's evidence.

Every verdict is reached blind to what (if anything) was planted: :func:`findings` reads only the
evidence (:mod:`astro.evidence`). The planted truth of a planted stand-in against what the study
found, and the findings as the study states them on it, are :mod:`astro.recovery`'s; their names
of scimech 0.1 (``astro.findings.planted_recovery``, ...) give the same functions, with a
DeprecationWarning, until scimech 0.3.0.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

import numpy as np
import xarray as xr

from scimech._moved import warn_moved
from scimech.studies.verdicts import assess

from .measures import at_block, localised_block

__all__ = [
    "studied_block",
    "findings",
    "advantage_finding",
    "layer_finding",
    "colour_head_finding",
    "image_head_finding",
    "head_effects",
    "colour_heads",
    "ci_text",
]

#: the names that moved to :mod:`astro.recovery` (planted truth vs what the study found), each served
#: here with a DeprecationWarning until scimech 0.3.0
MOVED_TO_RECOVERY = (
    "planted_recovery",
    "planted_findings",
    "verdict_wording",
    "recovery_line",
    "study_findings",
    "recovery_text",
    "_all_finite",
)


def ci_text(v: float, lo: float, hi: float, fmt: str = ".4f") -> str:
    """``value [low, high]``: an estimate with its interval, as every line of the study writes it."""
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
    res = studied_block(res)
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


def studied_block(res: Mapping[str, xr.Dataset]) -> dict[str, xr.Dataset]:
    """The head study read in the block findings 3 and 4 are about: the block the layer probes
    localise the gain to (``res["interventions"].attrs["block"]``, or the one ``--block`` named);
    the head study itself covers every block (:func:`astro.measures.at_block`)."""
    return at_block(res, int(res["interventions"].attrs.get("block", 0)))


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
        return ci_text(a[p], lo[p], hi[p])

    if "advantage_difference" in adv:
        d = {
            str(c): tuple(
                float(adv[k].sel(contrast=c))
                for k in ("advantage_difference", "advantage_difference_low", "advantage_difference_high")
            )
            for c in adv.contrast.values
        }
        larger = {c: v[1] > 0 for c, v in d.items()}
        diff_text = "; ".join(f"{c}: {ci_text(*v)}" for c, v in d.items())
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
        f"{m}: change of mean|dz| {ci_text(*d1[m])}" + (f", advantage lost {ci_text(*l1[m])}" if l1 else "") for m in d1
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
            f"block {iv.attrs.get('block', '?')} (the layer probes' block), head {h1}: colour probe R2 {col[h1]:.3f}, selectivity {col_sel[h1]:.3f} (heads: "
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
            f"block {iv.attrs.get('block', '?')} (the layer probes' block), head {h2}: colour selectivity "
            f"{col_sel[h2]:.3f}; dusty advantage left after resample "
            f"ablation {both_left:.2f} (both modes ablated; {dusty_left[h2]:.2f} against the "
            f"untouched photometry-only run); advantage lost on all galaxies "
            + ("; ".join(f"{m}: {ci_text(*l2[m])}" for m in l2) or "n/a")
            + f"; dz-vs-A_V slope on dusty: ablated {amp:.4f} vs photometry-only {ph:.4f}"
        ),
    )


def __getattr__(name: str):
    if name in MOVED_TO_RECOVERY:  # `from astro.findings import planted_recovery`: astro.recovery's, with a warning
        warn_moved(f"{__name__}.{name}", f"astro.recovery.{name}")
        return getattr(importlib.import_module(".recovery", __package__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
