"""The README's quick start and the guides' python blocks run as written, top to bottom.

A newcomer's first copy-paste must work: each file's ``python`` blocks are executed in one
namespace, in a temporary working directory (so what they write stays there). The guides
whose blocks need a study's output or a user's own files (the domain pages) are run by their
domains' tests; ``sites_and_interventions.md`` and ``probing_and_concepts.md`` by
``tests/scimech``.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _blocks(path: Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", path.read_text(), flags=re.S)


@pytest.mark.parametrize("doc", ["README.md", "docs/scaling.md", "docs/dictionary.md", "docs/adding_a_study.md"])
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
