"""Which of the reference study's findings reproduce, read from the :class:`neuro.evidence.Evidence`.

Intervals are 95 % two-level bootstrap intervals over search seeds and test trials
(:func:`scimech.analysis.stats.cluster_bootstrap`); a verdict never overrides its interval, and a
verdict never rests on a number that is not there (:func:`scimech.studies.contract.assess`: such a
finding reads ``NOT ASSESSED (<which number>)``).

Each finding is a :class:`scimech.studies.contract.Finding` (a :class:`Finding`: the contract's
verdict, REPRODUCED / NOT reproduced / NOT ASSESSED, plus the line's own wording of it in the one
vocabulary of every study, :data:`scimech.studies.verdicts.FINDING_WORDS`: ``UNDECIDED (the interval
holds 0)``, ``NOT reproduced (partly: ...)``), tagged with the world it was tested on.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from scimech.studies.verdicts import Finding, assess

from .baselines import MODEL_NAMES, model_name
from .evidence import Evidence
from .verdicts import compare, verdict_better

__all__ = ["findings", "tail_beat_finding", "MODEL_NAMES", "model_name"]


def _judged(claim: str, verdict: str, wording: str, evidence: str, numbers: dict, note: str = "") -> Finding:
    """The finding, or ``NOT ASSESSED (...)`` naming the numbers that are missing or NaN."""
    checked = assess(claim, True, numbers=numbers)
    if not checked.assessed:
        return Finding(
            claim,
            "NOT ASSESSED",
            evidence,
            checked.reason,
            checked.numbers,
            wording=f"NOT ASSESSED ({checked.reason})",
            note=note,
        )
    return Finding(claim, verdict, evidence, "", checked.numbers, wording=wording, note=note)


def _not_assessed(claim: str, reason: str) -> Finding:
    return Finding(claim, "NOT ASSESSED", reason=reason)


def _fmt_ci(c: dict, key: str) -> str:
    return f"{c[key]:.3f} [{c[key + '_low']:.3f}, {c[key + '_high']:.3f}]"


def _interval_numbers(c: dict, what: str) -> dict[str, float]:
    """The estimates and interval bounds of a :func:`compare` result a verdict rests on."""
    return {f"{what} {k}": c.get(k) for k in ("a", "b", "diff", "diff_low", "diff_high")}


def _seed_numbers(values: dict[str, np.ndarray]) -> dict[str, float]:
    """Per-seed values, each a number the verdict rests on (an empty set of seeds is one missing number)."""
    out: dict[str, float] = {}
    for name, v in values.items():
        v = np.asarray(v, float)
        if len(v) == 0:
            out[name] = np.nan
        out.update({f"{name} (seed {i})": float(x) for i, x in enumerate(v)})
    return out


def _span(v: np.ndarray) -> str:
    v = np.asarray(v, float)
    if len(v) == 0 or not np.isfinite(v).any():
        return "nan"
    if len(v) == 1:
        return f"{v[0]:.3f}"
    return f"{np.nanmean(v):.3f} (seeds {np.nanmin(v):.3f}-{np.nanmax(v):.3f})"


def _seed_values(ev: Evidence, label: str, key: str) -> np.ndarray:
    found = ev.search(label)
    return found.seed_values(key) if found is not None else np.array([])


def discovered_beat_baselines(ev: Evidence) -> Finding:
    """Discovered programs (the pick per seed) vs the best baseline, ID test MAE (and OOD)."""
    S = len(ev.seeds)
    scope = f"{S} search seed{'s' if S > 1 else ''} x {len(np.unique(ev.test_trials))} test trials"
    c = compare(ev.discovered_test, ev.baseline_test, ev.test_trials)
    v = verdict_better(c)
    verdict = {"a better": "REPRODUCED", "b better": "NOT reproduced", "undecided": "NOT reproduced"}[v]
    wording = {
        "a better": "REPRODUCED",
        "b better": "NOT reproduced (the baseline is better)",
        "undecided": "UNDECIDED (the interval holds 0)",
    }[v]
    ood = ""
    if ev.discovered_ood is not None and ev.baseline_ood is not None:
        co = compare(ev.discovered_ood, ev.baseline_ood, ev.ood_clusters)
        ood = (
            f" Out of distribution the same programs score {_fmt_ci(co, 'a')} vs {_fmt_ci(co, 'b')} "
            f"(difference {_fmt_ci(co, 'diff')}, {len(np.unique(ev.ood_clusters))} OOD trials)."
        )
    picks = ", ".join(sorted(set(ev.picks)))
    return _judged(
        "discovered programs beat the baselines in distribution",
        verdict,
        wording,
        f"ID test MAE of the best discovered program per seed [{picks}] {_fmt_ci(c, 'a')} vs "
        f"the best baseline, {model_name(ev.best_baseline)}, {_fmt_ci(c, 'b')}; difference {_fmt_ci(c, 'diff')}; {scope}",
        _interval_numbers(c, "ID test MAE"),
        note=ood,
    )


def priors_generalise(ev: Evidence) -> Finding | None:
    """The unconstrained search does well ID but worse OOD than the search with wiring priors."""
    cid = compare(ev.no_priors.test, ev.priors.test, ev.test_trials)
    if ev.priors.ood is None or ev.no_priors.ood is None:
        return None
    vid = verdict_better(cid)
    cood = compare(ev.no_priors.ood, ev.priors.ood, ev.ood_clusters)
    vood = verdict_better(cood)
    free_worse_ood, free_fine_id = vood == "b better", vid != "b better"
    wording = (
        "REPRODUCED"
        if (free_worse_ood and free_fine_id)
        else "NOT reproduced (partly: priors better both ID and OOD)"
        if free_worse_ood
        else "NOT reproduced (priors not worse ID, and not better OOD)"
        if vood == "undecided"
        else "NOT reproduced (the unconstrained search is better OOD)"
    )
    return _judged(
        "unconstrained search does well in distribution but worse on novel conditions than search with wiring priors",
        "REPRODUCED" if wording == "REPRODUCED" else "NOT reproduced",
        wording,
        f"ID test MAE without vs with priors {_fmt_ci(cid, 'a')} vs {_fmt_ci(cid, 'b')}, difference "
        f"{_fmt_ci(cid, 'diff')}; OOD MAE {_fmt_ci(cood, 'a')} vs {_fmt_ci(cood, 'b')}, difference "
        f"{_fmt_ci(cood, 'diff')} over {len(np.unique(ev.ood_clusters))} OOD trials",
        {**_interval_numbers(cid, "ID test MAE"), **_interval_numbers(cood, "OOD MAE")},
    )


def priors_recover_connectivity(ev: Evidence) -> Finding:
    """Edge AUROC and sign accuracy of the Jacobian, with vs without priors, in every seed."""
    pa, fa = _seed_values(ev, "priors", "edge_auroc"), _seed_values(ev, "no priors", "edge_auroc")
    ps, fs = _seed_values(ev, "priors", "sign_accuracy"), _seed_values(ev, "no priors", "sign_accuracy")
    auc_all = bool(np.all(pa > fa)) and len(pa) > 0
    sg_all = bool(np.all(ps > fs)) and len(ps) > 0
    auc_any, sg_any = bool(np.any(pa > fa)), bool(np.any(ps > fs))
    wording = (
        "REPRODUCED"
        if (auc_all and sg_all)
        else "NOT reproduced (partly: better on some measure or seed, not on both in every seed)"
        if (auc_any or sg_any)
        else "NOT reproduced"
    )
    return _judged(
        "priors recover effective connectivity better",
        "REPRODUCED" if wording == "REPRODUCED" else "NOT reproduced",
        wording,
        f"edge AUROC {_span(pa)} vs {_span(fa)}; sign accuracy {_span(ps)} vs {_span(fs)}; reproduced if "
        f"better on both in every seed; the wiring prior allows {ev.prior_note}",
        _seed_numbers(
            {
                "edge AUROC with priors": pa,
                "edge AUROC without": fa,
                "sign accuracy with priors": ps,
                "sign accuracy without": fs,
            }
        ),
    )


def priors_recover_impulse(ev: Evidence) -> Finding:
    """Distance of the impulse response to the simulator's, with vs without priors, in every seed."""
    pi, fi = _seed_values(ev, "priors", "impulse_distance"), _seed_values(ev, "no priors", "impulse_distance")
    ok = np.isfinite(pi) & np.isfinite(fi)
    wording = (
        "REPRODUCED"
        if ok.all() and np.all(pi < fi)
        else "NOT reproduced (partly: better in some seeds, not in every seed)"
        if np.any(pi[ok] < fi[ok])
        else "NOT reproduced"
    )
    return _judged(
        "priors recover impulse responses better",
        "REPRODUCED" if wording == "REPRODUCED" else "NOT reproduced",
        wording,
        f"relative distance to the simulator's response {_span(pi)} vs {_span(fi)}; 1 = no response; "
        "reproduced if better in every seed",
        _seed_numbers({"impulse distance with priors": pi, "impulse distance without": fi}),
    )


