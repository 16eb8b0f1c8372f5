"""Every python block of the README and of the documentation pages runs as written, top to bottom,
in a fresh interpreter; the documentation site (``make docs``) holds every guide and documents
every public name.

A newcomer's first copy-paste must work. Each page's ``python`` blocks run in order, as one
script, in a new Python process whose working directory is a temporary folder (so what they
write stays there), as a reader pasting them into a fresh interpreter would run them. The script
keeps each block on its page's line numbers, so a traceback names the page's own line.

A block that reads a file the reader makes first (their own product, a large model folder) is not
run. It says so in the Markdown, on the line right above its fence, with the file it needs and
the command or function that writes it::

    <!-- not run: reads your catalogue dr10_desi.fits; `scimech astro generate --out dr10_desi.fits` writes one -->

Every other block of every page runs here. A ``print(...)`` whose comment shows what it prints
(``print(ds.dims)  # ('sample', 'feature')``) must have printed exactly that.
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import NamedTuple

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"

#: the opt-out marker: an HTML comment (invisible on GitHub and on the site) right above the fence
NOT_RUN = re.compile(r"<!-- not run: (?P<reason>.*?) -->\n$")
FENCE = re.compile(r"^```python\n(?P<code>.*?)^```", flags=re.S | re.M)


class Block(NamedTuple):
    line: int  # the page's line number (1-based) of the block's first line of code
    code: str
    not_run: str | None  # the reason given by the marker above the fence, if any


def _python_blocks(path: Path) -> list[Block]:
    text = path.read_text()
    blocks = []
    for m in FENCE.finditer(text):
        before = text[: m.start()]
        marker = NOT_RUN.search(before[before.rfind("\n", 0, len(before) - 1) + 1 :])
        blocks.append(Block(before.count("\n") + 2, m["code"], marker["reason"] if marker else None))
    return blocks


def _blocks(path: Path) -> list[str]:
    """The code of the blocks of a page that run."""
    return [b.code for b in _python_blocks(path) if b.not_run is None]


def _script(path: Path) -> str:
    """The blocks that run, each on its page's own lines (blank lines between them)."""
    lines = [""] * path.read_text().count("\n")
    for block in _python_blocks(path):
        if block.not_run is None:
            for i, line in enumerate(block.code.splitlines()):
                lines[block.line - 1 + i] = line
    return "\n".join(lines) + "\n"


def _literals(comment: str) -> str | None:
    """The Python literals a comment opens with (``('sample', 'feature') (32, 16): ...``), as
    ``print`` writes them; None for a comment in words."""
    for end in sorted({i + 1 for i, c in enumerate(comment) if c in ")]}"}, reverse=True):
        parts = re.split(r"(?<=[)\]}])\s+(?=[(\[{])", comment[:end])
        try:
            return " ".join(repr(ast.literal_eval(part)) for part in parts)
        except (ValueError, SyntaxError):
            continue
    return None


def _shown_output(path: Path) -> dict[int, str]:
    """``{line: text}`` of every ``print(...)`` whose trailing comment opens with what it prints
    (Python literals, such as the dims tuple of an xarray object)."""
    shown = {}
    for block in _python_blocks(path):
        if block.not_run is None:
            for i, line in enumerate(block.code.splitlines()):
                m = re.match(r"\s*print\(.*\)\s+#\s*(?P<comment>[(\[{].*)$", line)
                if m and (literals := _literals(m["comment"])) is not None:
                    shown[block.line + i] = literals
    return shown


#: a fresh interpreter: runs the page's script as __main__, and records what each line printed
RUNNER = """
import builtins, io, json, runpy, sys
script, log = sys.argv[1:3]
printed, _print = {}, builtins.print
def _recording_print(*args, **kwargs):
    frame = sys._getframe(1)
    if frame.f_code.co_filename == script and kwargs.get("file") is None:
        text = io.StringIO()
        _print(*args, **{**kwargs, "file": text})
        printed.setdefault(frame.f_lineno, []).append(text.getvalue().strip())
    _print(*args, **kwargs)
builtins.print = _recording_print
try:
    runpy.run_path(script, run_name="__main__")
finally:
    with open(log, "w") as f:
        json.dump(printed, f)
"""


def _pages_with_code(runnable: bool = False) -> list[str]:
    """The README and the docs pages with python blocks (that run, with ``runnable``)."""
    pages = [REPO / "README.md", *sorted(DOCS.glob("**/*.md"))]
    return [str(p.relative_to(REPO)) for p in pages if (_blocks(p) if runnable else _python_blocks(p))]


