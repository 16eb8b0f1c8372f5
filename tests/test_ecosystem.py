"""The habits of the scientific Python ecosystem: ``scimech.show_versions()`` for bug reports, a valid
CITATION.cff, an installation page that names every extra, and a glossary whose names are real."""

from __future__ import annotations

import importlib
import io
import platform
import re
import tomllib
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())

#: the top-level keys of Citation File Format 1.2.0 and those it requires, written down from its schema
#: (https://citation-file-format.github.io/1.2.0/schema.json)
CFF_KEYS = {
    "abstract", "authors", "cff-version", "commit", "contact", "date-released", "doi", "identifiers", "keywords",
    "license", "license-url", "message", "preferred-citation", "references", "repository", "repository-artifact",
    "repository-code", "title", "type", "url", "version",
}  # fmt: skip
CFF_REQUIRED = {"authors", "cff-version", "message", "title"}


def _extras_names() -> dict[str, list[str]]:
    """``{extra: [distribution names]}`` from pyproject.toml, read here with tomllib."""
    return {
        extra: [re.match(r"[A-Za-z0-9._-]+", r).group(0) for r in reqs]  # type: ignore[union-attr]
        for extra, reqs in PYPROJECT["project"]["optional-dependencies"].items()
    }


def test_versions_are_the_installed_ones():
    import numpy
    import torch
    import xarray

    from scimech.run.versions import versions

    found = versions()
    assert found["system"]["python"].split()[0] == platform.python_version()
    assert found["system"]["OS"] == platform.system()
    required = found["required"]
    assert required["numpy"] == numpy.__version__
    assert required["torch"] == torch.__version__
    assert required["xarray"] == xarray.__version__
    assert required["scimech"] == PYPROJECT["project"]["version"]
    # every dependency pyproject.toml names is there, and every extra's but the developer tools
    wanted = {re.match(r"[A-Za-z0-9._-]+", r).group(0) for r in PYPROJECT["project"]["dependencies"]}  # type: ignore[union-attr]
    assert wanted <= set(required)
    extras = {n for e, names in _extras_names().items() if e != "dev" for n in names} - wanted
    assert extras == set(found["optional"])
    assert found["optional"]["nnsight"] != ""


def test_show_versions_prints_them_and_is_part_of_the_api():
    import scimech as sm
    from scimech.run.versions import versions

    assert "show_versions" in dir(sm)
    out = io.StringIO()
    sm.show_versions(file=out)
    lines = out.getvalue().splitlines()
    assert "INSTALLED VERSIONS" in lines
    for name, version in versions()["required"].items():
        assert f"{name}: {version}" in lines


def test_citation_file_is_valid_cff_1_2_0():
    doc = yaml.safe_load((REPO / "CITATION.cff").read_text())
    assert set(doc) <= CFF_KEYS and CFF_REQUIRED <= set(doc)
    assert doc["cff-version"] == "1.2.0"
    assert doc.get("type", "software") in ("software", "dataset")
    assert isinstance(doc["message"], str) and doc["message"].strip()
    assert isinstance(doc["title"], str) and doc["title"].startswith("scimech")
    assert isinstance(doc["authors"], list) and doc["authors"]
    for author in doc["authors"]:  # a person (family-names) or an entity (name)
        assert isinstance(author, dict) and ("family-names" in author or "name" in author), author
    # the same release and licence as the package
    assert str(doc["version"]) == PYPROJECT["project"]["version"]
    assert doc["license"] == PYPROJECT["project"]["license"]
    assert all(isinstance(k, str) and k for k in doc.get("keywords", []))


def test_install_page_names_every_extra_and_the_torch_pin():
    page = (REPO / "docs" / "install.md").read_text()
    for extra, names in _extras_names().items():
        row = next((line for line in page.splitlines() if line.startswith(f"| `{extra}` |")), None)
        assert row is not None, f"docs/install.md has no row for the extra {extra!r}"
        first = names[0].split("[")[0].lower()
        assert first.replace("-", "") in row.lower().replace("-", "").replace(" ", ""), (extra, first, row)
    pin = re.search(r'"torch==([0-9.]+)"', (REPO / "Makefile").read_text())
    assert pin is not None
    assert f'"torch=={pin.group(1)}"' in page
    assert f"scimech-{PYPROJECT['project']['version']}-py3-none-any.whl" in page


GLOSSARY_TERMS = ("site", "layout", "call", "planted truth", "profile", "session", "verb", "concept", "yardstick")


def _entries(page: str) -> list[str]:
    """The terms a MyST definition list defines: a line followed by one starting with ': '."""
    lines = page.splitlines()
    return [lines[i].strip() for i in range(len(lines) - 1) if lines[i + 1].startswith(": ") and lines[i].strip()]


def test_glossary_defines_the_project_words():
    entries = _entries((REPO / "docs" / "glossary.md").read_text())
    for term in GLOSSARY_TERMS:
        assert any(re.fullmatch(rf"{term}( \(.*\))?(, .*)?|.*, {term}", e) for e in entries), term
    assert len(entries) == len(set(entries))


def _resolves(dotted: str) -> bool:
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        try:
            for name in parts[cut:]:
                obj = getattr(obj, name)
        except AttributeError:
            return False
        return True
    return False


@pytest.mark.parametrize("page", ["glossary.md", "install.md"])
def test_the_pages_name_real_things(page):
    text = (REPO / "docs" / page).read_text()
    names = set(re.findall(r"`(scimech(?:\.[A-Za-z_]\w*)+)(?:\([^`]*\))?`", text))
    names |= {f"scimech.{n}" for n in re.findall(r"`sm\.([A-Za-z_]\w*)", text)}
    assert names, page
    assert [n for n in names if not _resolves(n)] == []
    for target in re.findall(r"\]\(([^)#]+\.md)", text):  # links to other pages
        assert (REPO / "docs" / target).is_file(), target
    index = (REPO / "docs" / "index.md").read_text()
    assert re.search(rf"^{Path(page).stem}$", index, re.M), f"{page} is not in the toctree of docs/index.md"
