"""Every script of the gallery (``examples/**/plot_*.py``, run by sphinx-gallery in ``make docs``)
runs as written and draws at least one figure.

Each script runs in a fresh interpreter, with matplotlib's non-interactive Agg backend, in a
temporary working folder, as a reader who downloaded it would run it. A script that fails, or
that ends with no open figure (the gallery would show its page without a picture), fails here,
so an example that rots is caught by the slow tier as well as by the docs build.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"
SCRIPTS = sorted(EXAMPLES.glob("**/plot_*.py"))

# run the script as sphinx-gallery does (as __main__), then report how many figures it left open
RUNNER = """
import runpy, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
runpy.run_path(sys.argv[1], run_name="__main__")
print("FIGURES", len(plt.get_fignums()))
"""


def test_the_gallery_has_its_examples_and_headers():
    assert len(SCRIPTS) >= 12, [str(s) for s in SCRIPTS]
    for folder in {EXAMPLES, *(s.parent for s in SCRIPTS)}:  # sphinx-gallery needs a header per folder
        assert (folder / "README.rst").is_file() or (folder / "README.txt").is_file(), folder
    for script in SCRIPTS:  # a docstring whose first lines are a title and its underline
        lines = script.read_text().split('"""', 2)[1].strip().splitlines()
        assert len(lines) > 2 and set(lines[1]) == {"="} and len(lines[1]) >= len(lines[0]), script


@pytest.mark.slow
@pytest.mark.parametrize("script", SCRIPTS, ids=[str(s.relative_to(EXAMPLES)) for s in SCRIPTS])
def test_each_example_runs_and_draws_a_figure(script, tmp_path):
    env = os.environ | {"MPLBACKEND": "Agg", "SCIMECH_QUIET": "1", "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-c", RUNNER, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-4000:]
    figures = [line for line in done.stdout.splitlines() if line.startswith("FIGURES ")]
    assert figures and int(figures[-1].split()[1]) >= 1, f"{script.name} drew no figure:\n{done.stdout[-2000:]}"
