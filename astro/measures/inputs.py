"""The inputs every measurement shares: the test galaxies tokenised with and without their
images (same token positions), reference rows from the training set, the truth and the classical
photo-z yardsticks."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from .. import photoz
from ..models.aion import IMAGE_KEY, LEGACY_SCALARS, AIONRedshift

__all__ = ["StudyInputs", "study_inputs", "study_batches"]


@dataclass
class StudyInputs:
    """Test-set batches in both modes, truth and classical yardsticks."""

    multi: dict[str, torch.Tensor]
    phot: dict[str, torch.Tensor]
    reference: dict[str, torch.Tensor]  # multimodal batch from the training set (mean/resample)
    z: np.ndarray
    a_v: np.ndarray
    colours: np.ndarray  # (N, 3) g-r, r-i, i-z [mag]
    populations: dict[str, np.ndarray]
    z_template: np.ndarray
    z_colour: np.ndarray
    extra: dict[str, Any] = field(default_factory=dict)
    groups: np.ndarray | None = None  # (N,) object of each test row (a catalogue's; None: one object per row)

    @property
    def n_scalar_tokens(self) -> int:
        return sum(1 for k in self.multi if k in LEGACY_SCALARS)


def study_batches(
    adapter: AIONRedshift, train, test, *, n_reference: int = 256
) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """``(multi, phot, reference)`` batch dicts: the test set with and without its image
    tokens, and the first ``n_reference`` training galaxies (references of mean/resample ablation)."""
    tok = adapter.tokenize(test.catalog, test.images)
    rtok = adapter.tokenize(train.catalog[:n_reference], None if train.images is None else train.images[:n_reference])
    return adapter.batch(tok), adapter.batch(tok, masked=[IMAGE_KEY]), adapter.batch(rtok)


def study_inputs(adapter: AIONRedshift, train, test, *, n_reference: int = 256, template_kwargs=None) -> StudyInputs:
    """Tokenise train/test :class:`~astro.synthetic.GalaxySample` and run the classical photo-z."""
    multi, phot, reference = study_batches(adapter, train, test, n_reference=n_reference)
    z = np.asarray(test.catalog["z"], float)
    a_v = np.asarray(test.catalog["a_v"].value, float)
    X = photoz.colour_features(test.catalog)
    f, iv = photoz.flux_matrix(test.catalog)
    tp = photoz.TemplatePhotoZ(**(template_kwargs or {})).fit()
    # fluxes already corrected for Milky Way extinction (MW_TRANSMISSION, astro.data.catalog): E(B-V) 0, not twice
    ebv = None if test.meta.get("mw_corrected") else np.asarray(test.catalog["ebv"].value)
    z_t = tp.predict(f, iv, ebv)
    cp = photoz.ColourPhotoZ().fit(photoz.colour_features(train.catalog), np.asarray(train.catalog["z"], float))
    # rows of one object (a catalogue's repeats) stay in one probe fold (scimech.probe_sites groups=)
    groups = np.asarray(test.catalog["object"]) if "object" in test.catalog.colnames else None
    return StudyInputs(multi, phot, reference, z, a_v, X[:, :3], test.populations(), z_t, cp.predict(X), groups=groups)
