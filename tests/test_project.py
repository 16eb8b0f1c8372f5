"""The project around the code: version, license, notices, changelog and deprecations agree.

Each test checks one file of the project against an independent source: the package metadata
that pip installed, ``pyproject.toml`` as tomllib reads it, the licenses the dependencies
declare, and what the command line actually prints.
"""

from __future__ import annotations

import argparse
import datetime
import re
import tomllib
from importlib import metadata
from pathlib import Path

import numpy as np
import pytest

from scimech.cli.commands import build_parser, commands, main
from scimech.run import options
from scimech.studies.contract import load_study, registered_studies

REPO = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
CHANGELOG = (REPO / "CHANGELOG.md").read_text()
KEEP_A_CHANGELOG_SECTIONS = {"Added", "Changed", "Deprecated", "Removed", "Fixed", "Security"}


def _dist_name(requirement: str) -> str:
    return re.split(r"[<>=!~\[ ;]", requirement, maxsplit=1)[0]


def _release(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", version.split("+")[0])[:3])


def _versions() -> list[tuple[str, str | None, str]]:
    """``(version, date, body)`` of each ``## [version] - date`` section, newest first."""
    parts = re.split(r"^## \[([^\]]+)\](?: - (\S+))?\s*$", CHANGELOG, flags=re.M)
    return [(parts[i], parts[i + 1], parts[i + 2]) for i in range(1, len(parts), 3)]


def _section(version: str, name: str) -> str:
    body = dict((v, b) for v, _, b in _versions())[version]
    found = re.search(rf"^### {name}\s*$(.*?)(?=^### |\Z)", body, flags=re.M | re.S)
    assert found, f"CHANGELOG's [{version}] has no '{name}' section"
    return found.group(1)


# --- version --------------------------------------------------------------------------------------
def test_version_flag_prints_the_installed_version(capsys):
    assert main(["--version"]) == 0
    printed = capsys.readouterr().out.strip()
    assert printed == f"scimech {metadata.version('scimech')}"
    assert printed == f"scimech {PYPROJECT['project']['version']}"  # the source of truth: pyproject.toml


# --- license and notices ----------------------------------------------------------------------------
def test_the_license_is_bsd_3_clause_in_the_file_and_in_the_metadata():
    project = PYPROJECT["project"]
    assert project["license"] == "BSD-3-Clause"
    text = (REPO / "LICENSE").read_text()
    assert text.startswith("BSD 3-Clause License") and "The scimech developers" in text
    # the three clauses of the SPDX text, each present once
    for clause in (
        "Redistributions of source code must retain",
        "Redistributions in binary form must reproduce",
        "Neither the name of the copyright holder",
    ):
        assert text.count(clause) == 1, clause
    assert all((REPO / f).is_file() for f in project["license-files"])
    installed = metadata.metadata("scimech")
    assert installed["License-Expression"] == "BSD-3-Clause"
    assert set(installed.get_all("License-File") or []) >= {"LICENSE", "THIRD_PARTY_NOTICES.md"}


_CLASSIFIER_WORDS = {
    "BSD License": "BSD",
    "MIT License": "MIT",
    "Apache Software License": "Apache",
    "Python Software Foundation License": "PSF",
    "Mozilla Public License 2.0 (MPL 2.0)": "MPL-2.0",
}


def _declared_license_terms(dist: str) -> set[str]:
    """The license identifiers a distribution's own metadata declares (SPDX expression, else
    its license classifiers); empty where it declares neither in a readable form."""
    meta = metadata.metadata(dist)
    expression = (meta.get("License-Expression") or meta.get("License") or "").strip()
    if expression and "\n" not in expression and len(expression) < 120:
        return {t for t in re.split(r"[\s()]+", expression) if t and t not in {"AND", "OR", "WITH"}}
    return {
        word
        for c in meta.get_all("Classifier") or []
        for key, word in _CLASSIFIER_WORDS.items()
        if c.startswith("License ::") and c.endswith(key)
    }


def test_third_party_notices_give_each_dependency_the_license_it_declares():
    rows = {}
    for line in (REPO / "THIRD_PARTY_NOTICES.md").read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and len(cells) == 2:
            rows[cells[0].lower()] = cells[1]
    checked = 0
    for requirement in PYPROJECT["project"]["dependencies"]:
        dist = _dist_name(requirement)
        assert dist.lower() in rows, f"THIRD_PARTY_NOTICES.md has no row for {dist}"
        terms = _declared_license_terms(dist)
        missing = {t for t in terms if t not in rows[dist.lower()]}
        assert not missing, f"{dist}: its metadata declares {sorted(terms)}; the notices say {rows[dist.lower()]!r}"
        checked += bool(terms)
    assert checked >= len(PYPROJECT["project"]["dependencies"]) - 2  # all but packages that declare nothing


# --- changelog --------------------------------------------------------------------------------------
def test_the_changelog_has_keep_a_changelog_sections_down_to_this_version():
    assert CHANGELOG.startswith("# Changelog\n")
    versions = _versions()
    assert versions[0][0] == "Unreleased" and versions[0][1] is None
    released = versions[1:]
    assert released and released[0][0] == PYPROJECT["project"]["version"]  # the newest release is this one
    assert released[-1][0] == "0.1.0"
    for version, date, _ in released:
        datetime.date.fromisoformat(date)  # ISO date, as the format asks
        assert re.fullmatch(r"\d+\.\d+\.\d+", version)
    for version, _, body in versions:
        sections = re.findall(r"^### (.+?)\s*$", body, flags=re.M)
        assert sections and set(sections) <= KEEP_A_CHANGELOG_SECTIONS, (version, sections)
        assert len(sections) == len(set(sections)), f"[{version}] repeats a section"
    assert [_release(v) for v, _, _ in released] == sorted((_release(v) for v, _, _ in released), reverse=True)


def test_every_deprecation_in_the_changelog_names_its_removal_release():
    entries = [e for e in re.split(r"^- ", _section("0.1.0", "Deprecated"), flags=re.M)[1:]]
    assert entries
    for entry in entries:
        assert re.search(r"removed in (\d+\.\d+\.\d+)", entry), entry
    removal = {re.search(r"removed in (\d+\.\d+\.\d+)", e).group(1) for e in entries}
    assert removal == {options.REMOVED_IN}
    assert _release(options.REMOVED_IN) > _release(metadata.version("scimech"))  # not already due


# --- deprecated spellings, as a user meets them -----------------------------------------------------
def _old_commands() -> list[tuple[str, str, str]]:
    return [(study, old, new) for study in registered_studies() for old, new in load_study(study).renamed.items()]


def _old_options() -> list:
    return [
        pytest.param(name, parser, action, id=f"{name} {action.option_strings[0]}")
        for name, parser in commands(build_parser())
        for action in parser._actions
        if getattr(action, "deprecated_for", None)
    ]


def test_the_command_line_has_old_spellings_to_check():
    assert len(_old_commands()) >= 7 and len(_old_options()) >= 3


@pytest.mark.parametrize("study, old, new", _old_commands())
def test_an_old_command_name_warns_naming_the_new_one_and_the_removal_release(study, old, new, capsys):
    assert main([study, old, "--help"]) == 0
    err = capsys.readouterr().err
    assert f"`{old}` is deprecated and will be removed in scimech {options.REMOVED_IN}" in err
    assert f"use `scimech {study} {new}`" in err
    assert f"`scimech {study} {old}`" in _section("0.1.0", "Deprecated")  # and the changelog lists it


@pytest.mark.parametrize("command, parser, action", _old_options())
def test_an_old_option_spelling_warns_naming_the_new_one_and_the_removal_release(command, parser, action, capsys):
    old = action.option_strings[0]
    namespace = argparse.Namespace()
    action(parser, namespace, "3", old)
    assert getattr(namespace, action.dest) == "3"  # it still sets the new option
    err = capsys.readouterr().err
    assert (
        f"{old} is deprecated and will be removed in scimech {options.REMOVED_IN}; use {action.deprecated_for}." in err
    )
    assert f"`{command} {old}`" in _section("0.1.0", "Deprecated")


def _removal_release(changelog_entry_start: str) -> str:
    """The release that removes a deprecation, as the changelog's "Deprecated" entry states it."""
    entry = next(
        e for e in re.split(r"^- ", _section("0.1.0", "Deprecated"), flags=re.M) if e.startswith(changelog_entry_start)
    )
    return re.search(r"removed in (\d+\.\d+\.\d+)", entry).group(1)


def test_repeat_warns_naming_calls_and_the_release_the_changelog_says_removes_it():
    import torch
    from torch import nn

    from scimech.capture.record import Recorder, record

    release = _removal_release("`repeat=`")
    model = nn.Sequential(nn.Linear(3, 2))
    x = torch.randn(5, 3, generator=torch.Generator().manual_seed(0))
    wording = rf"repeat= is deprecated and will be removed in scimech {re.escape(release)}; use calls="
    with pytest.warns(DeprecationWarning, match=wording):
        ds = record(model, x, ["0"], repeat="stack")
    with torch.no_grad():  # it still records, as calls="all" does: every call on a call axis
        np.testing.assert_allclose(ds["0"].values[:, 0], model[0](x).numpy(), rtol=1e-6)
    with pytest.warns(DeprecationWarning, match=wording), Recorder(model, ["0"], repeat="error"):
        pass


def test_neuro_seeds_as_a_count_warns_naming_n_seeds_and_the_release_the_changelog_says_removes_it(tmp_path):
    from neuro.plan import StudySettings

    release = _removal_release("`neuro.plan.StudySettings(seeds=N)`")
    with pytest.warns(FutureWarning, match=rf"removed in scimech {re.escape(release)}; use n_seeds=3"):
        settings = StudySettings(out=tmp_path, seeds=3)
    assert settings.n_seeds == 3 and settings.seeds is None
