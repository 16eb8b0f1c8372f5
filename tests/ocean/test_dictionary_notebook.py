"""The dictionary-features notebook runs, and what it reports holds against numbers redone here.

A copy of the notebook gets one last cell that hands its objects to the test as plain arrays,
with the splice, the zero ablation and the "off" steering redone by bare forward hooks on the
encoder (not scimech's); the test then recomputes each reported value with numpy: variance
explained, L0 and dead features, the splice fidelity, the features' correlations and the
chosen feature, the top examples, the steering effect, the faithfulness gap and the fit after
realignment.
"""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import numpy as np
import pytest

NOTEBOOK = Path(__file__).resolve().parents[2] / "ocean" / "notebooks" / "dictionary_features.ipynb"

HAND_OVER = '''
import json as _json

_enc = model.get_submodule(SITE)


def _with_hook(fn):
    """The forecast (normalised units) of the test windows with the encoder's output h -> fn(h)."""
    handle = _enc.register_forward_hook(lambda module, inputs, h: fn(h))
    try:
        with torch.no_grad():
            return model(x_test).y[:, 0].numpy()
    finally:
        handle.remove()


def _cells(h):
    return h.permute(0, 2, 3, 1).reshape(-1, h.shape[1])


def _grid(flat, h):
    return flat.reshape(h.shape[0], h.shape[2], h.shape[3], h.shape[1]).permute(0, 3, 1, 2)


_unit = dic.W_dec[feature].detach() * dic.scale_out
with torch.no_grad():
    _x = torch.as_tensor(test_acts.transpose("sample", "y", "x", "channel").values).reshape(-1, dic.d_in)
    _shifted = torch.as_tensor(shifted_acts.transpose("sample", "y", "x", "channel").values).reshape(-1, dic.d_in)
    _codes = dic.encode(_x)
    _arrays = dict(
        x=_x.numpy(), codes=_codes.numpy(), recon=dic.decode(_codes).numpy(), shifted=_shifted.numpy(),
        realigned_recon=realigned(_shifted).numpy(),
        clean=_with_hook(lambda h: h), spliced=_with_hook(lambda h: _grid(dic(_cells(h)), h)),
        zeroed=_with_hook(torch.zeros_like),
        off=norm.y_inverse(cfg.target, _with_hook(
            lambda h: _grid(_cells(h) - dic.encode(_cells(h))[:, feature:feature + 1] * _unit, h))))
_arrays.update(
    features=features.transpose("sample", "y", "x", "feature").values,
    variables=np.stack([variables[v].transpose("sample", "y", "x").values for v in alignment.variable.values], -1),
    r=alignment.r.values, r_ci_low=alignment.r_ci_low.values, r_ci_high=alignment.r_ci_high.values,
    control_r=alignment.control_r.values, scored=alignment.feature.values, top=top.sample.values,
    fires=fires, clean_wm2=clean, steered_off=steered["off (scale 0)"],
    steering=steering.change_where_fires.values, angle=shift.angle.values)
np.savez({npz!r}, **_arrays)
_scalars = {{**{{k: float(shift[k]) for k in ("gap", "control_gap", "fve_in", "fve_shifted", "fve_realigned")}},
            **{{k: float(quality[k]) for k in ("fve", "l0", "dead_fraction")}},
            **{{k: float(fidelity[k]) for k in ("fidelity_vs_zero", "fidelity_vs_zero_ci_low", "fidelity_vs_zero_ci_high")}},
            "rank": int(shift.attrs["rank"]), "feature": feature, "variable": variable, "K": K,
            "variable_names": [str(v) for v in alignment.variable.values], "fve_realigned_here": fve_realigned,
            "interventions": [str(v) for v in steering.intervention.values]}}
with open({json_path!r}, "w") as _f:
    _json.dump(_scalars, _f)
'''


def _fve(x: np.ndarray, recon: np.ndarray) -> float:
    x, recon = x.astype(float), recon.astype(float)
    return 1.0 - ((x - recon) ** 2).sum() / ((x - x.mean(0)) ** 2).sum()


def _top_eigenvectors(x: np.ndarray, rank: int | None = None, energy: float = 0.95) -> np.ndarray:
    vals, vecs = np.linalg.eigh(x.T.astype(float) @ x.astype(float) / len(x))
    vals, vecs = vals[::-1].clip(min=0), vecs[:, ::-1]
    if rank is None:
        rank = int(np.argmax(np.cumsum(vals) / vals.sum() >= energy)) + 1
    return vecs[:, :rank]


