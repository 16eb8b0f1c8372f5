"""The README's figures, written from the output files of the commands they cite.

README.md quotes each study's numbers between markers::

    <!-- figures ocean: begin (written by scripts/readme_figures.py from the run cited) -->
    ...
    <!-- figures ocean: end -->

Each block (:data:`BLOCKS`) names the command whose output folder its numbers come from, reads them
from that folder's files (``competence.nc``, ``recovery.txt``, ``findings.txt``; ocean's ``summary.nc``
and ``ocean.zarr``, astro's ``advantage.nc``, neuro's ``recovery.csv`` and ``long_context.csv``) and
fills its template; the words a number decides (a verdict, "every regime", "in both regimes", which
planted properties are missed) are read from the same files, and a sentence whose premise the run no
longer supports is refused, naming it (edit the template here, then rewrite). Run from the repository root::

    make demo                                                   # reports/demo: ocean, astro (planted), neuro
    .venv/bin/scimech astro study --quick --out runs/astro/quick
    .venv/bin/scimech neuro study --size medium --out runs/neuro/medium
    .venv/bin/python scripts/readme_figures.py                  # print the blocks those folders give
    .venv/bin/python scripts/readme_figures.py --write          # rewrite them in README.md
    .venv/bin/python scripts/readme_figures.py --check          # exit 1 where README.md differs

A block whose folder is missing is skipped (said on stderr), so ``--write`` after ``make demo`` alone
rewrites the demo's blocks. ``tests/test_readme_figures.py`` (slow tier) runs the quick commands and
compares every number of their blocks with the files.
"""

from __future__ import annotations

import argparse
import math
import re
import sys
import textwrap
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: ``<!-- figures NAME: begin ... -->BODY<!-- figures NAME: end -->``
MARKER = re.compile(r"<!-- figures (?P<name>[\w-]+): begin[^>]*-->(?P<body>.*?)<!-- figures (?P=name): end -->", re.S)

#: a number as the README prints it (a leading minus, decimals, an exponent); not a unit's exponent
#: (``W m-2``) nor a hyphenated name (``context-256``)
NUMBER = re.compile(r"(?<![\w.])(?<![A-Za-z]-)-?\d+(?:\.\d+)?(?:e[-+]?\d+)?")


class FiguresError(RuntimeError):
    """A run folder lacks a file a block reads, or the run no longer supports a block's wording."""


def g3(x: float) -> str:
    """Three significant figures, as the competence tables print them (``98.1``, ``110``, ``0.0233``)."""
    return f"{x:.3g}"


def fixed(decimals: int) -> Callable[[float], str]:
    """A format with ``decimals`` decimals (``fixed(2)(0.8177) == "0.82"``)."""
    return lambda x: f"{x:.{decimals}f}"


f1, f2, f3, f4 = (fixed(d) for d in (1, 2, 3, 4))


def pct(x: float) -> str:
    """A fraction as a percentage with one decimal (``0.0467`` -> ``4.7``)."""
    return f"{100 * x:.1f}"


def order(x: float) -> str:
    """The order of magnitude of ``x`` as ``1e-12`` (``2.5e-12`` -> ``1e-12``)."""
    return "0" if x == 0 else f"1e{math.floor(math.log10(abs(x)))}"


def _fill(text: str) -> str:
    """``text`` as the README's list item continues: lines of at most 100 characters indented by 2."""
    return textwrap.fill(
        " ".join(text.split()), width=100, initial_indent="  ", subsequent_indent="  ", break_on_hyphens=False
    )


def need(condition: bool, block: str, premise: str, found: str) -> None:
    """Refuse a block whose wording the run no longer supports."""
    if not condition:
        raise FiguresError(
            f"README figures {block!r}: the sentence says {premise}, but the run gives {found}; "
            f"edit the template of {block!r} in scripts/readme_figures.py, then rerun with --write."
        )


def _file(folder: Path, *names: str) -> Path:
    """The first of ``names`` under ``folder`` (a study's own folder or its ``run`` subfolder)."""
    for name in names:
        for base in (folder, folder / "run"):
            if (base / name).exists():
                return base / name
    raise FiguresError(f"{folder} has no {' or '.join(names)}: is it the output folder of the command the block cites?")


