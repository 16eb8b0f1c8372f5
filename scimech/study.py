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
- :class:`Study`: the shape of a study command, ``plan -> run -> findings / recovery ->
  report``; :meth:`Study.execute` is the one driver every ``scimech <study> study`` command
  calls (dry run, Dask client, outcome files, printed outcome), so no domain writes it again.
- :func:`add_study_options`: the options every study command shares (``--out``, ``--config``,
  ``--size {quick,medium,full}``, ``--data``, ``--device``, ``--cluster``/``--scheduler``/
  ``--workers``, ``--dry-run``), and :func:`apply_config`: a ``--config`` file (YAML or TOML)
  whose keys are the command's own options, checked by the same argparse types as the
  command line, which wins over it.
"""

from __future__ import annotations

import abc
import argparse
import math
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import import_module
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, Literal

import yaml

from . import options
from .errors import ConfigError
from .options import SIZES
from .parallel import add_cluster_arguments, client_from_args
from .results import atomic_write_text

__all__ = ["Finding", "PlantedTruthRow", "Plan", "add_dry_run", "assess", "write_outcome", "recovery_line",
           "registered_studies", "load_study", "RECOVERY_FILE", "FINDINGS_FILE", "BUILTIN_STUDIES", "SIZES",
           "Study", "add_study_options", "apply_config", "read_config", "print_outcome"]

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
    #: what the run needs beyond the above (the resolved settings: a config object, paths, a device)
    settings: Any = None

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
    options.add(parser, "dry_run")


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


def print_outcome(folder: str | Path) -> None:
    """Print the planted-truth line of ``recovery.txt`` and every line of ``findings.txt``."""
    for name, first_only in ((RECOVERY_FILE, True), (FINDINGS_FILE, False)):
        path = Path(folder) / name
        if path.is_file():
            lines = path.read_text().splitlines()
            print("\n".join(lines[:1] if first_only else lines))


class Study(abc.ABC):
    """A domain study: ``plan`` what to run from the parsed options, ``run`` it into evidence,
    read ``findings`` and the planted-truth ``recovery`` from the evidence, write a ``report``.

    A subclass implements the five steps; :meth:`execute` is the ``scimech <name> study``
    command built from them (the same for every study): ``--dry-run`` prints the plan and
    stops; otherwise the Dask client asked for is made, the plan run, ``findings.txt`` and
    ``recovery.txt`` written (:func:`write_outcome`), the report written, and the outcome
    printed with the report's path.
    """

    #: the ``scimech <name>`` command group
    name: str = ""

    @abc.abstractmethod
    def plan(self, args: argparse.Namespace) -> Plan:
        """The units of work, sizes and settings the options ask for; reads no data, trains nothing."""

    @abc.abstractmethod
    def run(self, plan: Plan, client=None) -> Any:
        """Run the plan's units (through :func:`scimech.parallel.map_units`; resumable) into evidence."""

    @abc.abstractmethod
    def findings(self, evidence: Any) -> list[Finding]:
        """The reference findings, each with a verdict from the evidence's numbers."""

    @abc.abstractmethod
    def recovery(self, evidence: Any) -> str | None:
        """``recovery.txt``'s text (first line: :func:`recovery_line`), or ``None`` on data with no
        planted truth (a real product)."""

    @abc.abstractmethod
    def report(self, evidence: Any, plan: Plan) -> Path:
        """Write figures and ``report.md`` into ``plan.out``; return the report's path."""

    def execute(self, args: argparse.Namespace) -> int:
        """The ``study`` command: dry run, or run, write the outcome and the report, print them."""
        plan = self.plan(args)
        if getattr(args, "dry_run", False):
            print(plan.text())
            return 0

        client = client_from_args(args)
        try:
            evidence = self.run(plan, client=client)
        finally:
            if client is not None:
                client.close()
        write_outcome(plan.out, self.findings(evidence), self.recovery(evidence))
        path = self.report(evidence, plan)
        print_outcome(plan.out)
        print(f"Report: {path}")
        return 0


def add_study_options(parser: argparse.ArgumentParser, *, out_default: str | None, data_help: str,
                      default_size: str = "quick", config_keys: Mapping[str, str] | None = None,
                      data_formats: Sequence[str | options.Format] = ()) -> None:
    """Add the options every ``scimech <study> study`` command shares (the declarations of
    :data:`scimech.options.SHARED`).

    ``--out`` (required when ``out_default`` is ``None``; probed for writing before any work),
    ``--config FILE``, ``--size`` (``quick`` | ``medium`` | ``full``; ``--quick``/``--medium``/
    ``--full`` are short forms), ``--data PATH`` (``data_formats``: the formats it is read in,
    checked on its first bytes), ``--device`` (refused at once when the machine lacks it),
    ``--cluster``/``--scheduler``/``--workers`` (one of them) and ``--dry-run``.
    ``config_keys``: ``{key: what it sets}`` a ``--config`` file may hold beyond the command's
    options (the domain reads them from ``args.config_extra``).
    """

    g = parser.add_argument_group("study options (every study takes these)")
    options.add(g, "out", default=out_default, required=out_default is None,
                context="Resumable: finished units are kept")
    options.add(g, "config", context="e.g. `seeds: [0, 1]`, `workers: 4`")
    options.add(g, "size", default=default_size)
    options.add(g, "data", formats=tuple(data_formats), context=data_help)
    options.add(g, "device", default="cpu")
    add_cluster_arguments(parser)
    add_dry_run(parser)
    parser.set_defaults(config_extra={}, _config_keys=dict(config_keys or {}))