#: pages whose blocks take long to run: the slow tier runs them (`make test-slow`)
SLOW = {
    "docs/validation.md": "runs every planted case (about 25 s on 2 cores)",
    # run in the default tier by a test of their own, in the test process (it checks their numbers)
    "docs/sites_and_interventions.md": "tests/scimech/test_sites.py",
    "docs/probing_and_concepts.md": "tests/scimech/test_probe.py",
}


def _page_param(page: str):
    return pytest.param(page, marks=pytest.mark.slow) if page in SLOW else page


@pytest.mark.parametrize("page", [_page_param(p) for p in _pages_with_code(runnable=True)])
def test_python_blocks_run_in_a_fresh_interpreter(page, tmp_path):
    path = REPO / page
    script = tmp_path / (page.replace("/", "__") + ".py")
    script.write_text(_script(path))
    log = tmp_path / "printed.json"
    work = tmp_path / "work"
    work.mkdir()
    env = {**os.environ, "SCIMECH_QUIET": "1", "MPLBACKEND": "Agg", "OMP_NUM_THREADS": "1"}
    env.pop("PYTHONPATH", None)  # as a reader's interpreter: scimech from its installation
    run = subprocess.run(
        [sys.executable, "-c", RUNNER, str(script), str(log)],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, f"{page}: a block failed (line numbers are the page's)\n{run.stderr[-4000:]}"
    assert run.stdout.strip(), f"{page}: the blocks print nothing of what they show"
    printed = {int(k): v for k, v in json.loads(log.read_text()).items()}
    for line, shown in _shown_output(path).items():
        said = " ".join(printed.get(line, []))
        assert said == shown, f"{page}, line {line}: the comment shows {shown}, the line printed {said!r}"


def test_the_marker_names_the_file_and_how_to_make_it():
    """A block is left out only with a reason that names, in backticks, what writes its file."""
    for page in _pages_with_code():
        for block in _python_blocks(REPO / page):
            if block.not_run is not None:
                assert re.search(r"`[^`]+`", block.not_run), f"{page}, line {block.line}: {block.not_run!r}"
    assert _python_blocks(REPO / "docs" / "ocean.md")  # the marker parser sees the pages


def test_the_marker_leaves_out_only_the_block_below_it(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "# A page\n\n```python\nx = 1\n```\n\n<!-- not run: reads a.nc; `make-a` writes it -->\n"
        "```python\nopen('a.nc')\n```\n\n```python\nprint(x)  # 1\n```\n"
    )
    blocks = _python_blocks(page)
    assert [b.not_run for b in blocks] == [None, "reads a.nc; `make-a` writes it", None]
    assert [b.line for b in blocks] == [4, 9, 13]
    script = _script(page).splitlines()
    assert script[3] == "x = 1" and script[8] == "" and script[12] == "print(x)  # 1"


def test_the_readme_quick_start_measures_what_it_says():
    """The quick start's numbers are real: the probe finds the planted redshift at the last
    block (it is a linear function of the inputs) and the ablation changes the output."""
    import torch

    ns: dict = {"__name__": "__docs__"}
    code = "\n".join(_blocks(REPO / "README.md")).replace("print(", "(lambda *a, **k: None)(")
    exec(compile(code, "README.md", "exec"), ns)  # noqa: S102
    assert ns["probes"].score_mean.sel(site="layers.1") > 0.3
    with torch.no_grad():
        assert not torch.allclose(ns["z_ablated"], ns["model"](ns["inputs"]))


def test_the_core_api_shows_each_verb_in_code_that_runs():
    """docs/core_api.md pastes as Python for the verbs a reader tries first; its signatures are
    ``text`` listings."""
    code = "\n".join(_blocks(REPO / "docs" / "core_api.md"))
    for verb in ("record(", "ablate(", "patch(", "patching_sweep(", "attribution_patching("):
        assert verb in code, f"docs/core_api.md has no runnable example of {verb[:-1]}"


# --- the documentation site (docs/conf.py, `make docs`) ----------------------------------------------


def test_the_slow_pages_are_pages_with_code_and_run_elsewhere_as_said():
    assert set(SLOW) <= set(_pages_with_code(runnable=True))
    for page, why in SLOW.items():
        if why.startswith("tests/"):
            assert page.split("/")[-1] in (REPO / why).read_text(), f"{why} does not run {page}"


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
