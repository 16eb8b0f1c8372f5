"""Hostile candidate programs are contained by the neuro sandbox and become failed results:
writes outside the sandbox folder, deleting files outside it, importing the search's own
packages (to rebuild the task and read its test split), fork bombs."""

from __future__ import annotations

import pytest

from neuro.search.sandbox import SandboxLimits, run_in_sandbox

MODEL = """
import numpy as np
class Model:
    def fit(self, s, st, meta): return self
    def predict(self, c, sc, sf): return np.zeros((len(c), sf.shape[1], c.shape[2]))
"""


@pytest.fixture(scope="module")
def data_file(candidate_data_file):
    return candidate_data_file


def test_a_well_behaved_candidate_still_scores(data_file):
    r = run_in_sandbox(MODEL, data_file, stage="quick")
    assert r.ok, r.error  # the guards do not get in the way of numpy, or of the runner's own output


def test_write_outside_the_sandbox_is_blocked(data_file, tmp_path):
    target = tmp_path / "outside.txt"
    r = run_in_sandbox(f"open({str(target)!r}, 'w').write('x')\n" + MODEL, data_file, stage="quick")
    assert not r.ok and "outside the sandbox" in r.error
    assert not target.exists()


def test_deleting_outside_the_sandbox_is_blocked(data_file, tmp_path):
    victim = tmp_path / "keep.txt"
    victim.write_text("precious")
    r = run_in_sandbox(f"import os\nos.remove({str(victim)!r})\n" + MODEL, data_file, stage="quick")
    assert not r.ok and "outside the sandbox" in r.error
    assert victim.read_text() == "precious"


@pytest.mark.parametrize("module", ["neuro.tasks", "neuro.search.tree", "scimech.results"])
def test_importing_search_internals_is_blocked(data_file, module):
    r = run_in_sandbox(f"import {module}\n" + MODEL, data_file, stage="quick")
    assert not r.ok and "importing" in r.error and module.split(".")[0] in r.error


def test_fork_bomb_is_contained(data_file):
    code = "import os\nwhile True:\n    os.fork()\n" + MODEL
    r = run_in_sandbox(code, data_file, SandboxLimits(wall_seconds=10), stage="quick")
    assert not r.ok and "os.fork" in r.error  # the first fork is refused: no process is ever created
