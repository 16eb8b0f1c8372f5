"""astro: the AION-1 redshift head analysis on synthetic (or real) photometry and images.

The study, in the order it runs (``scimech astro study``, :class:`astro.study.AstroStudy`):

* :mod:`astro.plan`: the options resolved and checked (galaxies, sizes, seed, device);
* :mod:`astro.run`: the study as resumable Dask units (:mod:`astro.units`), in a run folder
  :mod:`astro.resume` decides may be resumed; samples and checkpoints through :mod:`astro.data.files`,
  the stand-in trained by :mod:`astro.training`;
* :mod:`astro.evidence`: the four measurements of :mod:`astro.measures` (advantage, probes,
  interventions, attenuation bias) on one model;
* :mod:`astro.findings`: the reference study's four findings, tested on the evidence;
* :mod:`astro.recovery`: the planted truth against what the study found;
* :mod:`astro.report`: figures (:mod:`astro.plots`) and ``report.md``.

Data and models: :mod:`astro.synthetic` (galaxies with truth), :mod:`astro.data` (your galaxies:
:mod:`astro.data.catalog`, your Legacy Survey DR10 catalogue, DESI redshift columns, what was read said
back; :mod:`astro.data.sweeps`, its files; :mod:`astro.data.cutouts` and :mod:`astro.data.cutout_folder`,
your cut-outs: band order, units, pixel scale, fluxes against the catalogue's; :mod:`astro.data.splits`,
training and test galaxies by object identity; :mod:`astro.data.files`, samples, checkpoints and results
on disk), :mod:`astro.photoz` (classical photo-z and metrics), :mod:`astro.models` (a small AION stand-in,
the planted stand-in and the AION-1 adapter, including its image codec), :mod:`astro.constants`. The
command line: :class:`astro.study.AstroStudy`.

The data layer's old flat paths (``astro.catalog``, ``astro.split``, ``from astro import files``, ...)
give the modules of :mod:`astro.data`, with a DeprecationWarning, until scimech 0.3.0
(:mod:`scimech._moved`).
"""

from scimech._moved import install as _install_old_paths
from scimech._moved import moved_attribute as _moved_attribute

_install_old_paths()  # `import astro.catalog` (an old path): astro.data.catalog, with a warning

__all__ = [
    "constants",
    "synthetic",
    "data",
    "photoz",
    "models",
    "plan",
    "units",
    "training",
    "resume",
    "run",
    "measures",
    "evidence",
    "findings",
    "recovery",
    "report",
    "study",
    "plots",
    "run_study",
]


def run_study(**options):
    """The AION-1 redshift head study from Python, as ``scimech astro study`` runs it: :func:`scimech.studies.run_study`
    with ``"astro"`` (its keywords are the command's options: ``scimech.studies.study_options("astro")``).

    Examples
    --------
    >>> import astro
    >>> result = astro.run_study(out="runs/astro/mine", planted=True, n_train=300, n_test=100, n_bootstrap=20)  # doctest: +SKIP
    >>> print(result.report)  # doctest: +SKIP
    runs/astro/mine/report.md
    >>> astro.run_study(sizes="quick")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    scimech.errors.ConfigError: run_study('astro'): no option sizes; did you mean size? ...
    """
    from scimech.studies import run_study as run  # lazy: `import astro` stays light

    return run("astro", **options)


def __getattr__(name: str):
    moved = _moved_attribute(__name__, name)  # `astro.catalog`: astro.data.catalog, with a warning
    if moved is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return moved