def _dataset(path: Path):
    import xarray as xr

    with xr.open_dataset(path) as ds:
        return ds.load()


def competence_cells(folder: Path) -> dict:
    """``competence.nc`` as ``{(model, metric): (value, low, high, diff, diff_low, diff_high)}`` and
    ``{model: verdict}``, ``{metric: best yardstick}``."""
    ds = _dataset(_file(folder, "competence.nc"))
    cells = {}
    for m in ds["model"].values:
        for k in ds["metric"].values:
            c = ds.sel(model=m, metric=k)
            cells[str(m), str(k)] = tuple(
                float(c[v])
                for v in (
                    "value",
                    "ci_low",
                    "ci_high",
                    "worse_than_best",
                    "worse_than_best_low",
                    "worse_than_best_high",
                )
            )
    verdicts = {str(m): str(v) for m, v in zip(ds["model"].values, ds["verdict"].values)}
    best = {str(k): str(b) for k, b in zip(ds["metric"].values, ds["best_yardstick"].values)}
    return {"cells": cells, "verdict": verdicts, "best": best, "attrs": dict(ds.attrs)}


def recovery_count(folder: Path) -> tuple[int, int]:
    """``K of N`` from the first line of ``recovery.txt`` (the planted-truth line ``make demo`` prints)."""
    first = _file(folder, "recovery.txt").read_text().splitlines()[0]
    found = re.search(r"planted truth: (\d+) of (\d+) recovered", first)
    if not found:
        raise FiguresError(f"{folder}/recovery.txt does not open with '<study> planted truth: K of N recovered'.")
    return int(found[1]), int(found[2])


def findings_verdicts(folder: Path) -> list[str]:
    """The verdict word each line of ``findings.txt`` opens with (``REPRODUCED``, ``NOT reproduced``, ...)."""
    words = ("NOT reproduced", "NOT ASSESSED", "REPRODUCED", "UNDECIDED", "RECOVERED", "MISSED", "NO", "YES")
    out = []
    for line in _file(folder, "findings.txt").read_text().splitlines():
        text = re.sub(r"^\d+[.)] ", "", line.strip())
        if text:
            out.append(next((w for w in words if text.startswith(w)), text.split(":")[0]))
    return out


# --- ocean: `scimech ocean study --quick` (the demo's run) -----------------------------------------
def ocean_values(folder: Path) -> dict:
    """The ocean block's figures from the quick study's folder (``reports/demo/ocean``)."""
    import numpy as np
    import xarray as xr

    comp = competence_cells(folder)
    cells, verdict, best = comp["cells"], comp["verdict"], comp["best"]
    regimes = ("mixed", "prediction_only", "prescription_only")
    need(best["RMSE"] == "damped persistence", "ocean", "damped persistence is the best yardstick", best["RMSE"])
    need(
        all(verdict[r] == verdict["mixed"] for r in regimes),
        "ocean",
        "every regime has the mixed regime's verdict",
        str({r: verdict[r] for r in regimes}),
    )
    s = _dataset(_file(folder, "summary.nc"))
    store = xr.open_zarr(_file(folder, "ocean.zarr"), consolidated=False)
    terms = [v for v in ("q_surf", "q_ekman", "q_geo", "q_entr", "q_diff", "q_hidden") if v in store]
    residual = float(np.abs(store["dmlhc_dt"] - sum(store[t] for t in terms)).max())
    rmse = s["rmse"].mean("seed")
    est, lo, hi = (s[f"recovery_{v}"] for v in ("estimate", "low", "high"))
    rec = s["recovered"]

    def row(truth: str, regime: str) -> tuple[float, float, float]:
        return tuple(float(a.sel(truth=truth, regime=regime)) for a in (est, lo, hi))

    ekman = {r: row("q_ekman channel", r) for r in ("mixed", "prescription_only")}
    need(
        len({tuple(f2(x) for x in v) for v in ekman.values()}) == 1,
        "ocean",
        "Ekman's channel reads the same in both regimes",
        str(ekman),
    )
    named = [t for t in s["truth"].values if str(t).endswith(" channel")]
    missed = sorted(
        {str(t) for t in named for r in ("mixed", "prescription_only") if not bool(rec.sel(truth=t, regime=r))}
    )
    need(missed == ["q_ekman channel"], "ocean", "every named term is found in its channel bar Ekman", str(missed))
    heads = [bool(rec.sel(truth="head weights = exact budget", regime=r)) for r in ("mixed", "prescription_only")]
    need(not any(heads), "ocean", "the learnt heads are MISSED in either regime", str(heads))
    hidden = row("q_hidden in free_0", "mixed")
    nearest = str(s["recovery_found"].sel(truth="q_hidden in free_0", regime="mixed").values)
    need(
        not bool(rec.sel(truth="q_hidden in free_0", regime="mixed")) and "closest true term q_entr" in nearest,
        "ocean",
        "the hidden flux is not recovered and sits closer to entrainment",
        nearest,
    )
    consistency = findings_verdicts(folder)[1:3]
    need(
        len(set(consistency)) == 1,
        "ocean",
        "the consistency finding reads alike against either regime",
        str(consistency),
    )
    agree, cka = s["channel_agreement_mean"], s["cka_mean"]
    k, n = recovery_count(folder)
    v = {
        "verdict": verdict["mixed"],
        "mixed": cells["mixed", "RMSE"],
        "damped": cells["damped persistence", "RMSE"],
        "clim": cells["climatology", "RMSE"][0],
        "pers": cells["persistence", "RMSE"][0],
        "residual": residual,
        "rmse_min": float(rmse.min()),
        "rmse_max": float(rmse.max()),
        "agree": {r: float(agree.sel(regime=r)) for r in regimes},
        "cka": {r: float(cka.sel(regime=r)) for r in regimes},
        "consistency": consistency[0],
        "k": k,
        "n": n,
        "ekman": ekman["mixed"],
        "hidden": hidden,
    }
    return v


