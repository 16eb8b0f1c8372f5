"""The README's quick start and the guides' python blocks run as written, top to bottom; the
documentation site (``make docs``) holds every guide and documents every public name.

A newcomer's first copy-paste must work: each file's ``python`` blocks are executed in one
namespace, in a temporary working directory (so what they write stays there).
``sites_and_interventions.md`` and ``probing_and_concepts.md`` are run by ``tests/scimech``; the
pages whose blocks need a user's own files or a long run are listed in ``NOT_RUN`` with the reason,
and every other page of the site has its blocks run.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _blocks(path: Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", path.read_text(), flags=re.S)


#: the pages whose python blocks run here
RUN_HERE = ["README.md", "docs/scaling.md", "docs/dictionary.md", "docs/adding_a_study.md"]


@pytest.mark.parametrize("doc", RUN_HERE)
def test_python_blocks_run(doc, tmp_path, monkeypatch, capsys):
    path = REPO / doc
    blocks = _blocks(path)
    assert blocks, f"{doc} has no python block"
    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": "__docs__"}
    exec(compile("\n".join(blocks), str(path), "exec"), namespace)  # noqa: S102 - our own documentation
    assert capsys.readouterr().out.strip(), "the blocks print what they show"


def test_readme_quick_start_measures_what_it_says():
    """The quick start's numbers are real: the probe finds the planted redshift at the last
    block (it is a linear function of the inputs) and the ablation changes the output."""
    import torch

    ns: dict = {"__name__": "__docs__"}
    code = "\n".join(_blocks(REPO / "README.md")).replace("print(", "(lambda *a, **k: None)(")
    exec(compile(code, "README.md", "exec"), ns)  # noqa: S102
    assert ns["probes"].score_mean.sel(site="layers.1") > 0.3
    with torch.no_grad():
        assert not torch.allclose(ns["z_ablated"], ns["model"](ns["inputs"]))


def test_core_api_listings_are_not_passed_off_as_runnable_code():
    """docs/core_api.md lists signatures; its fences say so (``text``), so every ``python``
    fence in docs/ is runnable code that some test executes."""
    assert not _blocks(REPO / "docs" / "core_api.md")


# --- the documentation site (docs/conf.py, `make docs`) ----------------------------------------------
DOCS = REPO / "docs"
#: the pages whose python blocks run in another test file (each names the page)
RUN_ELSEWHERE = {
    "docs/sites_and_interventions.md": "tests/scimech/test_sites.py",
    "docs/probing_and_concepts.md": "tests/scimech/test_probe.py",
}
#: the pages whose python blocks are not run, and why (every other page's blocks are)
NOT_RUN = {
    "docs/ocean.md": "reads the scientist's own product files",
    "docs/astro.md": "reads the scientist's own catalogue and writes a 1.5 GB AION-1 folder",
    "docs/neuro.md": "runs a study on the scientist's own traces and Dask client",
    "docs/validation.md": "runs the whole suite (about 100 s of CPU); tests/scimech/test_validate.py runs its cases",
}


def _toctree_entries(page: Path) -> list[Path]:
    """The pages a page's ``{toctree}`` blocks list, as paths."""
    entries = []
    for block in re.findall(r"```\{toctree\}\n(.*?)```", page.read_text(), flags=re.S):
        entries += [
            page.parent / f"{line.strip()}.md"
            for line in block.splitlines()
            if line.strip() and not line.startswith(":")
        ]
    return entries


def _site_pages() -> list[Path]:
    """Every page the site reaches from docs/index.md through its toctrees."""
    seen, todo = [], [DOCS / "index.md"]
    while todo:
        page = todo.pop(0)
        if page not in seen:
            seen.append(page)
            todo += _toctree_entries(page)
    return seen


def test_every_guide_is_a_page_of_the_site():
    pages = _site_pages()
    assert all(p.is_file() for p in pages), [str(p) for p in pages if not p.is_file()]
    assert set(DOCS.glob("**/*.md")) == set(pages), set(DOCS.glob("**/*.md")) ^ set(pages)


def test_every_python_block_of_the_site_is_run_by_a_test():
    """A page with python blocks is executed here (``RUN_HERE``), by the test file that names it,
    or listed with the reason it cannot be; a new page's blocks must be run somewhere."""
    with_code = {str(p.relative_to(REPO)) for p in _site_pages() if _blocks(p)}
    for page, test in RUN_ELSEWHERE.items():
        assert page.split("/")[-1] in (REPO / test).read_text(), f"{test} does not run {page}"
    unrun = with_code - set(RUN_HERE) - set(RUN_ELSEWHERE) - set(NOT_RUN)
    assert not unrun, f"python blocks that no test runs: {sorted(unrun)}"
    assert set(NOT_RUN) <= with_code  # an entry here that has no code any more is taken off


def _documented() -> set[str]:
    """The objects the API reference's autodoc directives name."""
    return {
        m
        for page in (DOCS / "api").glob("*.md")
        for m in re.findall(r"^\.\. auto(?:function|class|data)::\s*(\S+)", page.read_text(), flags=re.M)
    }


def test_the_api_reference_documents_every_public_name():
    import scimech
    import scimech.analysis.dictionary
    import scimech.causal.metrics

    public = {f"scimech.{n}" for n in scimech.__all__ if n != "__version__"}
    public |= {
        f"scimech.analysis.dictionary.{n}"
        for n in scimech.analysis.dictionary.__all__
        if callable(getattr(scimech.analysis.dictionary, n))
    }
    public |= {f"scimech.causal.metrics.{n}" for n in scimech.causal.metrics.__all__}
    entry_points = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["entry-points"]
    studies = {v.replace(":", ".") for v in entry_points["scimech.studies"].values()}
    missing = (public | studies) - _documented()
    assert not missing, f"not in docs/api/*.md: {sorted(missing)}"
