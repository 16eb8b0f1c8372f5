"""Synthetic galaxies with known truth: redshift, SEDs, dust, DECam photometry and images.

Each galaxy is a bulge plus a disk. Each component has its own rest-frame SED (a
non-negative mixture of the five kcorrect NMF templates shipped with ``kcorrect``), its
own Calzetti et al. (2000) attenuation (the dust is centrally concentrated: the bulge
sees ``A_V``, the disk ``DISK_DUST_FRACTION * A_V``), and its own Sersic profile. Light is
redshifted, dimmed with the luminosity distance of :data:`astropy.cosmology.Planck18`,
reddened by Milky-Way foreground dust (Fitzpatrick 1999, ``E(B-V)_MW``) and integrated
through the DECam g, r, i, z curves shipped by ``speclite``. Fluxes are in nanomaggies.

Images are ``(band, y, x)`` stamps at 0.262 arcsec/pixel: each component is an
analytically normalised :class:`astropy.modeling.models.Sersic2D` (3x oversampled),
scaled by its band flux, convolved with a per-band Moffat PSF, plus Gaussian sky noise
set by the survey depth. Because bulge and disk differ in SED and dust, colour gradients
carry information that total fluxes lack.

Two worlds (:data:`WORLDS`, ``make_galaxies(..., world=...)``):

* ``"standard"``: old-dominated bulges and star-forming disks, the disk sees
  ``DISK_DUST_FRACTION * A_V``. Colour gradients mix age and dust.
* ``"degenerate"``: integrated photometry cannot tell dust from redshift, the image can.
  Bulge and disk share one stellar population (no age gradient: every colour gradient
  is dust); the dust is a central screen of ``A_V`` on the bulge (exponential, mean
  0.8 mag) and a thin face-on screen on the disk whose attenuation grows with the path
  length, ``A_V,disk = A_V,face-on / cos i`` (``cos i`` from the disk's axis ratio,
  Hubble 1926, intrinsic thickness 0.2). The disk's own colours are nearly those of the
  dust-free population at ``z``; a resolved galaxy shows them, a blend does not.

In both worlds the surface brightness of a galaxy of fixed luminosity and physical size
falls as ``(1+z)^-4`` (Tolman): fluxes use the luminosity distance, sizes the angular
diameter distance (``d_L = (1+z)^2 d_A``).

Simplifications (documented, deliberate): sky-limited noise (no source Poisson noise);
catalogue flux errors from a noise-equivalent-area formula; ``shape_r`` is the r-band
flux-weighted mean of the component half-light radii; dust is a foreground screen per
component (no mixing of dust and stars).

Modules, in the order a galaxy is made: :mod:`~astro.synthetic.worlds` (the knobs and the
named worlds), :mod:`~astro.synthetic.sed` (SEDs, dust, photometry),
:mod:`~astro.synthetic.population` (drawing the galaxies: :func:`make_galaxies`),
:mod:`~astro.synthetic.images` (their stamps), :mod:`~astro.synthetic.sample` (the
:class:`GalaxySample` and its FITS / zarr files). Their public names are importable from
here.
"""

from __future__ import annotations

from .images import moffat_psf, pixel_noise, render_images, sersic_image
from .population import make_galaxies
from .sample import GalaxySample, populations
from .sed import (
    OBS_WAVE,
    ab_maggies,
    ab_magnitudes,
    arcsec_per_kpc,
    calzetti_k,
    cosmology_model,
    load_templates,
    mag_to_nmgy,
    milky_way_k,
    nmgy_to_mag,
    observed_sed,
    unit_templates,
)
from .worlds import DISK_DUST_FRACTION, WORLDS, SyntheticConfig, cos_inclination, world_config

__all__ = [
    "GalaxySample",
    "SyntheticConfig",
    "ab_maggies",
    "ab_magnitudes",
    "load_templates",
    "unit_templates",
    "make_galaxies",
    "observed_sed",
    "sersic_image",
    "moffat_psf",
    "render_images",
    "pixel_noise",
    "mag_to_nmgy",
    "nmgy_to_mag",
    "populations",
    "calzetti_k",
    "milky_way_k",
    "cosmology_model",
    "arcsec_per_kpc",
    "OBS_WAVE",
    "DISK_DUST_FRACTION",
    "WORLDS",
    "world_config",
    "cos_inclination",
]