def read_config(path: str | Path) -> dict[str, Any]:
    """A ``--config`` file's mapping: TOML (``.toml``) or YAML (anything else), keys as strings."""

    path = Path(path)
    text = path.read_text()
    if path.suffix.lower() == ".toml":
        try:
            loaded = tomllib.loads(text)
        except tomllib.TOMLDecodeError as err:
            raise ConfigError(f"{path}: not valid TOML ({err}).") from err
    else:
        try:
            loaded = yaml.safe_load(text)
        except yaml.YAMLError as err:
            raise ConfigError(f"{path}: not valid YAML ({err}).") from err
    loaded = {} if loaded is None else loaded
    if not isinstance(loaded, Mapping):
        raise ConfigError(f"{path}: a config file is a mapping of option names to values "
                          f"(e.g. `seeds: [0, 1]`); got {type(loaded).__name__}.")
    odd = [k for k in loaded if not isinstance(k, str)]
    if odd:  # YAML 1.1 reads on/off/yes/no (unquoted) as booleans, 1: as a number
        raise ConfigError(f"{path}: key(s) {', '.join(map(repr, odd))} are not names (YAML reads unquoted on, off, "
                          "yes, no as true/false and digits as numbers); write option names, quoted if need be.")
    return dict(loaded)


def _option_tokens(action: argparse.Action, key: str, value: Any, path: Path) -> list[str]:

    flag = max(action.option_strings, key=len)
    if action.nargs == 0:  # a switch
        if not isinstance(value, bool):
            raise ConfigError(f"{path}: {key} is a switch: give true or false, not {value!r}.")
        return [flag] if value == isinstance(action, argparse._StoreTrueAction) else []
    values = list(value) if isinstance(value, (list, tuple)) else [value]
    if isinstance(value, (list, tuple)) and action.nargs in (None, "?"):
        raise ConfigError(f"{path}: {key} takes one value, not a list ({value!r}).")
    if any(isinstance(v, (Mapping, list, tuple)) for v in values):
        raise ConfigError(f"{path}: {key}: {value!r} is not a value the option takes.")
    return [flag, *("true" if v is True else "false" if v is False else str(v) for v in values)]


def apply_config(root: argparse.ArgumentParser, argv: Sequence[str], args: argparse.Namespace) -> argparse.Namespace:
    """``args`` with the ``--config`` file's values filled in: each key is one of the command's
    options (``n_train`` or ``n-train``), turned into that option on the command line *before*
    what the user typed (so the command line wins) and parsed by the same argparse types,
    so a bad value in the file is refused exactly as on the command line. Keys the command
    declared in ``config_keys`` go to ``args.config_extra``; any other key is one clear error
    listing the keys the command takes."""

    path = Path(args.config)
    values = read_config(path)
    parser = _subparser_for(root, argv)
    actions = {a.dest: a for a in parser._actions if a.option_strings and a.help != argparse.SUPPRESS}
    for hidden in ("help", "config", "dry_run"):
        actions.pop(hidden, None)
    extra_keys = dict(getattr(args, "_config_keys", {}) or {})
    tokens, extra = [], {}
    for key, value in values.items():
        dest = key.replace("-", "_")
        if dest in actions:
            tokens += _option_tokens(actions[dest], key, value, path)
        elif key in extra_keys:
            extra[key] = value
        else:
            known = sorted(actions) + sorted(extra_keys)
            raise ConfigError(f"{path}: unknown key {key!r}; `{parser.prog}` takes: {', '.join(known)}.")
    prog_words = parser.prog.split()[1:]
    at = _index_after(list(argv), prog_words)
    new = root.parse_args([*argv[:at], *tokens, *argv[at:]])
    new.config_extra = extra
    return new


def _subparser_for(root: argparse.ArgumentParser, argv: Sequence[str]) -> argparse.ArgumentParser:
    """The (sub)parser that handles the command ``argv`` names."""
    parser = root
    for word in argv:
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if not subs or word not in subs[0].choices:
            if word.startswith("-"):
                break
            continue
        parser = subs[0].choices[word]
    return parser


def _index_after(argv: list[str], words: list[str]) -> int:
    at = 0
    for word in words:
        at = argv.index(word, at) + 1
    return at
