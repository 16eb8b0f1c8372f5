"""Training the stand-in AION (or the planted stand-in) on a galaxy sample."""

from __future__ import annotations

import numpy as np

from scimech.errors import ConfigError

from . import photoz
from .models import standin
from .models.aion import AIONRedshift
from .models.planted import ColourReadout, build_planted, train_planted
from .models.staged import train_staged

__all__ = ["train_standin", "train_standin_staged", "STAGED_KEYS"]

#: the settings :func:`train_standin_staged` reads (scripts/train_astro_standin.py's SETTINGS holds them all)
STAGED_KEYS = (
    "planted",
    "image_features",
    "codebook_size",
    "reservoir_size",
    "flux_reference",
    "dim",
    "encoder_depth",
    "decoder_depth",
    "num_heads",
    "mlp_ratio",
    "linear_init",
    "n_views",
    "phot_steps",
    "steps",
    "batch_size",
    "phot_lr",
    "lr",
    "weight_decay",
    "target_width",
    "colour_weight",
    "check_every",
    "seed",
)


def train_standin(
    train,
    *,
    epochs: int,
    batch_size: int = 64,
    seed: int = 0,
    lr: float = 3e-3,
    n_views: int = 10,
    image_features: str = "bands",
    planted: bool = False,
    log=None,
    device: str = "cpu",
):
    """Fit tokenizers on ``train`` and train a stand-in AION (mode "both"). Returns (adapter, history).

    ``image_features``: the :class:`~astro.models.standin.PatchTokenizer` features (``"bands"``
    or ``"colours"``). ``planted``: train a :class:`~astro.models.planted.PlantedAION` instead
    (image tokens reach the redshift only through head 1 of block 0; head 2 of block 0
    encodes colours and is inert), see :func:`astro.models.planted.train_planted`.
    ``device``: the torch device of the training (``--device``; the model is left there).

    ``n_views``: the epochs cycle through this many views of the training set, the measured
    one and ``n_views - 1`` with the fluxes redrawn within their errors, (e1, e2) rotated and
    size / MW E(B-V) jittered (:func:`astro.models.standin.noisy_views`). Without it the
    stand-in memorises the training galaxies (e1, e2 and E(B-V) together identify each one):
    measured at the quick size, sigma_NMAD 0.044-0.057 on the training set vs 0.108 on the test set.
    """
    if planted:
        return train_planted(
            train,
            epochs=epochs,
            batch_size=batch_size,
            seed=seed,
            lr=lr,
            n_views=n_views,
            image_features=image_features,
            log=log,
            device=device,
        )
    codecs = standin.fit_codecs(train.catalog, seed=seed)
    tok = standin.PatchTokenizer(seed=seed, features=image_features).fit(train.images)
    model = standin.build(seed=seed, codecs=codecs, basis="code")
    ad = AIONRedshift(model, codecs, tok)
    tokens = (
        standin.noisy_views(ad, train.catalog, train.images, n_views, seed=seed)
        if n_views > 1
        else ad.tokenize(train.catalog, train.images)
    )
    hist = standin.train(
        ad,
        tokens,
        np.asarray(train.catalog["z"], float),
        epochs=epochs,
        batch_size=batch_size,
        seed=seed,
        lr=lr,
        log=log,
        device=device,
    )
    hist["n_views"] = int(n_views)
    return ad, hist


def train_standin_staged(train, settings, *, validation=None, log=None, on_step=None):
    """Fit tokenizers on ``train`` and train a stand-in (or, with ``settings["planted"]``, a planted
    stand-in) in two stages (:func:`astro.models.staged.train_staged`): the training of the shipped
    stand-ins. ``settings``: every key of :data:`STAGED_KEYS`. Returns ``(adapter, history)``.

    The scalar codecs quantise ``codebook_size`` quantiles (AION-1's 1024) of a reservoir of
    ``reservoir_size`` training values, the g, i, z fluxes relative to ``flux_reference`` (colours);
    the scalar embeddings start smooth in the code with a term linear in its value
    (:func:`astro.models.standin.ordinal_init`, ``linear_init``).

    ``validation``: held-out galaxies (a :class:`~astro.synthetic.GalaxySample` of their own draw,
    never the test galaxies); with ``settings["check_every"]`` > 0 each stage scores them every that
    many steps and ends on its best checkpoint (:func:`astro.models.staged.train_staged`).
    """
    missing = [k for k in STAGED_KEYS if k not in settings]
    if missing:
        raise ConfigError(f"train_standin_staged needs the settings {missing}; see scripts/train_astro_standin.py.")
    st = dict(settings)
    seed = int(st["seed"])
    codecs = standin.fit_codecs(
        train.catalog,
        seed=seed,
        codebook_size=int(st["codebook_size"]),
        reservoir_size=int(min(st["reservoir_size"], len(train))),
        flux_reference=st["flux_reference"],
    )
    # image codes: 256 unless the settings say otherwise (the planted stand-in: 1024, docs/astro.md)
    vocab = int(st.get("image_vocab", standin.StandinConfig.image_vocab))
    tok = standin.PatchTokenizer(seed=seed, features=st["image_features"], vocab=vocab).fit(train.images)
    cfg = standin.StandinConfig(
        image_vocab=vocab,
        dim=int(st["dim"]),
        encoder_depth=int(st["encoder_depth"]),
        decoder_depth=int(st["decoder_depth"]),
        num_heads=int(st["num_heads"]),
        mlp_ratio=float(st["mlp_ratio"]),
        flux_reference=st["flux_reference"],
    )
    model = build_planted(cfg, seed=seed) if st["planted"] else standin.build(cfg, seed=seed)
    standin.ordinal_init(model, codecs, seed=seed, linear=float(st["linear_init"]))
    ad = AIONRedshift(model, codecs, tok)
    views = standin.noisy_views(ad, train.catalog, train.images, int(st["n_views"]), seed=seed)
    readout = None
    if st["planted"]:
        n_scalar = sum(1 for k in views[0] if k in standin.aion_adapter.LEGACY_SCALARS)
        readout = ColourReadout(model, photoz.colour_features(train.catalog)[:, :3], n_scalar)
    try:
        hist = train_staged(
            ad,
            views,
            np.asarray(train.catalog["z"], float),
            phot_steps=int(st["phot_steps"]),
            steps=int(st["steps"]),
            batch_size=int(st["batch_size"]),
            phot_lr=float(st["phot_lr"]),
            lr=float(st["lr"]),
            weight_decay=float(st["weight_decay"]),
            target_width=float(st["target_width"]),
            seed=seed,
            aux_loss=None if readout is None else (lambda idx: float(st["colour_weight"]) * readout.loss(idx)),
            aux_params=() if readout is None else list(readout.parameters()),
            log=log,
            on_step=on_step,
            validation=None
            if validation is None
            else (ad.tokenize(validation.catalog, validation.images), np.asarray(validation.catalog["z"], float)),
            check_every=int(st["check_every"]),
        )
    finally:
        if readout is not None:
            readout.remove()
    if st["planted"]:
        model.planted_truth()  # the inert columns stayed zero
    return ad, hist