def ocean_text(v: Mapping) -> str:
    m, d, e, h = v["mixed"], v["damped"], v["ekman"], v["hidden"]
    every = "every regime competent" if v["verdict"] == "competent" else f"every regime {v['verdict']}"
    return (
        f"\n  the model is **{v['verdict']}**: RMSE {g3(m[0])} [{g3(m[1])}, {g3(m[2])}] W m-2 (mixed) against damped"
        f" persistence of the\n  target {g3(d[0])} [{g3(d[1])}, {g3(d[2])}], climatology {g3(v['clim'])}, persistence"
        f" {g3(v['pers'])} (paired difference to damped\n  persistence [{f1(m[4])}, {f1(m[5])}]; {every}). The"
        f" synthetic budget closes to ~{order(v['residual'])} W m-2;\n  skill is similar across regimes (RMSE"
        f" {v['rmse_min']:.0f}-{v['rmse_max']:.0f} W m-2); mixed supervision is more consistent\n  across seeds than"
        f" prediction-only by channel agreement ({f2(v['agree']['mixed'])} vs {f2(v['agree']['prediction_only'])})"
        f" but not by linear CKA\n  ({f3(v['cka']['mixed'])} vs {f3(v['cka']['prediction_only'])}, blind to what each"
        f" channel means), and prescription-only is more consistent\n  than both"
        f" ({f2(v['agree']['prescription_only'])}, CKA {f3(v['cka']['prescription_only'])}): the paper's finding reads"
        f" **{v['consistency']}** under the rule that\n  needs both measures, against either regime"
        f" ([docs/ocean.md](docs/ocean.md)). Planted truth:\n  {v['k']} of {v['n']} recovered; every named budget"
        f" term is found in its channel bar Ekman (r {f2(e[0])} [{f2(e[1])},\n  {f2(e[2])}] in both regimes: lower"
        f" bounds just under the 0.5 threshold); the learnt heads drift from\n  the budget's weights (MISSED in either"
        f" regime); the hidden eddy flux is **not** recovered by the\n  free concept at the default strength (|r|"
        f" {f2(h[0])} [{f2(h[1])}, {f2(h[2])}], closer to entrainment: it leaks\n  into the named channels);"
    )