def tail_beat_finding(long_table: pd.DataFrame, context: int) -> Finding:
    """At the long context, does any model's free run forecast the tail beat (REPRODUCED / NOT reproduced)?"""
    fc = (
        long_table["tail_beat_forecast"].astype(float) if "tail_beat_forecast" in long_table else pd.Series(dtype=float)
    )
    yes = [n for n, v in fc.items() if np.isfinite(v) and v >= 0.5]
    best = fc.astype(float).idxmax() if fc.notna().any() else None
    detail = "; ".join(
        f"{model_name(n)} {fc[n]:.2f} (|phase error| {float(long_table.loc[n, 'tail_phase_error']):.2f} cycles, "
        f"amplitude {float(long_table.loc[n, 'tail_amplitude_ratio']):.2f})"
        for n in fc.index
        if np.isfinite(fc[n])
    )
    # one claim whatever the outcome (a claim that turned into its own negation would read as a double
    # negative beside NOT reproduced); who did, or who came closest, is said after it
    claim = f"at context {context}, a model's free run forecasts the tail beat in at least half of the swimming windows"
    if yes:
        claim += f" (the free run of {', '.join(map(model_name, yes))})"
    elif best is not None:
        claim += f" (closest: {model_name(best)})"
    return Finding(
        claim,
        "REPRODUCED" if yes else "NOT reproduced",
        "fraction of swimming probe windows whose free-run tail angle is within 1/8 cycle and at "
        f"least half the amplitude of the true beat: {detail}",
    )


