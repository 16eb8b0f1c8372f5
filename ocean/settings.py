"""The OceanCBM study settings a ``--config`` file may hold beyond the commands' options.

Kept apart from :mod:`ocean.plan` (which checks them) so that registering the ``scimech ocean``
commands imports nothing heavy: ``scimech --help`` builds every study's parser.
"""

from __future__ import annotations

__all__ = ["CONFIG_KEYS", "SYNTH_KEYS"]

#: ``{setting: what it sets}``: the :class:`~ocean.plan.StudyConfig` fields that are not options
#: of ``scimech ocean study`` (``seeds``, ``regimes``, ``epochs``, ``data`` are)
CONFIG_KEYS = {
    "synth": "synthetic ocean settings (ocean.synthetic.SynthConfig fields), added to the size's grid",
    "window": "time steps of inputs per sample (in the data's own step: months for monthly data, days for daily)",
    "lead": "time steps ahead of the forecast (1: the next step of the data, a month for monthly data)",
    "target": "dmlhc_dt (W m-2) or mlhc",
    "lr": "learning rate",
    "batch_size": "samples per batch",
    "width": "UNet width",
    "n_free": "free concepts",
    "lam_max": "concept-loss weight at the start",
    "lam_min": "concept-loss weight at the end",
    "patch": "[py, px] tiles instead of the whole grid",
    "time_chunk": "time steps per zarr chunk",
    "fractions": "train, validation, test shares",
    "loss": "l1 or l2",
    "concept_scaling": "own or target",
    "torch_threads": "torch threads per unit (0: all)",
    "head_init": "budget or random",
    "decorrelation": "free-vs-prescribed decorrelation weight",
    "product": "how the budget terms your --data lacks are computed: {kappa: m2 s-1, scheme: centred|forward, "
    "advection: centred|upwind} (ocean.data.open_store)",
}
#: what ``scimech ocean synth`` reads from a settings file
SYNTH_KEYS = {k: CONFIG_KEYS[k] for k in ("synth", "time_chunk")}
