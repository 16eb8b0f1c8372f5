"""A study from Python: :func:`run_study` runs what ``scimech <name> study`` runs, with keyword options.

The keywords are the options of ``scimech <name> study`` (``seeds=[0]`` is ``--seeds 0``,
``n_bootstrap=20`` is ``--n-bootstrap 20``, ``planted=True`` is ``--planted``) plus the settings a
``--config`` file may hold beyond them (the study's ``config_keys``: ``window=3`` for ocean). They
are turned into that command line and parsed by the study's own parser, so the defaults, the checks
and the messages are the command's; a keyword the command does not take is refused, naming the
nearest one it does. :func:`plan_study` stops before running (``--dry-run``).
"""

from __future__ import annotations

import argparse
import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from scimech.errors import ConfigError
from scimech.run.config import apply_config
from scimech.run.options import refused_in_context
from scimech.studies.contract import Plan, Study, load_study
from scimech.studies.verdicts import Finding

__all__ = ["StudyResult", "run_study", "plan_study", "study_options"]

#: options of ``scimech <name> study`` that are not keywords here, and what to use instead
_NOT_KEYWORDS = {
    "help": "study_options(name) lists the keywords",
    "dry_run": "plan_study(...) gives the plan without running it",
    "config": "config= names the file",
}


@dataclass(frozen=True)
class StudyResult:
    """What :func:`run_study` ran and wrote.

    Attributes
    ----------
    study
        The study's name (``"ocean"``).
    out
        The folder the study wrote into (``--out``).
    report
        The report's path (``out/report.md``; ``report.html`` beside it).
    evidence
        The study's evidence, as its :meth:`~scimech.studies.contract.Study.run` returns it (ocean:
        :class:`ocean.evidence.Evidence`, whose ``summary`` is ``summary.nc``).
    findings
        The reference findings with their verdicts (``findings.txt``).
    planted_truth
        ``recovery.txt``'s text: how much of the planted mechanism was recovered (``None`` on data
        with no planted truth).
    plan
        The plan that ran (``plan.text()`` is what ``--dry-run`` prints).

    Examples
    --------
    ``print(result)`` says the outcome as ``scimech <name> study`` prints it:

    >>> from pathlib import Path
    >>> from scimech.studies import StudyResult
    >>> from scimech.studies.contract import Plan
    >>> result = StudyResult("ocean", Path("runs/x"), Path("runs/x/report.md"), evidence=None, findings=[],
    ...                      planted_truth="ocean planted truth: 7 of 7 recovered", plan=Plan("ocean", [], {}))
    >>> print(result)
    ocean planted truth: 7 of 7 recovered
    Report: runs/x/report.md
    """

    study: str
    out: Path
    report: Path
    evidence: Any
    findings: list[Finding | str]
    planted_truth: str | None
    plan: Plan

    def text(self) -> str:
        """The planted truth's first line, one line per finding, and where the report is."""
        truth = (self.planted_truth or "").strip().splitlines()[:1]
        found = [f.line() if isinstance(f, Finding) else str(f) for f in self.findings]
        return "\n".join([*truth, *found, f"Report: {self.report}"])

    def __str__(self) -> str:
        return self.text()


def study_options(study: str | Study) -> dict[str, str]:
    """``{keyword: help}`` of every keyword :func:`run_study` takes for ``study``.

    Examples
    --------
    >>> from scimech.studies import study_options
    >>> keywords = study_options("ocean")
    >>> "seeds" in keywords and "regimes" in keywords and "window" in keywords
    True
    """
    study = _the_study(study)
    actions = _keyword_actions(study.study_parser())
    return {**{k: a.help or "" for k, a in actions.items()}, **dict(study.config_keys)}


def plan_study(
    study: str | Study,
    *,
    size: str | None = None,
    out: str | Path | None = None,
    data: Any = None,
    config: str | Path | None = None,
    **options: Any,
) -> Plan:
    """The plan ``scimech <name> study --dry-run`` prints for the same options: nothing is run or written.

    Parameters
    ----------
    study, size, out, data, config, **options
        As for :func:`run_study`.

    Returns
    -------
    Plan
        Its units of work, sizes and estimated time (``plan.text()``) and the settings the run uses.

    Examples
    --------
    >>> from scimech.studies import plan_study
    >>> plan = plan_study("ocean", seeds=[0, 1], regimes=["mixed"], epochs=1)
    >>> list(plan.units)
    ['mixed/seed=0', 'mixed/seed=1']
    """
    study = _the_study(study)
    return study.plan(_study_args(study, dict(options, size=size, out=out, data=data), config))