_NO_CIRCUIT = ("recovery of connectivity and impulse responses", "no true circuit behind recorded traces")


def findings(ev: Evidence) -> list[Finding]:
    """The reference findings with their verdicts (see the module doc), each tagged with ``ev.world``."""
    return [dataclasses.replace(f, world=ev.world) for f in _findings(ev)]


def _findings(ev: Evidence) -> list[Finding]:
    if ev.discovered_test is None:
        return [_not_assessed("the reference findings", "no discovered model finished")]
    out = [discovered_beat_baselines(ev)]
    long = [tail_beat_finding(ev.long_table, ev.long_context)] if ev.long_table is not None else []
    if ev.no_prior:
        out.append(
            _not_assessed(
                "search with vs without wiring priors",
                "these traces came without a wiring prior, "
                "so both searches were unconstrained; give prior_mask / prior_sign to "
                "neuro.data.from_traces",
            )
        )
        out.append(_not_assessed(*_NO_CIRCUIT))
        return out + long
    if ev.priors is None or ev.no_priors is None:
        return out + long
    generalise = priors_generalise(ev)
    if generalise is not None:
        out.append(generalise)
    pa, fa = _seed_values(ev, "priors", "edge_auroc"), _seed_values(ev, "no priors", "edge_auroc")
    if not (np.isfinite(pa).any() or np.isfinite(fa).any()):
        return out + [_not_assessed(*_NO_CIRCUIT)] + long
    return out + [priors_recover_connectivity(ev), priors_recover_impulse(ev)] + long