@pytest.mark.slow  # a notebook top to bottom
def test_dictionary_notebook(run_notebook, tmp_path):
    """Runs the notebook (about 50 s on 2 cores) and checks what it computed."""
    nb = nbformat.read(NOTEBOOK, as_version=4)
    assert not any(c.get("outputs") for c in nb.cells if c.cell_type == "code"), "save the notebook without outputs"
    npz, json_path = tmp_path / "handed_over.npz", tmp_path / "handed_over.json"
    nb.cells.append(nbformat.v4.new_code_cell(HAND_OVER.format(npz=str(npz), json_path=str(json_path))))
    copy = tmp_path / NOTEBOOK.name
    nbformat.write(nb, copy)
    run_notebook(copy, timeout=300)
    arrays, scalars = dict(np.load(npz)), json.loads(json_path.read_text())
    for check in (_quality, _splice_fidelity, _feature_and_its_examples, _steering, _gap_and_realignment):
        check(arrays, scalars)


def _quality(a, s):
    fve = _fve(a["x"], a["recon"])
    assert fve > 0.9
    assert s["fve"] == pytest.approx(fve, abs=1e-4)
    l0 = (a["codes"] > 0).sum(1)
    assert l0.max() <= s["K"] and s["l0"] == pytest.approx(l0.mean(), abs=1e-9)
    assert s["dead_fraction"] == pytest.approx(float((a["codes"].max(0) == 0).mean()), abs=1e-9)


def _splice_fidelity(a, s):
    spliced, zeroed = (((a[k] - a["clean"]) ** 2).mean() for k in ("spliced", "zeroed"))
    fidelity = 1 - spliced / zeroed
    assert spliced < zeroed  # the splice is better than zero ablation
    assert s["fidelity_vs_zero"] == pytest.approx(fidelity, abs=1e-3)
    assert s["fidelity_vs_zero_ci_low"] <= s["fidelity_vs_zero"] <= s["fidelity_vs_zero_ci_high"]


def _feature_and_its_examples(a, s):
    feats = a["features"].reshape(-1, a["features"].shape[-1])
    var = a["variables"].reshape(-1, a["variables"].shape[-1])
    r = np.full(a["r"].shape, np.nan)
    for j in range(var.shape[1]):
        ok = np.isfinite(var[:, j])
        for i, f in enumerate(a["scored"]):
            r[i, j] = np.corrcoef(feats[ok, f], var[ok, j])[0, 1]
    np.testing.assert_allclose(a["r"], r, atol=1e-6)
    clear = np.sign(a["r_ci_low"]) == np.sign(a["r_ci_high"])
    i, j = np.unravel_index(np.argmax(np.where(clear, np.abs(r), 0)), r.shape)
    assert (int(a["scored"][i]), s["variable_names"][j]) == (s["feature"], s["variable"])
    assert a["r_ci_low"][i, j] <= a["r"][i, j] <= a["r_ci_high"][i, j]
    assert abs(r[i, j]) > abs(a["control_r"][i, j]) + 0.2  # far above what shuffled positions give
    peak = a["features"][..., s["feature"]].max((1, 2))
    assert set(a["top"]) == set(np.argsort(-peak, kind="stable")[: len(a["top"])])


def _steering(a, s):
    np.testing.assert_allclose(a["steered_off"], a["off"], rtol=1e-4, atol=1e-2)  # W m-2
    off = (a["off"] - a["clean_wm2"])[a["fires"]].mean()
    assert s["interventions"][0].startswith("off")
    assert a["steering"][0] == pytest.approx(off, rel=1e-4)
    assert abs(off) > 1.0  # the feature carries a visible part of the forecast (W m-2)
    # what follows the encoder is linear: doubling the feature mirrors switching it off
    assert a["steering"][1] == pytest.approx(-a["steering"][0], rel=1e-3)


def _gap_and_realignment(a, s):
    span = _top_eigenvectors(a["recon"])
    assert span.shape[1] == s["rank"]
    cosines = np.linalg.svd(span.T @ _top_eigenvectors(a["shifted"], rank=s["rank"]), compute_uv=False)
    gap = float(np.sqrt(np.mean(1 - np.clip(cosines, 0, 1) ** 2)))
    assert 0 <= s["gap"] <= 1
    assert s["gap"] == pytest.approx(gap, abs=1e-4)
    np.testing.assert_allclose(np.sort(a["angle"]), np.sort(np.degrees(np.arccos(np.clip(cosines, 0, 1)))), atol=0.05)
    fve = _fve(a["shifted"], a["realigned_recon"])
    assert s["fve_realigned_here"] == pytest.approx(fve, abs=1e-4)
    assert s["fve_realigned"] == pytest.approx(fve, abs=1e-4)  # run_shift reused the notebook's model and dictionary
    assert s["fve_realigned"] >= s["fve_shifted"] - 1e-9
