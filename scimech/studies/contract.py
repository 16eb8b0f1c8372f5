"""The study contract: a study is one class.

A domain study (ocean, astro, neuro, yours) is a subclass of :class:`Study` named by the
entry-point group ``scimech.studies`` (as xarray finds its backends)::

    [project.entry-points."scimech.studies"]
    weather = "mypkg.study:WeatherStudy"

It supplies its ``name``, ``title``, options (:meth:`Study.add_options`), and the steps
``plan -> run -> findings / planted_truth -> report``, plus ``load(folder)`` (a finished
folder's evidence). The evidence a run hands on is one type in every study,
:class:`~scimech.studies.evidence.Evidence` (its measurements as named xarray datasets, its
planted-truth rows, the seconds of each phase), subclassed by each study. The base class provides the rest once: the ``scimech <name>`` command
group with the same verbs in every domain (``generate``, ``study``, ``redraw``, ``shift``,
``inspect``, then the study's own :class:`Command` s), the dry run, the Dask client, the outcome files
(``findings.txt``, ``recovery.txt``: :mod:`scimech.studies.verdicts`), printing, ``demo`` and
``redraw``.

The study's module is imported to build ``scimech --help``: a study imports its pipeline
(torch, xarray, ...) inside its methods, so that the parser of every command stays fast and
a bad option is refused before any heavy import.
"""

from __future__ import annotations

import abc
import argparse
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from importlib import import_module
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, ClassVar, Generic, TypeVar

from scimech.errors import ConfigError
from scimech.run import options
from scimech.run.config import apply_config, read_config  # noqa: F401  (re-exported: the config files' home is scimech.run.config)
from scimech.run.many_paths import data_takes_many
from scimech.run.options import SIZES, add_dry_run, add_study_options  # noqa: F401  (re-exported)
from scimech.studies.evidence import Evidence
from scimech.studies.verdicts import (  # noqa: F401  (re-exported: the verdicts' home is scimech.studies.verdicts)
    FINDINGS_FILE,
    RECOVERY_FILE,
    Finding,
    PlantedTruthRow,
    Verdict,
    assess,
    print_outcome,
    recovery_line,
    write_outcome,
)

__all__ = [
    "Study",
    "Plan",
    "Command",
    "Evidence",
    "registered_studies",
    "load_study",
    "BUILTIN_STUDIES",
    "VERBS",
    "Finding",
    "PlantedTruthRow",
    "assess",
    "recovery_line",
    "write_outcome",
    "print_outcome",
    "add_study_options",
    "apply_config",
    "read_config",
    "SIZES",
    "RECOVERY_FILE",
    "FINDINGS_FILE",
]

#: the studies shipped with scimech (found without entry points in a checkout that is not installed)
BUILTIN_STUDIES = {
    "ocean": "ocean.study:OceanStudy",
    "astro": "astro.study:AstroStudy",
    "neuro": "neuro.study:NeuroStudy",
}
#: the verbs every study answers, in this order (then the study's own commands)
VERBS = ("generate", "study", "redraw", "shift", "inspect")

Settings = TypeVar("Settings")


@dataclass(frozen=True)
class Plan(Generic[Settings]):
    """What a study command would run (``--dry-run``): its units of work, their sizes and an
    estimated time, rough and scaled from a measured benchmark (``basis`` says which).
    ``settings``: what the run needs beyond that, typed by the study (``Plan[StudyConfig]``)."""

    study: str
    units: Sequence[str]
    sizes: Mapping[str, Any]
    seconds_per_unit: float | None = None
    basis: str = ""
    out: str = ""
    settings: Settings | None = None

    def text(self) -> str:
        shown = list(self.units[:6]) + (["..."] if len(self.units) > 6 else [])
        lines = [
            f"scimech {self.study} (dry run: nothing was run or written)",
            f"  units of work: {len(self.units)} ({', '.join(shown)})",
        ]
        lines += [f"  {k}: {v}" for k, v in self.sizes.items()]
        if self.out:
            lines.append(f"  results would go to: {self.out}")
        if self.seconds_per_unit is not None:
            total = self.seconds_per_unit * len(self.units)
            lines.append(
                f"  estimated time: about {_duration(total)} on one worker ({_duration(self.seconds_per_unit)} "
                f"per unit; {self.basis})"
            )
        return "\n".join(lines)


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


@dataclass(frozen=True)
class Command:
    """A study's own subcommand (``scimech ocean heatwaves``): its name, one line of help, its
    options (``add_options(parser)``) and what it runs (``run(args) -> exit status``)."""

    name: str
    help: str
    add_options: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]
    description: str = ""