# --- astro: `scimech astro study --quick` (the shipped stand-in, seed 0) ----------------------------
def astro_values(folder: Path) -> dict:
    """The astro block's figures from ``scimech astro study --quick``'s folder."""
    comp = competence_cells(folder)
    cells, verdict, best = comp["cells"], comp["verdict"], comp["best"]
    adv = _dataset(_file(folder, "study/advantage.nc", "advantage.nc"))
    planted = bool(int(_dataset(_file(folder, "study/interventions.nc", "interventions.nc")).attrs.get("planted", 0)))
    need(not planted, "astro", "the unplanted stand-in (scimech astro study --quick)", "a planted stand-in's run")
    phot = "photometry-only"
    sig, out = cells[phot, "sigma_NMAD"], cells[phot, "outlier fraction"]
    knn_s, tpl_s = cells["colour kNN", "sigma_NMAD"][0], cells["template fit", "sigma_NMAD"][0]
    knn_o = cells["colour kNN", "outlier fraction"][0]
    need(sig[0] < min(knn_s, tpl_s), "astro", "sigma_NMAD better than both yardsticks", f"{sig[0]:.4f}")
    need(
        best["outlier fraction"] == "colour kNN",
        "astro",
        "the kNN is the yardstick of outliers",
        best["outlier fraction"],
    )
    above, below = out[4] > 0, out[5] < 0  # the paired interval of (model - kNN) wholly above / below 0
    need(
        (verdict[phot] == "competent") != above,
        "astro",
        "the verdict follows the outlier fraction against the kNN's",
        f"{verdict[phot]} with the paired difference [{out[4]:.4f}, {out[5]:.4f}]",
    )
    return {
        "n_test": int(adv["n"].sel(population="all")),
        "sigma": sig,
        "knn_sigma": knn_s,
        "template_sigma": tpl_s,
        "outliers": out,
        "knn_outliers": knn_o,
        "verdict": verdict[phot],
        "outliers_vs_knn": "above" if above else "below" if below else "not measurably above",
        "advantage": tuple(
            float(adv[v].sel(population="all")) for v in ("advantage", "advantage_low", "advantage_high")
        ),
    }


def astro_text(v: Mapping) -> str:
    s, o, a = v["sigma"], v["outliers"], v["advantage"]
    conj = "but" if v["outliers_vs_knn"] == "above" else "and"
    text = (
        f"on the quick study's {v['n_test']} test galaxies its photometry-only sigma_NMAD is {f3(s[0])}"
        f" [{f3(s[1])}, {f3(s[2])}], better than the colour kNN ({f3(v['knn_sigma'])}) and the template fit"
        f" ({f3(v['template_sigma'])}), {conj} its outlier fraction, {pct(o[0])} % [{pct(o[1])}, {pct(o[2])}], is"
        f" {v['outliers_vs_knn']} the kNN's {pct(v['knn_outliers'])} % (paired difference [{pct(o[4])},"
        f" {pct(o[5])}] points), so the report opens **{v['verdict']}**. The image advantage is"
        f" {f4(a[0])} [{f4(a[1])}, {f4(a[2])}] in mean|dz|"
    )
    return "\n" + _fill(text)


def astro_planted_values(folder: Path) -> dict:
    """The planted stand-in's sentence from the demo's astro folder (``scimech astro study --quick --planted``):
    the verdict of each planted head (the rows of ``recovery.txt``) and the image advantage."""
    adv = _dataset(_file(folder, "study/advantage.nc", "advantage.nc"))
    rows = _file(folder, "recovery.txt").read_text().splitlines()
    heads = {}
    for head, key in (("colour", "inert colour head"), ("image", "image head")):
        row = next((r for r in rows[1:] if r.startswith(key) and r.count(" | ") >= 2), None)
        need(row is not None, "astro-planted", f"a row for the {key}", "none in recovery.txt")
        heads[head] = row.rsplit(" | ", 1)[1].strip()
    return {
        "heads": heads,
        "advantage": tuple(
            float(adv[v].sel(population="all")) for v in ("advantage", "advantage_low", "advantage_high")
        ),
    }