def run_study(
    study: str | Study,
    *,
    size: str | None = None,
    out: str | Path | None = None,
    data: Any = None,
    config: str | Path | None = None,
    client: Any = None,
    **options: Any,
) -> StudyResult:
    """Run a study as ``scimech <name> study`` does, write its outcome and report, and return them.

    Parameters
    ----------
    study
        The study's name (``"ocean"``, ``"astro"``, ``"neuro"``, or one installed under the entry-point
        group ``scimech.studies``) or a :class:`~scimech.studies.contract.Study` instance.
    size
        ``"quick"``, ``"medium"`` or ``"full"``: the size whose defaults apply (``--size``; default: the
        command's, ``"quick"``).
    out
        The results folder (``--out``; default: the command's, e.g. ``runs/ocean/study``). Resumable:
        a second call with the same options and folder redoes only the unfinished units.
    data
        Your data instead of the synthetic world (``--data``): a path, or a list of paths.
    config
        A YAML or TOML file of option values and settings (``--config``); keywords win over it.
    client
        A Dask client to run the units on (default: the one ``workers=``, ``cluster=`` or ``scheduler=``
        asks for, else serial in this process).
    **options
        The command's other options by name (``seeds=[0, 1]``, ``epochs=1``, ``n_bootstrap=20``,
        ``planted=True``) and the study's settings a config file holds (ocean: ``window=3``,
        ``width=4``); :func:`study_options` lists them. ``None`` is the option's default.

    Returns
    -------
    StudyResult
        The evidence, the findings, the planted truth, the report's path and the output folder.

    Raises
    ------
    ConfigError
        A keyword the command does not take (naming the nearest it does), or a value it refuses
        (the command's own message).

    Examples
    --------
    >>> from scimech.studies import run_study
    >>> result = run_study("ocean", out="runs/ocean/one", seeds=[0], regimes=["mixed"], epochs=1,
    ...                    synth={"n_members": 1, "years": 4, "ny": 6, "nx": 8}, window=3, width=4)
    ... # doctest: +SKIP
    >>> print(result)  # doctest: +SKIP
    ocean planted truth: ... recovered ...
    >>> run_study("ocean", seed=[0])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    scimech.errors.ConfigError: run_study('ocean'): no option seed; did you mean seeds? ...
    """
    study = _the_study(study)
    args = _study_args(study, dict(options, size=size, out=out, data=data), config)
    plan = study.plan(args)
    own_client = client is None
    if own_client:
        from scimech.run.parallel import client_from_args  # lazy: dask

        client = client_from_args(args)
    try:
        evidence = study.run(plan, client=client)
    finally:
        if own_client and client is not None:
            client.close()
    report = study.outcome(evidence, plan)
    return StudyResult(
        study=study.name,
        out=Path(plan.out),
        report=Path(report),
        evidence=evidence,
        findings=list(study.findings(evidence)),
        planted_truth=study.planted_truth(evidence),
        plan=plan,
    )


def _the_study(study: str | Study) -> Study:
    if isinstance(study, Study):
        return study
    if not isinstance(study, str):
        raise ConfigError(f"study must be a study's name or a Study instance, not {type(study).__name__}.")
    try:
        return load_study(study)
    except KeyError as err:
        raise ConfigError(str(err.args[0])) from None


def _keyword_actions(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    """``{keyword: action}`` of the options of ``parser`` a keyword may set (not hidden ones: old
    spellings, ``--quick`` short forms)."""
    return {
        a.dest: a
        for a in parser._actions
        if a.option_strings and a.help != argparse.SUPPRESS and a.dest not in _NOT_KEYWORDS
    }


def _study_args(study: Study, given: Mapping[str, Any], config: str | Path | None) -> argparse.Namespace:
    """The namespace ``scimech <name> study`` parses from the command line that ``given`` spells out."""
    name = f"run_study({study.name!r})"
    parser = study.study_parser()

    def refuse(message: str) -> NoReturn:
        raise ConfigError(f"{name}: {message}")

    parser.error = refuse  # type: ignore[method-assign]  # a usage error raises, never exits
    actions = _keyword_actions(parser)
    settings = dict(study.config_keys)
    argv: list[str] = []
    extra: dict[str, Any] = {}
    for key, value in given.items():
        if key in actions:
            argv += _tokens(actions[key], key, value, refuse)
        elif key in settings:
            if value is not None:
                extra[key] = value
        elif key in _NOT_KEYWORDS:
            refuse(f"{key} is not a keyword here: {_NOT_KEYWORDS[key]}.")
        else:
            accepted = sorted([*actions, *settings])
            close = difflib.get_close_matches(key, accepted, n=1)
            hint = f"did you mean {close[0]}? " if close else ""
            refuse(f"no option {key}; {hint}It takes: {', '.join(accepted)}.")
    if config is not None:
        argv += ["--config", str(config)]
    args = parser.parse_args(argv)
    if config is not None:
        args = apply_config(parser, argv, args)  # the file's values, then the keywords over them
    args.config_extra = {**(getattr(args, "config_extra", None) or {}), **extra}
    refused = refused_in_context(args, argv)
    if refused:
        refuse(refused.split(": error: ", 1)[-1])
    return args


def _tokens(action: argparse.Action, key: str, value: Any, refuse) -> list[str]:
    """``value`` of keyword ``key`` as the command-line words of ``action`` (``None``: its default)."""
    flag = max(action.option_strings, key=len)
    if value is None:
        return []
    if action.nargs == 0:  # a switch
        if not isinstance(value, bool):
            refuse(f"{key} is a switch ({flag}): give True or False, not {value!r}.")
        return [flag] if value == isinstance(action, argparse._StoreTrueAction) else []
    if isinstance(value, Mapping):  # --select DIM=INDEX, repeated
        value = [f"{k}={v}" for k, v in value.items()]
    many = isinstance(value, Sequence) and not isinstance(value, (str, bytes))
    if many and isinstance(action, argparse._AppendAction):
        return [f"{flag}={v}" for v in value]
    if many and action.nargs in (None, "?"):
        refuse(f"{key} ({flag}) takes one value, not a list ({value!r}).")
    if many:
        return [flag, *map(str, value)]
    return [f"{flag}={value}"] if action.nargs in (None, "?") else [flag, str(value)]
