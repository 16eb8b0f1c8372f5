"""The package surface: ``sm.record`` stays the function across calls and imports, and every
verb runs on the CPU with numpy results."""

from __future__ import annotations

import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import torch
import xarray as xr

import scimech as sm

REPO = Path(__file__).resolve().parents[2]

SCRIPT = """
import types, torch
import scimech as sm
model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh()).eval()
x = torch.randn(5, 3)
first = sm.record(model, x, ["0"])
second = sm.record(model, x, ["0"])          # the first lazy import must not rebind sm.record
import scimech.capture.record                        # nor may importing the submodule by name
from scimech.capture.record import Recorder
third = sm.record(model, x, ["1"])
assert not isinstance(sm.record, types.ModuleType), sm.record
assert (first["0"].values == second["0"].values).all()
print("ok", third["1"].shape)
"""


def test_record_can_be_called_twice_in_a_fresh_process():
    done = subprocess.run([sys.executable, "-c", SCRIPT], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "ok (5, 4)"


def test_record_is_the_function_in_this_process():
    import scimech.capture.record  # noqa: F401  (binds the submodule as an attribute on first import)

    assert callable(sm.record) and not isinstance(sm.record, types.ModuleType)
    model = torch.nn.Linear(3, 2)
    for _ in range(2):
        assert sm.record(model, torch.randn(4, 3), [""]).sizes["sample"] == 4


def test_everything_runs_on_the_cpu_with_numpy_results(unet):
    model, metric = unet.model, unet.metric
    g = torch.Generator().manual_seed(70)
    clean, corrupted = torch.randn(3, 1, 16, 16, generator=g), torch.randn(3, 1, 16, 16, generator=g)
    sites = ["enc2.channels[3]", "dec1"]
    results = [
        sm.record(model, clean, sites),
        sm.ablation_sweep(model, clean, sites, metric, method="resample", reference=corrupted),
        sm.patching_sweep(model, clean, corrupted, sites, metric),
        sm.attribution_patching(model, clean, corrupted, sites, metric),
    ]
    for ds in results:
        assert isinstance(ds, xr.Dataset)
        for name, var in ds.data_vars.items():
            assert isinstance(var.values, np.ndarray), name
            assert np.isfinite(var.values).all() or name.startswith(("normalized", "exact")), name
    with torch.no_grad(), sm.ablate(model, sites, method="mean", reference=corrupted):
        out = model(clean)
    assert out.device.type == "cpu"
    assert {p.device.type for p in model.parameters()} == {"cpu"}
    assert {b.device.type for b in model.buffers()} == {"cpu"}


def test_type_checkers_see_every_lazy_name_as_the_object_it_is_at_run_time():
    """``sm.<name>`` is imported lazily; the ``TYPE_CHECKING`` block that tells mypy and editors
    what each name is must list exactly the lazy names, each from the module it is loaded from
    (read from the source with ast, checked against what ``sm.<name>`` returns)."""
    import ast
    import importlib

    tree = ast.parse((REPO / "scimech" / "__init__.py").read_text())
    block = next(node for node in tree.body if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test))
    declared = {
        alias.asname or alias.name: (node.module, alias.name)
        for node in block.body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }
    assert set(declared) == set(sm.__all__) - {"__version__"}
    for name, (module, original) in declared.items():
        assert name == original
        assert getattr(sm, name) is getattr(importlib.import_module(f"scimech.{module}"), original), name