class Study(abc.ABC):
    """A domain study. A subclass supplies:

    - ``name`` (the ``scimech <name>`` group), ``title`` (one line), ``description``;
    - ``out_default``, ``data_help``, ``data_formats``, ``data_many``, ``config_keys``: its shared study options;
    - ``shared_options``: the other options of the shared vocabulary it uses (``--seeds``, ``--epochs``,
      ``--dtype``), each with what it does there;
    - :meth:`add_options`: the options of ``scimech <name> study`` that are its own;
    - :meth:`plan`, :meth:`run`, :meth:`findings`, :meth:`planted_truth`, :meth:`report` and
      :meth:`load`;
    - optionally :meth:`add_generate_options` / :meth:`generate` (write the synthetic data),
      :meth:`add_shift_options` / :meth:`run_shift` (the distribution-shift run),
      :meth:`add_inspect_options` / :meth:`inspect` (what its reader reads from a product, said back
      as a :class:`scimech.studies.reading.Reading` without running anything), :meth:`commands`
      (its own subcommands), :attr:`renamed` (old command names kept for one release, until
      :data:`scimech.run.options.REMOVED_IN`).

    The base class provides :meth:`register` (the command group), :meth:`execute` (the
    ``study`` command: dry run, Dask client, outcome files, printed outcome), :meth:`complete`,
    :meth:`outcome`, :meth:`demo` and :meth:`redraw`.
    """

    name: ClassVar[str] = ""
    title: ClassVar[str] = ""
    description: ClassVar[str] = ""
    out_default: ClassVar[str | None] = None
    data_help: ClassVar[str] = "your data instead of the synthetic world"
    data_formats: ClassVar[tuple] = ()
    config_keys: ClassVar[Mapping[str, str]] = {}
    generate_help: ClassVar[str] = "write the study's synthetic data"
    shift_help: ClassVar[str] = "the distribution-shift run: a dictionary's faithfulness in and out of distribution"
    #: the options of the shared vocabulary the ``study`` command uses beyond every study's
    #: (:data:`scimech.run.options.SHARED`), each with what it does here: ``{name: context}`` or
    #: ``{name: options.Use(context, default=..., one_of=...)}``; :meth:`add_options` declares only the study's own
    shared_options: ClassVar[Mapping[str, str | options.Use]] = {}
    #: ``--data`` takes several paths or a glob (a product's many files)
    data_many: ClassVar[bool] = False
    #: ``{old command name: new one}``: accepted for one release, with a warning naming the new one and
    #: the release that removes the old (:data:`scimech.run.options.REMOVED_IN`); list each in CHANGELOG.md
    renamed: ClassVar[Mapping[str, str]] = {}

    # --- what a study supplies ----------------------------------------------------------------
    def add_options(self, parser: argparse.ArgumentParser) -> None:
        """The options of ``scimech <name> study`` beyond the shared ones (:func:`add_study_options`)."""
        return None

    @abc.abstractmethod
    def plan(self, args: argparse.Namespace) -> Plan:
        """The units of work, sizes and settings the options ask for; reads no data, trains nothing."""

    @abc.abstractmethod
    def run(self, plan: Plan, client=None) -> Evidence:
        """Run the plan's units (through :func:`scimech.run.parallel.map_units`; resumable) into evidence
        (the study's subclass of :class:`~scimech.studies.evidence.Evidence`)."""

    @abc.abstractmethod
    def findings(self, evidence: Evidence) -> list[Finding]:
        """The reference findings, each with a verdict from the evidence's numbers."""

    @abc.abstractmethod
    def planted_truth(self, evidence: Evidence) -> str | None:
        """``recovery.txt``'s text (first line: :func:`recovery_line`), or ``None`` on data with no
        planted truth (a real product)."""

    @abc.abstractmethod
    def report(self, evidence: Evidence, plan: Plan) -> Path:
        """Write figures and ``report.md`` into ``plan.out``; return the report's path."""

    @abc.abstractmethod
    def load(self, folder: Path) -> tuple[Evidence, Plan]:
        """The evidence of a finished study folder and the plan to redraw it into (``redraw``)."""

    def add_generate_options(self, parser: argparse.ArgumentParser) -> None:
        """The options of ``scimech <name> generate``."""
        return None

    def generate(self, args: argparse.Namespace) -> int:
        """``scimech <name> generate``: write the study's synthetic data."""
        print(f"scimech {self.name} generate: this study has no synthetic data to write.", file=sys.stderr)
        return 2

    def add_shift_options(self, parser: argparse.ArgumentParser) -> None:
        """The options of ``scimech <name> shift``."""
        return None

    def run_shift(self, args: argparse.Namespace):
        """The distribution-shift run with the options of :meth:`add_shift_options`: a dataset
        whose summary :func:`scimech.analysis.dictionary.summary_lines` prints (``None``: no shift run)."""
        return None

    def shift_lines(self, result) -> list[str]:
        """Lines the ``shift`` command prints after the shared summary."""
        return []

    def shift(self, args: argparse.Namespace) -> int:
        """``scimech <name> shift``: :meth:`run_shift`, its summary and where it was saved."""
        result = self.run_shift(args)
        if result is None:
            print(f"scimech {self.name} shift: this study has no shift run.", file=sys.stderr)
            return 2
        from scimech.analysis.dictionary import summary_lines  # lazy: torch

        print("\n".join([*summary_lines(result), *self.shift_lines(result)]))
        saved = Path(args.out) / "shift.nc" if getattr(args, "out", None) else None
        print(
            f"Saved: {saved}"
            if saved is not None and saved.exists()
            else "Not saved: add --out in add_shift_options and write shift.nc there in run_shift."
        )
        return 0

    def add_inspect_options(self, parser: argparse.ArgumentParser) -> None:
        """The options of ``scimech <name> inspect`` beyond ``PATH`` and ``--json``."""
        return None

    def inspect(self, path: Path, args: argparse.Namespace):
        """``scimech <name> inspect PATH``: read the product at ``path`` as the study would and return
        a :class:`scimech.studies.reading.Reading` of what was read (no model, no torch, seconds)."""
        raise NotImplementedError

    def _inspect_command(self, args: argparse.Namespace) -> int:
        if type(self).inspect is Study.inspect:
            print(f"scimech {self.name} inspect: this study reads no product of yours.", file=sys.stderr)
            return 2
        reading = self.inspect(Path(args.path), args)
        print(reading.text())
        if args.json:
            print(f"Saved: {reading.save(args.json)}")
        return 0

    def commands(self) -> list[Command]:
        """The study's own subcommands, after the shared verbs."""
        return []

    def demo_argv(self, out_dir: Path, quick: bool) -> list[str]:
        """The ``study`` options of the demo (default: ``--out DIR --size quick|full``)."""
        return ["--out", str(out_dir), "--size", "quick" if quick else "full"]

    # --- what the base class provides ---------------------------------------------------------
    def add_study_arguments(self, parser: argparse.ArgumentParser) -> None:
        """Every option of ``scimech <name> study``: the shared ones, then the study's own."""
        add_study_options(
            parser,
            out_default=self.out_default,
            data_help=self.data_help,
            config_keys=self.config_keys,
            data_formats=self.data_formats,
        )
        if self.data_many:
            data_takes_many(parser)
        options.add_uses(parser, self.shared_options)
        self.add_options(parser)

    def study_parser(self) -> argparse.ArgumentParser:
        """``scimech <name> study``'s options on a parser of its own."""
        parser = argparse.ArgumentParser(prog=f"scimech {self.name} study", allow_abbrev=False)
        self.add_study_arguments(parser)
        return parser

    def register(self, subparsers) -> argparse.ArgumentParser:
        """Add ``scimech <name>`` and its commands: the shared verbs (:data:`VERBS`) in that order,
        then the study's own; old names of :attr:`renamed` as aliases."""
        group = subparsers.add_parser(
            self.name,
            help=self.title,
            description=self.description or self.title,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        sub = group.add_subparsers(dest=f"{self.name}_command", metavar="COMMAND")
        group.set_defaults(func=lambda a: (group.print_help(), 0)[1])
        old = {new: [o for o, n in self.renamed.items() if n == new] for new in self.renamed.values()}

        def add(name, help, description=""):
            return sub.add_parser(
                name, help=help, description=description or help[0].upper() + help[1:] + ".", aliases=old.get(name, [])
            )

        def has(method: str) -> bool:  # the study gives this verb (else it answers that it has none)
            return getattr(type(self), method) is not getattr(Study, method)

        g = add("generate", self.generate_help if has("generate") else "(none: this study has no synthetic data)")
        self.add_generate_options(g)
        g.set_defaults(func=self.generate)
        s = add("study", "run the study (resumable) and write its findings, planted truth and report", self.description)
        self.add_study_arguments(s)
        s.set_defaults(func=self.execute)
        r = add(
            "redraw",
            "the findings, planted truth, figures and report of a finished study folder, drawn "
            "again from its saved results",
        )
        r.add_argument(
            "folder",
            type=options.existing_path("folder"),
            metavar="FOLDER",
            nargs="?" if self.out_default else None,
            default=self.out_default,
            help=f"a `scimech {self.name} study --out` folder or a `scimech demo` {self.name} folder"
            + (f" (default: {self.out_default})" if self.out_default else ""),
        )
        r.set_defaults(func=lambda a: self._redraw_command(a.folder))
        h = add("shift", self.shift_help if has("run_shift") else "(none: this study has no shift run)")
        self.add_shift_options(h)
        h.set_defaults(func=self.shift)
        i = add(
            "inspect",
            "what the study reads from your product (variables, units, signs, calendar, grid, "
            "mask, rows dropped), said back without running it"
            if has("inspect")
            else "(none: this study reads no product of yours)",
        )
        i.add_argument(
            "path",
            type=options.existing_path("path"),
            metavar="PATH",
            help="the product: a file or store, as given to `study --data`",
        )
        i.add_argument(
            "--json",
            metavar="FILE",
            default=None,
            type=options.output_path("file", (".json",)),
            help="also write the table as JSON to FILE (a name ending in .json)",
        )
        self.add_inspect_options(i)
        i.set_defaults(func=self._inspect_command)
        for c in self.commands():
            if c.name in VERBS or c.name in self.renamed:
                raise ValueError(
                    f"Study {self.name!r}: its command {c.name!r} takes the name of a shared verb "
                    f"({', '.join(VERBS)}) or of an old name; give it its own name."
                )
            p = add(c.name, c.help, c.description)
            c.add_options(p)
            p.set_defaults(func=c.run)
        return group

    def execute(self, args: argparse.Namespace) -> int:
        """The ``study`` command: dry run, or run, write the outcome and the report, print them."""
        plan = self.plan(args)
        if getattr(args, "dry_run", False):
            print(plan.text())
            return 0
        from scimech.run.parallel import client_from_args  # lazy: dask

        client = client_from_args(args)
        try:
            path = self.complete(plan, client=client)
        finally:
            if client is not None:
                client.close()
        print_outcome(plan.out)
        print(f"Report: {path}")
        return 0

    def complete(self, plan: Plan, client=None) -> Path:
        """Run the plan and write its outcome and report; returns the report's path."""
        return self.outcome(self.run(plan, client=client), plan)

    def outcome(self, evidence: Evidence, plan: Plan) -> Path:
        """``findings.txt``, ``recovery.txt`` and the report of ``evidence`` into ``plan.out``."""
        write_outcome(plan.out, self.findings(evidence), self.planted_truth(evidence))
        return self.report(evidence, plan)

    def demo(self, out_dir: str | Path, quick: bool = True) -> Path:
        """The study on its quick default (``quick=False``: full size) into ``out_dir``; the report's path."""
        try:
            args = self.study_parser().parse_args(self.demo_argv(Path(out_dir), quick))
        except SystemExit as exc:  # a usage error in the demo's own options: the study's fault, reported as such
            raise ConfigError(
                f"Study {self.name!r}: its demo options {self.demo_argv(Path(out_dir), quick)} do not "
                f"parse (exit {exc.code}); fix demo_argv."
            ) from None
        return self.complete(self.plan(args))

    def redraw(self, folder: str | Path) -> Path:
        """The outcome and report of a finished folder, drawn again from its saved results."""
        evidence, plan = self.load(Path(folder))
        return self.outcome(evidence, plan)

    def _redraw_command(self, folder: Path) -> int:
        path = self.redraw(folder)
        print_outcome(Path(path).parent)
        print(f"Report: {path}")
        return 0


def registered_studies() -> dict[str, str]:
    """``{name: "module:Class"}`` of every installed study (entry-point group ``scimech.studies``),
    the built-in ones first; in an uninstalled checkout, the built-in ones."""
    found = {ep.name: ep.value for ep in entry_points(group="scimech.studies")}
    ordered = {k: found.pop(k, v) for k, v in BUILTIN_STUDIES.items()}
    return {**ordered, **dict(sorted(found.items()))}


def load_study(name: str) -> Study:
    """The study registered as ``name``: an instance of its :class:`Study` class."""
    studies = registered_studies()
    if name not in studies:
        raise KeyError(f"No study {name!r}; installed: {', '.join(studies)}.")
    module, _, attr = studies[name].partition(":")
    if not attr:
        raise TypeError(
            f"The entry point of study {name!r} names a module ({module}); it must name its Study class "
            f"as 'module:Class' (e.g. {name} = \"{module}:{name.title()}Study\")."
        )
    cls = getattr(import_module(module), attr)
    if not (isinstance(cls, type) and issubclass(cls, Study)):
        raise TypeError(f"{studies[name]} is not a scimech.studies.contract.Study subclass.")
    return cls()
