"""Verdicts: what a study hands back, one shape and one vocabulary for every study.

One vocabulary (every study's lines begin with one of these words, details in parentheses after it):

- a reference finding: ``REPRODUCED``, ``NOT reproduced``, ``UNDECIDED`` (its interval holds the
  value that would decide it) or ``NOT ASSESSED`` (a number it rests on is missing);
- a planted truth (the mechanism built into a synthetic world): ``RECOVERED``, ``MISSED`` or
  ``NOT ASSESSED``; a reference finding that was planted in the model reads ``RECOVERED
  (planted)`` / ``MISSED (planted)`` (never ``REPRODUCED``: that would credit the reference with
  what was built in).

One recovery rule (:func:`interval_clears`, :func:`interval_within`): a truth is recovered when the
whole bootstrap interval lies on the expected side of its threshold (above 0, above an AUROC of
0.75, below a relative distance of 0.5, on the truth's side of 0), or wholly inside the tolerance
around a planted value, never by the estimate's sign or value alone.

- :class:`Finding`: one reference claim, its verdict and the numbers behind it; :func:`assess`
  gives a verdict only from finite numbers: a finding whose inputs are missing or NaN (one
  seed where consistency across seeds is asked, an empty test split) reads ``NOT ASSESSED``
  with the reason, never ``NOT reproduced``.
- :data:`PLANTED_WORDING`: a finding that was planted in the model reads ``planted: recovered`` or
  ``planted: missed`` (never ``REPRODUCED``).
- :class:`PlantedTruthRow`: one row of the planted-truth table (how much of the mechanism built
  into a synthetic world a study recovered), in the schema :mod:`scimech.studies.validate` uses.
- :func:`recovery_line`, :func:`write_outcome`, :func:`print_outcome`: ``recovery.txt`` (first
  line ``<study> planted truth: K of N recovered (...)``, then the table) and ``findings.txt``
  (one line per finding), written atomically and printed: the two files ``scimech demo`` prints.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

__all__ = [
    "Finding",
    "PlantedTruthRow",
    "Verdict",
    "assess",
    "recovery_line",
    "write_outcome",
    "print_outcome",
    "RECOVERY_FILE",
    "FINDINGS_FILE",
    "finite",
    "text_table",
    "PLANTED_WORDING",
    "planted_wording",
    "REPRODUCED",
    "NOT_REPRODUCED",
    "UNDECIDED",
    "NOT_ASSESSED",
    "RECOVERED",
    "MISSED",
    "FINDING_WORDS",
    "TRUTH_WORDS",
    "interval_clears",
    "interval_within",
    "truth_word",
]

RECOVERY_FILE = "recovery.txt"  # first line: "<study> planted truth: K of N recovered (...)", then the table
FINDINGS_FILE = "findings.txt"  # one line per reference finding with its verdict

Verdict = Literal["REPRODUCED", "NOT reproduced", "NOT ASSESSED"]

REPRODUCED, NOT_REPRODUCED, UNDECIDED, NOT_ASSESSED = "REPRODUCED", "NOT reproduced", "UNDECIDED", "NOT ASSESSED"
RECOVERED, MISSED = "RECOVERED", "MISSED"
#: the words a reference finding's line begins with
FINDING_WORDS = (REPRODUCED, NOT_REPRODUCED, UNDECIDED, NOT_ASSESSED)
#: the words of a planted truth (a row of the planted-truth table, a planted finding)
TRUTH_WORDS = (RECOVERED, MISSED, NOT_ASSESSED)

#: how a reference finding reads on a model where it was planted: "REPRODUCED" would credit the
#: reference with what was built in; the line says whether the study recovered it (``Finding.wording``)
PLANTED_WORDING = {True: f"{RECOVERED} (planted)", False: f"{MISSED} (planted)", None: f"{NOT_ASSESSED} (planted)"}


def planted_wording(recovered: bool | None) -> str:
    """``"RECOVERED (planted)"``, ``"MISSED (planted)"`` or (``None``) ``"NOT ASSESSED (planted)"``."""
    return PLANTED_WORDING[None if recovered is None else bool(recovered)]


def truth_word(recovered: bool | None) -> str:
    """``RECOVERED``, ``MISSED`` or (``None``) ``NOT ASSESSED``."""
    return NOT_ASSESSED if recovered is None else RECOVERED if recovered else MISSED


def interval_clears(low: float, high: float, threshold: float = 0.0, *, above: bool = True) -> bool | None:
    """The one recovery rule: the whole interval ``[low, high]`` lies beyond ``threshold`` on the expected
    side (``above``: ``low > threshold``; else ``high < threshold``). ``None`` when a bound is not finite."""
    if not (finite(low) and finite(high) and finite(threshold)):
        return None
    return bool(float(low) > threshold) if above else bool(float(high) < threshold)


def interval_within(low: float, high: float, centre: float, tolerance: float) -> bool | None:
    """The rule for a planted value: the whole interval lies within ``centre +- tolerance`` (an
    equivalence test: a wide interval is not a recovery). ``None`` when a number is not finite."""
    if not all(finite(v) for v in (low, high, centre, tolerance)):
        return None
    return bool(centre - tolerance <= float(low) and float(high) <= centre + tolerance)


@dataclass(frozen=True)
class Finding:
    """One reference finding tested on a run's numbers: the one finding type of every study.

    ``claim``: the finding as the reference states it; ``verdict``: ``"REPRODUCED"``,
    ``"NOT reproduced"`` or ``"NOT ASSESSED"``; ``evidence``: the numbers it rests on, in
    words; ``reason``: why it could not be assessed (``NOT ASSESSED`` only); ``numbers``: the
    estimates the verdict used, by name.

    How its line reads: ``label`` goes before the verdict (``"1. "``: the reference's
    numbering); ``wording`` says the verdict as the study words it (``NOT reproduced (the
    baseline is better)``; a finding planted in the model: :func:`planted_wording`; default:
    the verdict); ``qualifier`` follows it (``" (planted stand-in)"``); ``note`` follows the
    line; ``terse`` leaves the evidence to the report (the line keeps only the reason a finding
    was not assessed, and the note).
    """

    claim: str
    verdict: Verdict
    evidence: str = ""
    reason: str = ""
    numbers: Mapping[str, float] = field(default_factory=dict)
    label: str = ""
    wording: str = ""
    qualifier: str = ""
    note: str = ""
    terse: bool = False
    world: str = ""

    @property
    def assessed(self) -> bool:
        return self.verdict != "NOT ASSESSED"

    def line(self) -> str:
        """The line ``findings.txt`` and ``scimech demo`` print (``world``: the data it was tested on,
        ``[synthetic world (...)]`` at its end)."""
        head = f"{self.label}{self.wording or self.verdict}{self.qualifier}: {self.claim}"
        tag = f" [{self.world}]" if self.world else ""
        if self.terse:
            return head + (f" ({self.reason})" if not self.assessed else "") + self.note + tag
        if not self.assessed and not self.wording:
            return f"{head} ({self.reason})." + self.note + tag
        return head + (f" ({self.evidence})." if self.evidence else ".") + self.note + tag


def finite(v: Any) -> bool:
    """Whether ``v`` is a finite number (``None``, NaN, inf and text are not)."""
    try:
        return v is not None and math.isfinite(float(v))
    except (TypeError, ValueError):
        return False


def assess(
    claim: str,
    holds: bool | None,
    evidence: str = "",
    *,
    numbers: Mapping[str, Any] | None = None,
    minimum: Mapping[str, tuple[int, int]] | None = None,
) -> Finding:
    """A :class:`Finding` whose verdict rests only on numbers that are there.

    Parameters
    ----------
    claim
        The finding, as the reference states it.
    holds
        Whether the run's numbers support it (``None``: no rule could be applied).
    evidence
        The numbers in words, for the line.
    numbers
        The estimates and interval bounds the verdict used, by name: any missing or non-finite
        one makes the finding ``NOT ASSESSED`` (naming which), whatever ``holds`` says.
    minimum
        ``{what: (have, need)}`` counts the rule needs (e.g. ``{"seeds": (1, 2)}``): too few
        makes the finding ``NOT ASSESSED``.
    """
    numbers = dict(numbers or {})
    problems = [
        f"{what}: {have} where at least {need} are needed"
        for what, (have, need) in (minimum or {}).items()
        if have < need
    ]
    bad = [k for k, v in numbers.items() if not finite(v)]
    if bad:
        problems.append(f"{', '.join(bad)} {'is' if len(bad) == 1 else 'are'} not a finite number")
    if holds is None and not problems:
        problems.append("no rule applied")
    if problems:
        return Finding(claim, "NOT ASSESSED", evidence, "; ".join(problems), numbers)
    return Finding(claim, "REPRODUCED" if holds else "NOT reproduced", evidence, "", numbers)


@dataclass(frozen=True)
class PlantedTruthRow:
    """One row of a planted-truth table (the schema of :mod:`scimech.studies.validate`).

    ``truth`` names the planted fact, ``measure`` what was measured; ``estimate`` and its
    interval ``ci_low``..``ci_high`` against ``threshold``. ``recovered`` is ``True`` /
    ``False``, or ``None`` when the estimate or its interval is not a finite number (the row
    reads "not assessed" and is not counted as recovered or missed). ``counted``: rows that
    are contrasts (a regime not built to recover the truth) are reported but not counted.
    What the study found and how the row is shown: ``found`` (in words), ``planted`` (the
    planted value, in words or a number), ``criterion`` (the rule in words), ``summary`` (the
    row's part of the recovery line) and ``label`` (a short name, e.g. ``block0.h1``).
    """

    truth: str
    measure: str
    estimate: float
    ci_low: float
    ci_high: float
    threshold: float
    recovered: bool | None
    counted: bool = True
    found: str = ""
    planted: object = ""
    criterion: str = ""
    summary: str = ""
    label: str = ""

    @property
    def assessed(self) -> bool:
        return self.recovered is not None

    @property
    def verdict(self) -> str:
        return truth_word(self.recovered)

    @classmethod
    def from_interval(
        cls,
        truth: str,
        measure: str,
        estimate: float,
        ci_low: float,
        ci_high: float,
        threshold: float,
        *,
        above: bool = True,
        counted: bool = True,
    ) -> PlantedTruthRow:
        """Recovered when the whole interval clears ``threshold`` (above it, or below with
        ``above=False``: :func:`interval_clears`); not assessed when a number is not finite."""
        rec = interval_clears(ci_low, ci_high, threshold, above=above) if finite(estimate) else None
        return cls(truth, measure, float(estimate), float(ci_low), float(ci_high), float(threshold), rec, counted)


def recovery_line(study: str, rows: Iterable[PlantedTruthRow], detail: str = "", world: str = "") -> str:
    """``"<study> planted truth: K of N recovered (detail) [world]"``: the one planted-truth summary of
    every study; rows not assessed are named, not counted; rows not ``counted`` (contrasts) are left
    to ``detail``."""
    rows = [r for r in rows if r.counted]
    k = sum(r.recovered is True for r in rows)
    n = sum(r.recovered is not None for r in rows)
    skipped = len(rows) - n
    extra = [detail] if detail else []
    if skipped:
        extra.append(f"{skipped} not assessed")
    tag = f" [{world}]" if world else ""
    return f"{study} planted truth: {k} of {n} recovered" + (f" ({'; '.join(extra)})" if extra else "") + tag


def write_outcome(out: str | Path, findings: Sequence[Finding | str], recovery: str | None = None) -> list[Path]:
    """Write ``out/findings.txt`` (one line per finding) and, when given, ``out/recovery.txt``
    (its first line is the :func:`recovery_line`, then whatever table and notes the study
    adds), atomically. Returns the paths written."""
    from scimech.run.results import (
        atomic_write_text,  # lazy: xarray, and this module is read by every command's parser
    )

    out = Path(out)
    written = []
    if recovery is not None:
        written.append(atomic_write_text(out / RECOVERY_FILE, recovery.rstrip("\n") + "\n"))
    lines = [f.line() if isinstance(f, Finding) else str(f) for f in findings]
    written.append(atomic_write_text(out / FINDINGS_FILE, "".join(f"{line}\n" for line in lines)))
    return written


def print_outcome(folder: str | Path) -> None:
    """Print the planted-truth line of ``recovery.txt`` and every line of ``findings.txt``."""
    for name, first_only in ((RECOVERY_FILE, True), (FINDINGS_FILE, False)):
        path = Path(folder) / name
        if path.is_file():
            lines = path.read_text().splitlines()
            print("\n".join(lines[:1] if first_only else lines))


def text_table(
    header: Sequence[str], rows: Sequence[Sequence[Any]], *, rule: bool = False, sep: str = "  ", aligned: bool = True
) -> str:
    """The plain-text table of ``recovery.txt``: one line per row, cells joined by ``sep``; ``aligned``:
    each column left-aligned to its widest cell (header included); ``rule``: a line of dashes under
    the header. Trailing blanks are cut."""
    cells = [[str(v) for v in row] for row in (header, *rows)]
    if not aligned:
        return "\n".join(sep.join(row).rstrip() for row in cells)
    width = [max(len(row[k]) for row in cells) for k in range(len(header))]
    line = lambda vals: sep.join(v.ljust(w) for v, w in zip(vals, width)).rstrip()  # noqa: E731
    lines = [line(cells[0])] + ([line(["-" * w for w in width])] if rule else []) + [line(r) for r in cells[1:]]
    return "\n".join(lines)