def astro_planted_text(v: Mapping) -> str:
    verb = {"RECOVERED": "recovers", "MISSED": "misses"}
    c, i = (verb.get(v["heads"][h], f"reads {v['heads'][h]} for") for h in ("colour", "image"))
    a = v["advantage"]
    heads = f"{c} both its colour head and its image head" if c == i else f"{c} its colour head and {i} its image head"
    return f"The planted stand-in {heads}\n  (image advantage {f4(a[0])} [{f4(a[1])}, {f4(a[2])}] in mean|dz|)"


# --- neuro: `scimech neuro study --size medium` and the quick study (the demo's run) -----------------
#: the README's name of a forecaster of neuro.baselines
NEURO_MODELS = {
    "gru": "the GRU",
    "tide": "TiDE-lite",
    "ridge_arx": "ridge ARX",
    "nlinear": "NLinear",
    "dlinear": "DLinear",
    "last_value": "persistence",
    "mean": "the mean of the context",
    "stimulus_evoked": "the stimulus-evoked model",
}
#: the README's words for a planted-truth row of neuro.recovery
NEURO_TRUTHS = {
    "edges": "which pairs are wired",
    "signs": "the signs",
    "impulse": "the impulse response",
    "left_right": "left-right alternation",
    "rostro_caudal": "the rostro-caudal wave",
    "frequency": "the beat frequency",
    "tail_beat": "the context-256 tail beat",
}
_NUM = r"(-?\d+(?:\.\d+)?)"
#: the model keys of neuro.baselines by the words findings.txt uses for them (neuro.findings.MODEL_NAMES)
NEURO_KEYS = {
    "mean of the context": "mean",
    "persistence (last value)": "last_value",
    "stimulus-evoked ridge": "stimulus_evoked",
    "NLinear": "nlinear",
    "DLinear": "dlinear",
    "ridge ARX": "ridge_arx",
    "GRU": "gru",
    "TiDE-lite": "tide",
}


def _find(pattern: str, line: str, block: str, what: str) -> re.Match:
    found = re.search(pattern, line)
    if not found:
        raise FiguresError(f"README figures {block!r}: findings.txt no longer says {what} as expected: {line[:200]}")
    return found


def neuro_findings(folder: Path, block: str) -> dict:
    """The numbers of the neuro study's five findings, read from the lines of ``findings.txt``."""
    lines = [x for x in _file(folder, "findings.txt").read_text().splitlines() if x.strip()]
    verdicts = findings_verdicts(folder)
    need(len(lines) >= 5, block, "five findings", f"{len(lines)} lines in findings.txt")
    first = _find(
        rf"ID test MAE of the best discovered program per seed \[[^\]]+\] {_NUM} \[[^\]]+\] vs the best baseline, "
        rf"([^,]+), {_NUM} \[[^\]]+\]; difference {_NUM} \[{_NUM}, {_NUM}\]",
        lines[0],
        block,
        "the ID comparison of finding 1",
    )
    ood = _find(rf"Out of distribution .*?\(difference {_NUM} \[{_NUM}, {_NUM}\]", lines[0], block, "finding 1's OOD")
    seeds = r"(?: \(seeds [^)]*\))?"  # the range over seeds a study of several seeds adds
    conn = _find(
        rf"edge AUROC {_NUM}{seeds} vs {_NUM}{seeds}; sign accuracy {_NUM}{seeds} vs {_NUM}",
        lines[2],
        block,
        "finding 3",
    )
    imp = _find(rf"response {_NUM}{seeds} vs {_NUM}", lines[3], block, "finding 4")
    tail = _find(r"\(closest: ([^)]+)\)", lines[4], block, "finding 5's closest model")
    return {
        "verdicts": verdicts,
        "id": (float(first[1]), float(first[3])),
        "baseline": NEURO_KEYS.get(first[2], first[2]),  # the key of the model findings.txt names in words
        "id_diff": tuple(float(first[i]) for i in (4, 5, 6)),
        "ood_diff": tuple(float(ood[i]) for i in (1, 2, 3)),
        "edges": (float(conn[1]), float(conn[2])),
        "signs": (float(conn[3]), float(conn[4])),
        "impulse": (float(imp[1]), float(imp[2])),
        "closest": NEURO_KEYS.get(tail[1], tail[1]),
    }


