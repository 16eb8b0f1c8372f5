"""The ``scimech`` command line: its parser, its own commands and :func:`main`.

``scimech demo`` runs every domain study on its quick embedded default and writes one
report folder; ``scimech validate`` runs the planted-mechanism suite (:mod:`scimech.studies.validate`);
``scimech <study> ...`` commands come from the studies installed (the entry-point group
``scimech.studies``, :func:`scimech.studies.contract.registered_studies`: ocean, astro and neuro ship
with scimech), each a :class:`scimech.studies.contract.Study` class that answers the same verbs. The core
never depends on them.

A study's demo leaves two plain-text files in its ``out_dir``
(:func:`scimech.studies.verdicts.write_outcome`): ``recovery.txt`` (first line: ``<study> planted
truth: K of N recovered (...)``, how much of the mechanism planted in its synthetic world it
found) and ``findings.txt`` (one line per reference finding and its verdict). ``scimech
demo`` prints them after each study and puts them in the index. ``scimech versions`` prints
:func:`scimech.run.versions.show_versions` (the versions a bug report needs).

Every parser is a :class:`CommandParser`: a usage error is one line, and a mistyped option or
command is answered with the nearest one (``did you mean --json?``).
"""

from __future__ import annotations

import argparse
import re
import sys
import time
import traceback
from pathlib import Path

from scimech.errors import ScimechError
from scimech.run import options
from scimech.run.config import apply_config
from scimech.studies.contract import load_study, registered_studies
from scimech.studies.verdicts import FINDINGS_FILE, RECOVERY_FILE

__all__ = ["main", "build_parser"]


def _study(name: str):
    """The study ``name`` (an instance), or ``None`` and why it could not be loaded."""
    try:
        return load_study(name), None
    except Exception as err:  # a broken study must not break the others
        return None, f"{type(err).__name__}: {err}"


def _show_versions(args: argparse.Namespace) -> int:
    from scimech.run.versions import show_versions

    show_versions()
    return 0


def _run_validate(args: argparse.Namespace) -> int:
    from scimech.studies.validate import main as validate_main

    return validate_main(quick=args.size == "quick", out=args.out, seed=args.seed, cases=args.cases)


class CommandParser(argparse.ArgumentParser):
    """argparse with one line per usage error (``scimech ocean study: error: argument --out: ...``),
    not the usage block before it: the line names the option and what it needs, and a mistyped
    option, command or choice is answered with the nearest one accepted (``did you mean
    --json?``); ``--help`` has the rest. Every subcommand's parser is one of these (argparse makes
    subparsers of the parent's class), and each refuses what it does not know itself, so the
    nearest option is looked for among the options of the command that was typed."""

    def __init__(self, *args, **kwargs):
        # no abbreviations: `--seed` must never be read as `--seeds` where only `--seeds` exists
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def parse_known_args(self, args=None, namespace=None):  # type: ignore[override]
        parsed, extras = super().parse_known_args(args, namespace)
        if extras and self._subparsers is None:  # a command's own parser: what it does not know is refused here
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return parsed, extras

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message}{nearest(self, message)} (see `{self.prog} --help`)\n")


def _offered(parser: argparse.ArgumentParser) -> list[str]:
    """The option strings ``parser`` accepts, less the old spellings kept for one release."""
    return [
        flag
        for action in parser._actions
        if not getattr(action, "deprecated_for", None)
        for flag in action.option_strings
        if flag.startswith("--")
    ]


