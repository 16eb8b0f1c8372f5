"""The stand-ins shipped with scimech: trained once, at full size, by ``scripts/train_astro_standin.py``.

``scimech astro study`` on synthetic galaxies loads the shipped stand-in of its world instead of
training one (``--train-afresh`` trains one here). Each lives in ``astro/models/weights/<name>/``, a
checkpoint folder of :func:`astro.models.standin.save` (``config.json``, ``model.safetensors``,
``codecs/<NAME>/``, ``image_tokenizer.npz``) plus ``shipped.json``, the record written with it:

* ``settings``: every setting of the training (the script's ``SETTINGS``);
* ``world``, ``world_config`` and ``world_fingerprint``: the synthetic world it was trained in,
  fingerprinted as the study fingerprints its generator (the world's settings and a probe of
  :data:`PROBE_GALAXIES` galaxies drawn now with seed :data:`PROBE_SEED`);
* ``training_data``: the training galaxies (count, seed, fingerprint of catalogue and images);
* ``weights_fingerprint``: the content of the checkpoint files;
* ``test``: its redshift metrics on held-out test galaxies, photometry-only and multimodal, beside
  the template fit and the colour kNN on the same galaxies, with bootstrap intervals.

A shipped stand-in is refused (:func:`choose_shipped` gives the reason) when the world's settings
or the generator changed since it was trained (another ``world_fingerprint``), or when its files
no longer match their record: it would then be a model of another universe, so the study trains
one afresh and says why.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from scimech.run.fingerprint import fingerprint

__all__ = [
    "WEIGHTS",
    "RECORD_NAME",
    "PROBE_GALAXIES",
    "PROBE_SEED",
    "ShippedStandin",
    "shipped_name",
    "world_fingerprint",
    "sample_fingerprint",
    "weights_fingerprint",
    "choose_shipped",
    "Choice",
]

#: the folder of the shipped stand-ins (inside the installed package)
WEIGHTS = Path(__file__).parent / "weights"
#: the record beside each shipped checkpoint
RECORD_NAME = "shipped.json"
#: galaxies, and their seed, of the probe draw a world's fingerprint hashes (the generator as it is now)
PROBE_GALAXIES, PROBE_SEED = 32, 0
#: files of a checkpoint folder the weights fingerprint covers (the record itself is not)
_CHECKPOINT_GLOBS = ("config.json", "model.safetensors", "image_tokenizer.npz", "codecs/*/*")


def shipped_name(world: str, planted: bool = False) -> str:
    """Folder name of the shipped stand-in of ``world`` (``standin-degenerate``, ``planted-degenerate``)."""
    return f"{'planted' if planted else 'standin'}-{world}"


def sample_fingerprint(sample) -> str:
    """Fingerprint of a :class:`~astro.synthetic.GalaxySample`: every catalogue column (with its unit),
    the images and the meta."""
    cat = sample.catalog
    cols = {n: [str(getattr(cat[n], "unit", None)), np.asarray(cat[n])] for n in cat.colnames}
    return fingerprint(cols, sample.images, dict(sample.meta))


def world_fingerprint(world: str) -> str:
    """Fingerprint of a synthetic world as the generator draws it now: its
    :class:`~astro.synthetic.SyntheticConfig` and :data:`PROBE_GALAXIES` galaxies of seed :data:`PROBE_SEED`."""
    from ..synthetic import make_galaxies, world_config  # lazy: astropy and scipy

    probe = make_galaxies(PROBE_GALAXIES, seed=PROBE_SEED, world=world)
    return fingerprint(dataclasses.asdict(world_config(world)), sample_fingerprint(probe))


def weights_fingerprint(folder: str | Path) -> str:
    """Fingerprint of the checkpoint files of ``folder`` (weights, codecs, image tokenizer, config)."""
    folder = Path(folder)
    files = sorted(p for g in _CHECKPOINT_GLOBS for p in folder.glob(g) if p.is_file())
    return fingerprint({str(p.relative_to(folder)): p for p in files})


@dataclass(frozen=True)
class ShippedStandin:
    """A shipped stand-in: its checkpoint ``folder`` and the ``record`` written with it (``shipped.json``)."""

    name: str
    folder: Path
    record: dict[str, Any]

    @classmethod
    def read(cls, folder: str | Path) -> ShippedStandin:
        folder = Path(folder)
        return cls(folder.name, folder, json.loads((folder / RECORD_NAME).read_text()))

    def summary(self) -> str:
        """One line a report can print: what was loaded, how it was trained, how good it is."""
        r, t = self.record, self.record.get("test", {})
        line = (
            f"shipped stand-in {self.name} (astro/models/weights; trained by scripts/train_astro_standin.py on "
            f"{r['training_data']['n_galaxies']} synthetic galaxies of the {r['world']} world, "
            f"{r['settings']['phot_steps']} photometry-only + {r['settings']['steps']} steps"
        )
        kept = [r.get("training", {}).get(f"best_step_{stage}") for stage in ("photometry", "both")]
        if None not in kept:
            line += f", each stage ending on its best checkpoint on held-out galaxies (steps {kept[0]} and {kept[1]})"
        line += ")"
        phot = t.get("photometry", {}).get("sigma_nmad")
        if phot:
            line += f"; on the quick study's seed-0 test galaxies: sigma_NMAD photometry-only {phot['value']:.4f}"
            knn = t.get("colour_knn", {}).get("sigma_nmad")
            if knn:
                line += f", colour kNN {knn['value']:.4f}"
            out, knn_out = (t.get(k, {}).get("outlier_fraction") for k in ("photometry", "colour_knn"))
            if out and knn_out:
                line += f"; outlier fraction {out['value']:.1%}, colour kNN {knn_out['value']:.1%}"
        return line


@dataclass(frozen=True)
class Choice:
    """What a synthetic study runs: ``shipped`` (loaded), or ``None`` with ``reason`` (trained here)."""

    shipped: ShippedStandin | None
    reason: str


def choose_shipped(world: str, planted: bool, image_features: str, folder: Path | None = None) -> Choice:
    """The shipped stand-in of ``world`` (planted or not) if it may be studied there, else why not.

    Refused (``Choice(None, reason)``) when none was shipped for that world, when it was trained with
    other image tokens (``image_features``), when its files no longer match their record, or when the
    world's settings or the generator changed since it was trained (another :func:`world_fingerprint`).
    """
    name = shipped_name(world, planted)
    folder = Path(folder) if folder is not None else WEIGHTS / name
    what = f"the shipped {'planted ' if planted else ''}stand-in of the {world} world"
    if not (folder / RECORD_NAME).is_file():
        return Choice(None, f"no stand-in is shipped for the {world} world{' (planted)' if planted else ''}")
    shipped = ShippedStandin.read(folder)
    rec = shipped.record
    if rec["settings"].get("image_features") != image_features:
        return Choice(
            None,
            f"{what} reads {rec['settings'].get('image_features')!r} patch tokens, this study asks for "
            f"{image_features!r} (--image-features)",
        )
    if weights_fingerprint(folder) != rec["weights_fingerprint"]:
        return Choice(
            None,
            f"{what} in {folder} does not match its record (weights fingerprint "
            f"{weights_fingerprint(folder)}, recorded {rec['weights_fingerprint']}): its files were changed; "
            "reinstall scimech or rerun scripts/train_astro_standin.py",
        )
    now = world_fingerprint(world)
    if now != rec["world_fingerprint"]:
        return Choice(
            None,
            f"{what} was trained in a world of fingerprint {rec['world_fingerprint']}; the {world} world "
            f"is now {now} (its settings or the generator changed), so those weights model another "
            "universe; rerun scripts/train_astro_standin.py to ship new ones",
        )
    return Choice(shipped, "")
