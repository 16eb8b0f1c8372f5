"""
Astronomy: a catalogue of several sweep files
=============================================

The Legacy Survey DR10 catalogue comes as one FITS "sweep" file per 10 x 5 degree patch of
sky. :func:`astro.data.catalog.read_legacy_survey` reads a folder of them (or a list, or a glob)
as one catalogue: the survey's column names and units (nanomaggies, arcsec, mag), the rows
that cannot be used dropped and counted by reason, and each row's file kept.

The two files here are written from synthetic galaxies (:func:`astro.synthetic.make_galaxies`,
whose redshifts are known) with DR10's names, units and file naming; yours go where
``folder`` is.
"""

import tempfile
from pathlib import Path

import astropy.units as u
import matplotlib.pyplot as plt
import numpy as np
from astropy.io import fits

from astro.data.catalog import read_legacy_survey
from astro.synthetic import make_galaxies

folder = Path(tempfile.mkdtemp()) / "dr10-south"
folder.mkdir()
patches = {"sweep-150p000-160p005.fits": (150, 0), "sweep-160p000-170p005.fits": (160, 0)}
rng = np.random.default_rng(0)
for i, (name, (ra0, dec0)) in enumerate(patches.items()):
    cat = make_galaxies(300, seed=i).catalog
    n = len(cat)
    ivar_r = cat["flux_ivar_r"].value.copy()
    ivar_r[:12] = 0.0  # twelve galaxies without an r-band measurement
    cols = [
        fits.Column(name="RELEASE", format="J", array=np.full(n, 10000)),
        fits.Column(name="BRICKID", format="J", array=np.full(n, 300 + i)),
        fits.Column(name="OBJID", format="J", array=np.arange(n)),
        fits.Column(name="TYPE", format="3A", array=np.where(cat["shape_r"].value > 0, "EXP", "PSF")),
        fits.Column(name="RA", format="D", unit="deg", array=ra0 + 10 * rng.random(n)),
        fits.Column(name="DEC", format="D", unit="deg", array=dec0 + 5 * rng.random(n)),
    ]
    for b in "GRIZ":
        flux = cat[f"flux_{b.lower()}"].to_value(u.nmgy)
        ivar = ivar_r if b == "R" else cat[f"flux_ivar_{b.lower()}"].value
        cols.append(fits.Column(name=f"FLUX_{b}", format="E", unit="nanomaggy", array=flux))
        cols.append(fits.Column(name=f"FLUX_IVAR_{b}", format="E", unit="1/nanomaggy^2", array=ivar))
    cols += [
        fits.Column(name="SHAPE_R", format="E", unit="arcsec", array=cat["shape_r"].value),
        fits.Column(name="SHAPE_E1", format="E", array=np.asarray(cat["shape_e1"])),
        fits.Column(name="SHAPE_E2", format="E", array=np.asarray(cat["shape_e2"])),
        fits.Column(name="EBV", format="E", unit="mag", array=cat["ebv"].value),
        fits.Column(name="Z", format="D", array=np.asarray(cat["z"])),
    ]
    fits.HDUList([fits.PrimaryHDU(), fits.BinTableHDU.from_columns(cols)]).writeto(folder / name)
print(sorted(p.name for p in folder.iterdir()))

# %%
# The folder, read as one catalogue; what was read and what was dropped is said back:
sample = read_legacy_survey(folder)
cat = sample.catalog
print(len(cat), "galaxies;", sample.meta["n_rejected"], "rows dropped:", sample.meta["rejected"])
for key, said in sample.meta["reading"].sections["files"].items():
    print(f"{key}: {said}")

# %%
# Colour against redshift, each galaxy coloured by the sweep it came from (``catalog["file"]``):
# the photometry a redshift model has to read.
g_r = -2.5 * np.log10(cat["flux_g"].value / cat["flux_r"].value)
r_z = -2.5 * np.log10(cat["flux_r"].value / cat["flux_z"].value)
files = np.asarray(cat["file"])  # the index of each row's file, in the order of the reading's files
names = [key for key in sample.meta["reading"].sections["files"] if key != "how combined"]
fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8))
for f in np.unique(files):
    at = files == f
    left.scatter(cat["z"][at], g_r[at], s=5, alpha=0.6, label=names[int(f)])
left.set(xlabel="redshift z", ylabel="g - r [mag]")
left.legend(fontsize="small", markerscale=3)
sc = right.scatter(r_z, g_r, c=cat["z"], s=5, cmap="plasma")
fig.colorbar(sc, ax=right, label="redshift z")
right.set(xlabel="r - z [mag]", ylabel="g - r [mag]", title="colour-colour, by redshift")
fig.tight_layout()