def nearest(parser: argparse.ArgumentParser, message: str) -> str:
    """``"; did you mean --json?"`` for the usage error ``message`` of ``parser``, or ``""``.

    An unrecognized option is compared with the options ``parser`` accepts, an invalid choice
    (a command, a ``--size``) with the choices the message lists; :func:`difflib.get_close_matches`
    finds the nearest (argparse's own ``suggest_on_error`` arrives only in Python 3.14).
    """
    import difflib

    choice = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)", message)
    if choice:
        offered = re.findall(r"'([^']*)'", choice.group(2))
        close = difflib.get_close_matches(choice.group(1), offered, n=1)
        return f"; did you mean {close[0]!r}?" if close else ""
    unknown = re.match(r"unrecognized arguments: (.*)", message)
    if not unknown:
        return ""
    guesses = []
    for word in unknown.group(1).split():
        flag = word.split("=", 1)[0]
        close = difflib.get_close_matches(flag, _offered(parser), n=1) if flag.startswith("-") else []
        if close and close[0] != flag:
            guesses.append(close[0] + (word[len(flag) :] if "=" in word else ""))
    return f"; did you mean {' '.join(guesses)}?" if guesses else ""


def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(
        prog="scimech",
        description=(
            "Mechanistic interpretability for scientific models. Each study has its own "
            "subcommand; `scimech demo` runs all of them quickly on built-in synthetic data."
        ),
        epilog="Examples:\n  scimech demo --out reports/demo\n  scimech ocean study --help\n"
        "  scimech astro study --out runs/astro",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    from scimech import __version__

    parser.add_argument("--version", action="version", version=f"scimech {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    demo = sub.add_parser(
        "demo",
        help="run every study on its quick default and write a report folder",
        description=f"Run each study ({', '.join(registered_studies())}) on its quick embedded default, "
        "write figures and a summary per study plus an index, and print where the report is.",
    )
    options.add(demo, "out", default="reports/demo", context="Here: the report folder")
    studies = list(registered_studies())
    demo.add_argument("--domains", nargs="+", choices=studies, default=studies, help="which studies to run")
    options.add(
        demo,
        "size",
        default="quick",
        choices=("quick", "full"),
        context="Here: every study's quick default, or its full size (slow)",
    )
    demo.set_defaults(func=_run_demo)

    val = sub.add_parser(
        "validate",
        help="check that the core's methods find mechanisms planted in small models",
        description="Run the planted-mechanism suite (scimech.studies.validate): small models whose mechanism is known "
        "by construction, measured with probes, ablation, patching, concept bottlenecks and attribution. Writes "
        "validation.nc and report.md; exits 1 and prints the rows if any planted mechanism is missed.",
    )
    options.add(
        val,
        "size",
        default="full",
        choices=("quick", "full"),
        context="Here: quick runs small sizes (under half a minute on one core)",
    )
    options.add(val, "out", default="reports/validate")
    options.add(val, "seed", default=0)
    val.add_argument(
        "--cases",
        nargs="+",
        metavar="CASE",
        help="run only these planted cases (default: all: inert silent ablation_choice hidden_concept attribution "
        "sparse_features shifted_subspace)",
    )
    val.set_defaults(func=_run_validate)

    from scimech.analysis.dictionary.cli import register as register_dictionary

    register_dictionary(sub)

    ver = sub.add_parser(
        "versions",
        help="print the versions of Python, scimech and its libraries, for a bug report",
        description="Print the versions of Python, the operating system, scimech and every library it uses "
        "(scimech.show_versions()); paste them into a bug report.",
    )
    ver.set_defaults(func=_show_versions)

    reserved = {"demo", "validate", "dictionary", "versions"}
    for name in studies:
        if name in reserved:  # a study may not hide one of scimech's own commands
            print(
                f"scimech: the study {name!r} is not loaded: its name is one of scimech's own commands "
                f"({', '.join(sorted(reserved))}); rename its scimech.studies entry point.",
                file=sys.stderr,
            )
            continue
        study, err = _study(name)
        if study is not None:
            try:
                study.register(sub)
                continue
            except Exception as exc:  # a broken study must not break the others
                err = f"{type(exc).__name__}: {exc}"
                sub.choices.pop(name, None)
                sub._choices_actions[:] = [c for c in sub._choices_actions if c.dest != name]
        p = sub.add_parser(name, help=f"{name} study (unavailable)", add_help=False)
        # whatever follows the study's name, the one thing to say is why it could not be loaded
        p.add_argument("rest", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
        p.set_defaults(func=lambda args, n=name, e=err: _unavailable(n, e))
    return parser


def commands(parser: argparse.ArgumentParser | None = None, prefix: tuple[str, ...] = ()):
    """``(name, parser)`` of every command and subcommand of ``scimech`` (an alias once)."""
    parser = build_parser() if parser is None else parser
    seen: set[int] = set()

    def walk(p, words):
        seen.add(id(p))
        yield " ".join(("scimech", *words)), p
        for action in p._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    if id(sub) not in seen:
                        yield from walk(sub, (*words, name))

    yield from walk(parser, prefix)


def options_page() -> str:
    """``docs/options.md``: the shared options and the options that act only in some context,
    generated from the declarations (``python -m scimech --options-page > docs/options.md``)."""
    every = list(commands())
    return (
        OPTIONS_PAGE_HEAD
        + "\n## The shared options\n\n"
        + options.vocabulary_table(every)
        + "\n## Options that act only with another\n\nGiven without what they need, they are refused with "
        "one line naming it (`scimech neuro study --held-out taxis`: `argument --held-out: does nothing here; it "
        "needs --data PATH (your traces)`).\n\n" + options.needs_table(every)
    )


OPTIONS_PAGE_HEAD = """# Command-line options

Generated from the declarations in `scimech/run/options.py` and the commands' parsers by
`python -m scimech --options-page > docs/options.md` (a test checks that it is current).

One word means one thing in every `scimech` command: a shared option has the same meaning
and type wherever it appears (a command may narrow it: its default, the formats its `--data`
reads, the sizes it offers). Paths are checked where they are parsed, before any work:
an output is probed for writing (nothing is created, so `--dry-run` writes nothing) and an
input's first bytes must be the format the option reads (the error says what the file seems
to be). An output that is one file or store must end in what is written (`.zarr`, `.nc`,
`.fits`), and a file of another kind already there is refused, never replaced. A folder
argument (`redraw FOLDER`, `--model`) must be a folder. `--cluster` is read and checked
(its `[cluster]` kind, keys, and cores and memory for SLURM / PBS) and `--scheduler` must
answer, both when parsed. Options are never abbreviated (`--seed` is not read as `--seeds`),
and the values of `--seeds` must differ. A usage error is one line, exit status 2.

Renamed options keep their old spelling for one release, with a warning naming the new one:
`astro synth --n` is `--n-galaxies`, `astro study --catalog` is `--data`, `neuro study --model`
(the LLM's name) is `--llm-model`. `neuro study --seeds` lists seed values, as everywhere
(it counted seeds before; a count is `--n-seeds`).
"""


def _unavailable(name: str, err: str | None) -> int:
    print(f"scimech {name}: this study could not be loaded ({err}).", file=sys.stderr)
    return 2


def _study_outcome(name: str, folder: Path, since: float) -> tuple[str, list[str]]:
    """The planted-truth line and the findings lines a study's demo wrote into its folder.

    Files older than ``since`` (seconds since the epoch: the start of this study's run) were
    left by an earlier run, so they are ignored rather than reported as this run's outcome.
    """

    def lines(path: Path) -> list[str]:
        fresh = path.is_file() and path.stat().st_mtime >= since - 1.0  # 1 s: coarse file-system clocks
        return [x.strip() for x in path.read_text().splitlines() if x.strip()] if fresh else []

    first = lines(folder / RECOVERY_FILE)[:1]
    return (first[0] if first else f"{name} planted truth: not reported"), lines(folder / FINDINGS_FILE)


def _run_demo(args: argparse.Namespace) -> int:
    import pandas as pd  # lazy: the parser of every command is built from this module

    from scimech.studies.report import Report

    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    index = Report(out, title="scimech demo")
    index.text(
        "Each study ran on its quick built-in default. Open the linked reports for figures and numbers. "
        "Each study's synthetic world is built with a known mechanism; the first line under each study "
        "says how much of that planted truth the study recovered, then come the reference findings "
        "tested on the run's numbers."
    )
    from scimech.studies.competence import competence_summary

    rows: dict[str, list] = {"study": [], "status": [], "seconds": [], "competence": [], "report": []}
    outcomes = {}
    failed = 0
    for name in args.domains:
        study, err = _study(name)
        t0, started = time.perf_counter(), time.time()
        status, path = "ok", ""
        if study is None:
            status = f"unavailable ({err})"
            failed += 1
        else:
            print(f"[scimech demo] {name}: {study.title} ...", flush=True)
            try:
                rep = study.demo(out / name, quick=args.size != "full")
                path = str(Path(rep).resolve().relative_to(out.resolve()))
            except Exception as exc:  # report the failure and go on with the other studies
                status = f"failed: {type(exc).__name__}: {exc}"
                traceback.print_exc()
                failed += 1
        secs = time.perf_counter() - t0
        print(f"[scimech demo] {name}: {status} in {secs:.0f} s", flush=True)
        truth, found = _study_outcome(name, out / name, started)
        for line in (truth, *found):
            print(f"  {line}", flush=True)
        outcomes[name] = (truth, found)
        rows["study"].append(name)
        rows["status"].append(status)
        rows["seconds"].append(round(secs, 1))
        rows["competence"].append(competence_summary(out / name))  # the planted truth is said once, below
        rows["report"].append(f"[{name} report]({path})" if path else "")

    index.table(pd.DataFrame(rows).set_index("study"), caption="Studies")
    for name, (truth, found) in outcomes.items():
        index.heading(name, level=3)
        index.text(
            "\n".join(
                [f"**{truth}**", *(f"- {_list_item(line)}" for line in found)]
                if found
                else [f"**{truth}**", "- findings: not reported"]
            )
        )
    md = index.write()
    print(f"\nReport: {md.resolve()}\n(HTML: {md.with_suffix('.html').resolve()})")
    return 1 if failed else 0


def _list_item(line: str) -> str:
    """A finding as one bullet's text: a leading ``3.`` stays the finding's number, not a nested list."""
    return re.sub(r"^(\d+)([.)]) ", r"\1\\\2 ", line)


def _warn_renamed(argv: list[str]) -> None:
    """A study command called by its old name (``scimech ocean synth``): one line naming the new one."""
    words = [w for w in argv if not w.startswith("-")][:2]
    if len(words) == 2 and words[0] in registered_studies():
        study, _ = _study(words[0])
        new = study.renamed.get(words[1]) if study is not None else None
        if new:
            print(
                f"scimech {words[0]}: warning: "
                f"{options.removal_notice(f'`{words[1]}`', f'`scimech {words[0]} {new}`')}",
                file=sys.stderr,
            )


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    _warn_renamed(argv)  # before parsing: `--help` and a usage error of an old command name say it too
    try:
        args = parser.parse_args(argv)
        if getattr(args, "config", None) is not None and hasattr(args, "config_extra"):
            args = apply_config(parser, argv, args)  # a study command's --config file (scimech.studies.contract)
    except ScimechError as err:  # an unreadable or unknown-keyed --config file
        print(f"scimech: error: {type(err).__name__}: {err}", file=sys.stderr)
        return 2
    except SystemExit as exc:  # a usage error (exit 2, its one line already printed) or --help (0)
        return int(exc.code or 0)
    refused = options.refused_in_context(args, argv)  # an option given where it would do nothing
    if refused:
        print(refused, file=sys.stderr)
        return 2
    if not getattr(args, "func", None):
        parser.print_help()
        return 0
    try:
        result = args.func(args)
    except ScimechError as err:  # a user's mistake (bad input, config, checkpoint): the message, no traceback
        print(f"scimech: error: {type(err).__name__}: {err}", file=sys.stderr)
        return 2
    return int(result or 0)


def script() -> None:
    """``python -m scimech`` (and ``python -m scimech.cli``): :func:`main` on the command line, or
    ``--options-page`` alone: print ``docs/options.md``."""
    if sys.argv[1:] == ["--options-page"]:
        print(options_page(), end="")
        sys.exit(0)
    sys.exit(main())


if __name__ == "__main__":  # pragma: no cover
    script()
