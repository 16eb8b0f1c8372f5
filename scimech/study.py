"""The study contract: what every domain study (ocean, astro, neuro, yours) hands back.

A study turns data and a model into *findings* (reference claims, each with a verdict
computed from the run's own numbers) and a *planted-truth* table (how much of the
mechanism built into its synthetic world it recovered). This module holds the pieces every
study shares, so that none writes them its own way:

- :class:`Finding`: one claim, its verdict and the numbers behind it. :func:`assess` gives a
  verdict only from finite numbers: a finding whose inputs are missing or NaN (one seed
  where consistency across seeds is asked, an empty test split) reads ``NOT ASSESSED`` with
  the reason, never ``NOT reproduced``.
- :class:`PlantedTruthRow`: one row of the planted-truth table, in the schema
  :mod:`scimech.validate` uses (truth, estimate, interval, threshold, verdict).
- :func:`write_outcome`: ``recovery.txt`` (first line ``<study> planted truth: K of N
  recovered (...)``, then the table) and ``findings.txt`` (one line per finding), written
  atomically: the two files ``scimech demo`` prints.
- :func:`registered_studies`: the studies installed, found through the entry-point group
  ``scimech.studies`` (as xarray finds its backends). A study is a module with
  ``TITLE`` (one line), ``register(subparsers)`` (its ``scimech <name> ...`` commands) and
  ``demo(out_dir, quick=True) -> report path``. A package of yours becomes a study by
  declaring ``[project.entry-points."scimech.studies"] mine = "mypkg.cli"``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import import_module
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, Literal

from .results import atomic_write_text

__all__ = ["Finding", "PlantedTruthRow", "Plan", "add_dry_run", "assess", "write_outcome", "recovery_line",
           "registered_studies", "load_study", "RECOVERY_FILE", "FINDINGS_FILE", "BUILTIN_STUDIES"]

RECOVERY_FILE = "recovery.txt"  # first line: "<study> planted truth: K of N recovered (...)", then the table
FINDINGS_FILE = "findings.txt"  # one line per reference finding with its verdict
#: the studies shipped with scimech (found without entry points in a checkout that is not installed)
BUILTIN_STUDIES = {"ocean": "ocean.cli", "astro": "astro.cli", "neuro": "neuro.cli"}

Verdict = Literal["REPRODUCED", "NOT reproduced", "NOT ASSESSED"]


@dataclass(frozen=True)
class Finding:
    """One reference finding tested on a run's numbers.

    ``claim``: the finding as the reference states it; ``verdict``: ``"REPRODUCED"``,
    ``"NOT reproduced"`` or ``"NOT ASSESSED"``; ``evidence``: the numbers it rests on, in
    words; ``reason``: why it could not be assessed (``NOT ASSESSED`` only).
    """

    claim: str
    verdict: Verdict
    evidence: str = ""
    reason: str = ""
    numbers: Mapping[str, float] = field(default_factory=dict)

    @property
    def assessed(self) -> bool:
        return self.verdict != "NOT ASSESSED"

    def line(self) -> str:
        """The line ``findings.txt`` and ``scimech demo`` print."""
        if not self.assessed:
            return f"NOT ASSESSED: {self.claim} ({self.reason})."
        return f"{self.verdict}: {self.claim}" + (f" ({self.evidence})." if self.evidence else ".")


def _finite(v: Any) -> bool:
    try:
        return v is not None and math.isfinite(float(v))
    except (TypeError, ValueError):
        return False


def assess(claim: str, holds: bool | None, evidence: str = "", *, numbers: Mapping[str, Any] | None = None,
           minimum: Mapping[str, tuple[int, int]] | None = None) -> Finding:
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
    problems = [f"{what}: {have} where at least {need} are needed" for what, (have, need) in (minimum or {}).items()
                if have < need]
    bad = [k for k, v in numbers.items() if not _finite(v)]
    if bad:
        problems.append(f"{', '.join(bad)} {'is' if len(bad) == 1 else 'are'} not a finite number")
    if holds is None and not problems:
        problems.append("no rule applied")
    if problems:
        return Finding(claim, "NOT ASSESSED", evidence, "; ".join(problems), numbers)
    return Finding(claim, "REPRODUCED" if holds else "NOT reproduced", evidence, "", numbers)


@dataclass(frozen=True)
class PlantedTruthRow:
    """One row of a planted-truth table (the schema of :mod:`scimech.validate`).

    ``recovered`` is ``True`` / ``False``, or ``None`` when the estimate or its interval is
    not a finite number (the row reads "not assessed" and is not counted as recovered or
    missed). ``counted``: rows that are contrasts (a regime not built to recover the truth)
    are reported but not counted.
    """

    truth: str
    measure: str
    estimate: float
    ci_low: float
    ci_high: float
    threshold: float
    recovered: bool | None
    counted: bool = True

    @classmethod
    def from_interval(cls, truth: str, measure: str, estimate: float, ci_low: float, ci_high: float,
                      threshold: float, *, above: bool = True, counted: bool = True) -> PlantedTruthRow:
        """Recovered when the whole interval clears ``threshold`` (above it, or below with
        ``above=False``); not assessed when a bound is not finite."""
        if not all(_finite(v) for v in (estimate, ci_low, ci_high, threshold)):
            rec = None
        else:
            rec = bool(ci_low > threshold) if above else bool(ci_high < threshold)
        return cls(truth, measure, float(estimate), float(ci_low), float(ci_high), float(threshold), rec, counted)


def recovery_line(study: str, rows: Iterable[PlantedTruthRow], detail: str = "") -> str:
    """``"<study> planted truth: K of N recovered (detail)"``; rows not assessed are named, not counted."""
    rows = [r for r in rows if r.counted]
    k = sum(r.recovered is True for r in rows)
    n = sum(r.recovered is not None for r in rows)
    skipped = len(rows) - n
    extra = [detail] if detail else []
    if skipped:
        extra.append(f"{skipped} not assessed")
    return f"{study} planted truth: {k} of {n} recovered" + (f" ({'; '.join(extra)})" if extra else "")


def write_outcome(out: str | Path, findings: Sequence[Finding | str], recovery: str | None = None) -> list[Path]:
    """Write ``out/findings.txt`` (one line per finding) and, when given, ``out/recovery.txt``
    (its first line is the :func:`recovery_line`, then whatever table and notes the study
    adds), atomically. Returns the paths written."""
    out = Path(out)
    written = []
    if recovery is not None:
        written.append(atomic_write_text(out / RECOVERY_FILE, recovery.rstrip("\n") + "\n"))
    lines = [f.line() if isinstance(f, Finding) else str(f) for f in findings]
    written.append(atomic_write_text(out / FINDINGS_FILE, "".join(f"{line}\n" for line in lines)))
    return written


@dataclass(frozen=True)
class Plan:
    """What a study command would run (``--dry-run``): its units of work, their sizes and an
    estimated time, rough and scaled from a measured benchmark (``basis`` says which)."""

    study: str
    units: Sequence[str]
    sizes: Mapping[str, Any]
    seconds_per_unit: float | None = None
    basis: str = ""
    out: str = ""

    def text(self) -> str:
        shown = list(self.units[:6]) + (["..."] if len(self.units) > 6 else [])
        lines = [f"scimech {self.study} (dry run: nothing was run or written)",
                 f"  units of work: {len(self.units)} ({', '.join(shown)})"]
        lines += [f"  {k}: {v}" for k, v in self.sizes.items()]
        if self.out:
            lines.append(f"  results would go to: {self.out}")
        if self.seconds_per_unit is not None:
            total = self.seconds_per_unit * len(self.units)
            lines.append(f"  estimated time: about {_duration(total)} on one worker ({_duration(self.seconds_per_unit)} "
                         f"per unit; {self.basis})")
        return "\n".join(lines)


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def add_dry_run(parser) -> None:
    """Add ``--dry-run`` to a study command: check the options, print the :class:`Plan`, write nothing."""
    parser.add_argument("--dry-run", action="store_true",
                        help="check the options and print what would run (units, sizes, estimated time); "
                             "run and write nothing")


def registered_studies() -> dict[str, str]:
    """``{name: module}`` of every installed study (entry-point group ``scimech.studies``),
    the built-in ones first; in an uninstalled checkout, the built-in ones."""
    found = {ep.name: ep.value for ep in entry_points(group="scimech.studies")}
    ordered = {k: found.pop(k, v) for k, v in BUILTIN_STUDIES.items()}
    return {**ordered, **dict(sorted(found.items()))}


def load_study(name: str):
    """The study module registered as ``name`` (its ``TITLE``, ``register``, ``demo``)."""
    studies = registered_studies()
    if name not in studies:
        raise KeyError(f"No study {name!r}; installed: {', '.join(studies)}.")
    return import_module(studies[name])