def neuro_recovery(folder: Path) -> dict:
    """``recovery.csv``: ``{row: (found, low, high, recovered)}`` and the number of swimming windows."""
    import pandas as pd

    table = pd.read_csv(_file(folder, "recovery.csv"), index_col="row")
    rows = {
        str(r): (float(t["found"]), float(t["low"]), float(t["high"]), str(t["recovered"]) == "True")
        for r, t in table.iterrows()
    }
    windows = re.match(r"(\d+) swimming windows", str(table.loc["tail_beat", "truth"])) if "tail_beat" in rows else None
    beats = {  # the free-run rows read only the windows whose free run beats, and say how many
        str(r): (int(m[1]), int(m[2]))
        for r, t in table.iterrows()
        if (m := re.search(r"over the (\d+) of (\d+) windows whose free run beats", str(t["quantity"])))
    }
    return {"rows": rows, "windows": int(windows[1]) if windows else 0, "beats": beats}


def neuro_medium_values(folder: Path, quick: Path) -> dict:
    """The neuro block's figures from ``scimech neuro study --size medium``'s folder (and the quick study's
    competence verdict from the demo's)."""
    import pandas as pd

    block = "neuro-medium"
    f = neuro_findings(folder, block)
    v = f["verdicts"]
    need(v[0] == "UNDECIDED" and f["baseline"] == "tide", block, "programs tie TiDE-lite in distribution", v[0])
    need(f["ood_diff"][2] < 0, block, "programs beat TiDE-lite out of distribution", str(f["ood_diff"]))
    need(v[1] == "NOT reproduced", block, "the ID-vs-OOD gap is not reproduced", v[1])
    need(v[2] == "REPRODUCED", block, "priors recover wiring and signs in every seed", v[2])
    need(v[3] == "NOT reproduced", block, "priors do not recover impulse responses better", v[3])
    need(v[4] == "NOT reproduced", block, "no free run forecasts the tail beat in half of the windows", v[4])
    long = pd.read_csv(_file(folder, "long_context.csv"), index_col=0)
    rec = neuro_recovery(folder)
    closest = round(float(long.loc[f["closest"], "tail_beat_forecast"]) * rec["windows"])
    comp = competence_cells(folder)
    pick = next(m for m, r in comp["verdict"].items() if r != "yardstick")
    need(comp["best"]["MAE"] == "linear (ridge ARX)", block, "ridge ARX is the best yardstick", comp["best"]["MAE"])
    quick_verdict = competence_cells(quick)["verdict"]
    need(
        comp["verdict"][pick] == "competent" and quick_verdict.get(pick) == "competent",
        block,
        "the discovered program is competent at quick and medium size",
        f"medium {comp['verdict'][pick]}, quick {quick_verdict.get(pick)}",
    )
    worse = [m for m in ("persistence (last value)", "linear (NLinear)", "linear (DLinear)")]
    ridge = comp["cells"]["linear (ridge ARX)", "MAE"]
    need(
        all(comp["cells"][m, "MAE"][0] > ridge[0] for m in worse),
        block,
        "persistence, NLinear and DLinear are worse than ridge ARX",
        str({m: comp["cells"][m, "MAE"][0] for m in worse}),
    )
    k = sum(r[3] for r in rec["rows"].values())
    missed = [NEURO_TRUTHS.get(r, r) for r, t in rec["rows"].items() if not t[3]]
    need(not rec["rows"]["rostro_caudal"][3], block, "the rostro-caudal wave's sign is MISSED", "RECOVERED")
    quick_rows = neuro_recovery(quick)["rows"]
    only_quick = sorted(r for r, t in quick_rows.items() if not t[3] and rec["rows"].get(r, t)[3])
    need(
        only_quick == ["signs"] and findings_verdicts(quick)[0] == "REPRODUCED",
        block,
        "the quick study differs in two: programs also win ID, and only its sign accuracy is missed beyond the medium's",
        f"missed at quick but not at medium: {only_quick}; quick finding 1 {findings_verdicts(quick)[0]}",
    )
    return {
        **f,
        "closest_name": NEURO_MODELS.get(f["closest"], f["closest"]),
        "closest_count": closest,
        "windows": rec["windows"],
        "k": k,
        "n": len(rec["rows"]),
        "missed": missed,
        "pick": comp["cells"][pick, "MAE"],
        "ridge": ridge,
        "rostro": rec["rows"]["rostro_caudal"][:3],
        "rostro_beats": rec["beats"].get("rostro_caudal"),
    }


