"""The GPU check (scripts/device_check.sh) and the device the tests' tensors live on.

The check itself runs on a GPU machine; here its ``--cpu`` dry run goes through the same steps at
the smallest sizes, so that it does not rot: the sweeps against a naive loop (and TransformerLens
and nnsight where installed), a conformance file, ocean's study for one epoch, and the summary.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[1]


def test_tensors_a_test_makes_go_to_the_test_device_and_the_toolkits_stay(device_mode):
    # code whose file is in the toolkit: what it makes is left where it makes it
    toolkit = compile("import torch\nmade = torch.zeros(2)\n", str(REPO / "scimech" / "_probe.py"), "exec")
    made_there: dict = {}
    with device_mode("meta"):
        plain = torch.zeros(3)
        drawn = torch.randn(2, generator=torch.Generator().manual_seed(0))  # a CPU generator's numbers
        layer = torch.nn.Linear(2, 2)  # torch.nn called from a test: the test's model
        leaf = torch.ones(2, requires_grad=True)
        exec(toolkit, made_there)
    assert {t.device.type for t in (plain, drawn, layer.weight, layer.bias, leaf)} == {"meta"}
    assert leaf.is_leaf and leaf.requires_grad
    assert made_there["made"].device.type == "cpu"
    assert torch.zeros(1).device.type == "cpu"  # the block is left


def test_the_test_device_is_the_cpu_unless_asked(test_device):
    assert test_device == torch.device(os.environ.get("SCIMECH_TEST_DEVICE") or "cpu")


@pytest.mark.slow
def test_the_cpu_dry_run_of_the_gpu_check_writes_what_it_says(tmp_path):
    # this interpreter; no test device and none of this pytest's own variables (an xdist worker's name)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_") and k != "SCIMECH_TEST_DEVICE"}
    env["PYTHON"] = sys.executable
    run = subprocess.run(
        ["bash", str(REPO / "scripts" / "device_check.sh"), "--cpu", "--out", str(tmp_path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-4000:]

    # the sweeps: both verbs at 1 and 2 sites, every tool's values those of the naive loop (float32
    # models of 12 layers: tiled passes round differently, by about 1e-6 on values of order 1)
    sweep = json.loads((tmp_path / "sweep_scaling.json").read_text())
    assert sweep["device"] == "cpu"
    assert sorted((r["verb"], r["sites"]) for r in sweep["rows"]) == [
        ("ablation", 1),
        ("ablation", 2),
        ("patching", 1),
        ("patching", 2),
    ]
    for r in sweep["rows"]:
        assert {"naive loop", "scimech"} <= set(r["times"])
        assert max(r["max_diff_vs_naive"].values()) < 1e-4
        assert r["effect_span"][1] > 1e-3  # the heads change the metric: agreement is not of zeros
    assert sweep["checks_paid_once"]["second_verb_pays_no_check"] is True
    assert "| 2 |" in (tmp_path / "sweep_scaling.md").read_text()

    # the conformance file ran and passed
    root = ET.parse(tmp_path / "conformance.xml").getroot()
    suite = root if root.tag == "testsuite" else root[0]
    assert int(suite.get("tests")) > 0
    assert int(suite.get("failures")) == int(suite.get("errors")) == 0

    # the study's report and figures
    with tarfile.open(tmp_path / "ocean_study.tar.gz") as tar:
        names = tar.getnames()
    assert "report.md" in names and any(n.endswith(".png") for n in names)

    summary = (tmp_path / "device_check.md").read_text()
    for step in ("sweeps", "conformance", "study"):
        assert f"| {step} | passed |" in summary
    assert "Ocean's quick study on cpu" in summary