def _and(words: list[str]) -> str:
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def neuro_medium_text(v: Mapping) -> str:
    d, o, p, r, rc = v["id_diff"], v["ood_diff"], v["pick"], v["ridge"], v["rostro"]
    missed = f"{_and(v['missed'])} {'is' if len(v['missed']) == 1 else 'are'} missed" if v["missed"] else "none missed"
    text = (
        f"tie a trained TiDE-lite in distribution (test MAE {f3(v['id'][0])} vs {f3(v['id'][1])}, difference"
        f" {f3(d[0])} [{f3(d[1])}, {f3(d[2])}]) and beat it out of distribution ({f3(o[0])} [{f3(o[1])},"
        f" {f3(o[2])}]); structural priors recover which pairs are wired and their signs in every seed (edge AUROC"
        f" {f3(v['edges'][0])} vs {f3(v['edges'][1])}, sign accuracy {f3(v['signs'][0])} vs {f3(v['signs'][1])}), but"
        f" not impulse responses ({f3(v['impulse'][0])} vs {f3(v['impulse'][1])}); the ID-vs-OOD gap of"
        f" unconstrained search is **not** reproduced; at context 256 no free run forecasts the tail beat in half of"
        f" the swimming windows ({v['closest_name']} in {v['closest_count']} of {v['windows']}); planted truth"
        f" {v['k']} of {v['n']} ({missed}). The discovered program is **competent** at quick and medium size: MAE"
        f" {f3(p[0])} [{f3(p[1])}, {f3(p[2])}] against the best linear yardstick (ridge ARX) {f3(r[0])} [{f3(r[1])},"
        f" {f3(r[2])}], paired difference [{f3(p[4])}, {f3(p[5])}] (persistence, NLinear and DLinear are worse)."
    )
    beats = v.get("rostro_beats")
    if beats is not None and beats[0] == 0:
        text += (
            f" The discovered program's free run decays to rest: it beats in none of the {beats[1]} windows the"
            " free-run rows read, so the left-right, rostro-caudal and beat-frequency rows are MISSED."
        )
    else:
        text += (
            f" The interval recovery rule reads the rostro-caudal wave's planted sign MISSED ({f3(rc[0])}"
            f" [{f3(rc[1])}, {f3(rc[2])}])."
        )
    return "\n" + _fill(text)


def neuro_quick_values(folder: Path) -> dict:
    """The quick study's planted-truth count (``scimech neuro study --quick``, the demo's run)."""
    block = "neuro-quick"
    verdicts = findings_verdicts(folder)
    need(verdicts[0] == "REPRODUCED", block, "discovered programs also win ID at the quick size", verdicts[0])
    rec = neuro_recovery(folder)
    need(not rec["rows"]["signs"][3], block, "the quick study's sign accuracy falls under its bound", "RECOVERED")
    k, n = recovery_count(folder)
    return {"k": k, "n": n}


def neuro_quick_text(v: Mapping) -> str:
    return f"({v['k']} of {v['n']})"


@dataclass(frozen=True)
class Block:
    """One figures block of the README: the runs it is read from and how."""

    name: str
    #: the command whose output folder the block reads (as the README cites it)
    command: str
    #: its folders, each ``(root, subfolder)``: root ``"demo"`` (``scimech demo``'s folder),
    #: ``"astro_quick"`` or ``"neuro_medium"`` (this script's options of those names)
    sources: tuple[tuple[str, str], ...]
    #: the figures, from those folders in that order
    values: Callable[..., dict]
    text: Callable[[Mapping], str]


BLOCKS: dict[str, Block] = {
    b.name: b
    for b in (
        Block(
            "ocean",
            "scimech demo (its ocean run: scimech ocean study --quick)",
            (("demo", "ocean"),),
            ocean_values,
            ocean_text,
        ),
        Block("astro", "scimech astro study --quick", (("astro_quick", ""),), astro_values, astro_text),
        Block(
            "astro-planted",
            "scimech demo (its astro run: scimech astro study --quick --planted)",
            (("demo", "astro"),),
            astro_planted_values,
            astro_planted_text,
        ),
        Block(
            "neuro-medium",
            "scimech neuro study --size medium (and scimech demo's neuro run for the quick verdict)",
            (("neuro_medium", ""), ("demo", "neuro")),
            neuro_medium_values,
            neuro_medium_text,
        ),
        Block(
            "neuro-quick",
            "scimech demo (its neuro run: scimech neuro study --quick)",
            (("demo", "neuro"),),
            neuro_quick_values,
            neuro_quick_text,
        ),
    )
}


def render(name: str, *folders: str | Path) -> str:
    """Block ``name``'s text from its runs' output folders (in the order of its ``sources``)."""
    block = BLOCKS[name]
    return block.text(block.values(*(Path(f) for f in folders)))


def readme_blocks(text: str) -> dict[str, str]:
    """``{name: body}`` of every figures block in the README's ``text``."""
    return {m["name"]: m["body"] for m in MARKER.finditer(text)}


def rewrite(text: str, bodies: Mapping[str, str]) -> str:
    """``text`` with the body of each block in ``bodies`` replaced (the markers kept); every name must
    have its markers in ``text``."""
    missing = set(bodies) - set(readme_blocks(text))
    if missing:
        raise FiguresError(f"README has no markers for {sorted(missing)} (<!-- figures NAME: begin --> ... end -->).")

    def swap(m: re.Match) -> str:
        if m["name"] not in bodies:
            return m[0]
        start, end = m.span("body")
        return m[0][: start - m.start()] + bodies[m["name"]] + m[0][end - m.start() :]

    return MARKER.sub(swap, text)


def numbers(text: str) -> list[str]:
    """Every number in ``text`` as printed, in order."""
    return NUMBER.findall(text)


def folders(args: argparse.Namespace) -> dict[str, list[Path]]:
    """``{block: its folders}`` for the blocks whose run folders exist (the others said on stderr)."""
    roots = {"demo": args.demo, "astro_quick": args.astro_quick, "neuro_medium": args.neuro_medium}
    out = {}
    for name, b in BLOCKS.items():
        if args.only and name not in args.only:
            continue
        paths = [Path(roots[root]) / sub for root, sub in b.sources]
        absent = [p for p in paths if not p.is_dir()]
        if absent:
            print(f"[readme figures] {name}: skipped ({absent[0]} not found; run `{b.command}`)", file=sys.stderr)
        else:
            out[name] = paths
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--demo", type=Path, default=ROOT / "reports/demo", help="scimech demo's folder (make demo)")
    p.add_argument(
        "--astro-quick",
        type=Path,
        default=ROOT / "runs/astro/quick",
        help="scimech astro study --quick's folder",
    )
    p.add_argument(
        "--neuro-medium",
        type=Path,
        default=ROOT / "runs/neuro/medium",
        help="scimech neuro study --size medium's folder",
    )
    p.add_argument("--readme", type=Path, default=ROOT / "README.md")
    p.add_argument("--only", nargs="+", choices=sorted(BLOCKS), help="these blocks only")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true", help="rewrite the blocks in the README")
    mode.add_argument("--check", action="store_true", help="exit 1 where the README's blocks differ")
    args = p.parse_args(argv)
    try:
        bodies = {name: render(name, *paths) for name, paths in folders(args).items()}
    except FiguresError as err:
        print(err, file=sys.stderr)
        return 2
    text = args.readme.read_text()
    if args.write:
        args.readme.write_text(rewrite(text, bodies))
        print(f"[readme figures] rewrote {', '.join(bodies) or 'nothing'} in {args.readme}")
        return 0
    if args.check:
        shown = readme_blocks(text)
        stale = [n for n, body in bodies.items() if shown.get(n) != body]
        for n in stale:
            print(f"[readme figures] {n}: README {numbers(shown.get(n, ''))} vs run {numbers(bodies[n])}")
        return 1 if stale else 0
    for name, body in bodies.items():
        print(f"--- {name} ({BLOCKS[name].command})\n{body}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
