"""Adapter for AION-1 (``polymathic-aion``): local loading, Legacy Survey inputs, ``tok_z``, heads.

Nothing is fetched at run time. A checkpoint folder holds::

    config.json                  # the aion.AION config dict (domains_in, dim, ...)
    model.safetensors            # the transformer weights (loaded strictly)
    codecs/<NAME>/config.json    # one folder per modality codec, NAME = modality.name
    codecs/<NAME>/model.safetensors   (e.g. FLUX_G, SHAPE_R, EBV, Z, image)

The image codec (``codecs/image/``, aion's ``ImageCodec``, a MagViT autoencoder with a
finite-scalar quantizer) is wrapped by :class:`ImageCodecTokenizer`, which turns Legacy
Survey cut-outs [nanomaggy per pixel, bands DES-G/R/I/Z] into ``tok_image`` tokens.

This is the layout of ``polymathic-ai/aion-base`` after download. The package's own
local-folder codec loading does not work as written, so each codec is built from its
class (``aion.codecs.config.MODALITY_CODEC_MAPPING``) and ``config.json`` and its
safetensors loaded here. Redshift is read from the ``tok_z`` logits as the expectation
over the Z codec's buckets, decoded from the codec at run time (never hard-coded).

Sites: encoder block ``l`` head ``h`` is the scimech site ``"encoder.{l}.attn.heads[{h}]"``
(the slice ``h*dh:(h+1)*dh`` of the input of ``encoder.{l}.attn.proj``).
"""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import astropy.units as u
import numpy as np
import torch
from aion import modalities as aion_modalities
from aion.codecs.config import MODALITY_CODEC_MAPPING
from aion.modalities import LegacySurveyImage, Z
from safetensors import safe_open
from safetensors.torch import load_file, save_model
from safetensors.torch import load_model as st_load
from torch import nn

from scimech.capture.batches import batch_size_of, iter_batches
from scimech.causal.metrics import Metric
from scimech.errors import CheckpointError, ConfigError, DataValidationError

__all__ = [
    "READOUTS",
    "LEGACY_SCALARS",
    "IMAGE_KEY",
    "Z_KEY",
    "CONFIG_NAME",
    "WEIGHTS_NAME",
    "DES_BANDS",
    "save_checkpoint",
    "load_model",
    "load_codecs",
    "DTYPES",
    "check_dtype",
    "rows_per_pass",
    "TOKENS_PER_PASS",
    "load_image_codec",
    "load_image_tokenizer",
    "ImageCodecTokenizer",
    "codec_buckets",
    "AIONRedshift",
    "head_site",
    "site_to_head",
    "num_encoder_tokens",
    "scalar_values",
]

CONFIG_NAME = "config.json"
WEIGHTS_NAME = "model.safetensors"
Z_KEY = "tok_z"
IMAGE_KEY = "tok_image"
#: token key -> (aion modality class name, catalogue column, unit) for Legacy Survey scalars.
LEGACY_SCALARS: dict[str, tuple[str, str, str]] = {
    "tok_flux_g": ("LegacySurveyFluxG", "flux_g", "nmgy"),
    "tok_flux_r": ("LegacySurveyFluxR", "flux_r", "nmgy"),
    "tok_flux_i": ("LegacySurveyFluxI", "flux_i", "nmgy"),
    "tok_flux_z": ("LegacySurveyFluxZ", "flux_z", "nmgy"),
    "tok_shape_r": ("LegacySurveyShapeR", "shape_r", "arcsec"),
    "tok_shape_e1": ("LegacySurveyShapeE1", "shape_e1", ""),
    "tok_shape_e2": ("LegacySurveyShapeE2", "shape_e2", ""),
    "tok_ebv": ("LegacySurveyEBV", "ebv", "mag"),
}
#: aion band names of the Legacy Survey g, r, i, z images (DECam; nanomaggy per pixel).
DES_BANDS: tuple[str, ...] = ("DES-G", "DES-R", "DES-I", "DES-Z")
MASK_PREFIX = "mask/"
#: point estimates of the binned redshift PDF (:meth:`AIONRedshift.point_z`)
READOUTS = ("mean", "median", "mode")
_SITE = re.compile(r"^encoder\.(\d+)\.attn\.heads\[(\d+)\]$")
#: ``--dtype`` names -> the transformer's floating-point type in the forward passes (``float32`` the
#: default; the image codec, the redshift read-out and every activation handed to a probe stay float32)
DTYPES: dict[str, torch.dtype] = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def _runs_in(dtype: torch.dtype, device: str | torch.device) -> bool:
    """Whether the operations of a transformer block (matmul, layer norm, softmax attention) run in
    ``dtype`` on ``device``: torch builds without half-precision CPU kernels raise on them."""
    try:
        x = torch.ones(2, 4, 8, dtype=dtype, device=device)
        y = torch.nn.functional.layer_norm(x @ x.transpose(-1, -2) @ x, (8,))
        torch.nn.functional.scaled_dot_product_attention(y, y, y)
        return True
    except (RuntimeError, NotImplementedError):
        return False


def check_dtype(name: str, device: str | torch.device = "cpu") -> torch.dtype:
    """The torch dtype of a ``--dtype`` name, checked to run on ``device``; ``ConfigError`` (with the
    fix) for an unknown name or a half precision the device cannot compute in."""
    if name not in DTYPES:
        raise ConfigError(f"dtype must be one of {', '.join(DTYPES)}; got {name!r}.")
    if not _runs_in(DTYPES[name], device):
        raise ConfigError(
            f"--dtype {name} does not run on {device} with this torch ({torch.__version__}): its "
            f"{name} matrix products are not implemented there. Use --dtype bfloat16 (half the "
            "memory, on CPUs too) or --dtype float32, or run on a GPU (--device cuda)."
        )
    return DTYPES[name]


def head_site(block: int, head: int) -> str:
    """scimech site name of head ``head`` of encoder block ``block``."""
    return f"encoder.{int(block)}.attn.heads[{int(head)}]"


def site_to_head(site: str) -> tuple[int, int]:
    """``"encoder.0.attn.heads[3]"`` -> ``(0, 3)``."""
    m = _SITE.match(site)
    if not m:
        raise ConfigError(f"'{site}' is not an encoder head site; expected 'encoder.<block>.attn.heads[<head>]'.")
    return int(m.group(1)), int(m.group(2))


def scalar_values(catalog, flux_reference: str | None = None, keys=None) -> dict[str, np.ndarray]:
    """The values the scalar codecs of ``keys`` (default all of :data:`LEGACY_SCALARS`) quantise, float32.

    Each catalogue column in its codec's unit; with ``flux_reference`` (a band, as a stand-in with
    that config key reads them), the other bands' fluxes divided by that band's (a flux ratio: a colour).
    """
    out: dict[str, np.ndarray] = {}
    for key in LEGACY_SCALARS if keys is None else keys:
        _, col, unit = LEGACY_SCALARS[key]
        if col not in catalog.colnames:
            raise DataValidationError(f"catalogue lacks '{col}' needed for {key}.")
        v = u.Quantity(catalog[col]).to_value(u.Unit(unit)) if unit else np.asarray(catalog[col], float)
        if flux_reference and col.startswith("flux_") and col != f"flux_{flux_reference}":
            ref = u.Quantity(catalog[f"flux_{flux_reference}"]).to_value(u.nmgy)
            v = v / np.where(ref > 0, ref, np.nan)
            v = np.where(np.isfinite(v), v, 0.0)  # no positive reference flux: the codec's floor
        out[key] = np.asarray(v, np.float32)
    return out


def _modality(name: str):
    return getattr(aion_modalities, name)


def _modality_for_key(token_key: str):
    for name in aion_modalities.__all__:
        cls = getattr(aion_modalities, name)
        if getattr(cls, "token_key", None) == token_key:
            return cls
    raise ConfigError(f"No aion modality has token_key '{token_key}'.")


# ---------------------------------------------------------------- save / load
def save_checkpoint(
    model: nn.Module,
    folder: str | Path,
    config: Mapping[str, Any] | None = None,
    codecs: Mapping[str, nn.Module] | None = None,
) -> Path:
    """Write ``config.json`` + ``model.safetensors`` (+ ``codecs/<NAME>/``) to ``folder``.

    Parameters
    ----------
    model
        An ``aion.AION`` (or subclass).
    config
        Its config dict; default the one the model was built with.
    codecs
        ``{token_key: codec}``; each is saved under ``codecs/<modality.name>/``.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    cfg = dict(config if config is not None else getattr(model, "_hub_mixin_config", None) or {})
    if not cfg:
        raise ConfigError("save_checkpoint needs the model's config dict (pass config=...).")
    (folder / CONFIG_NAME).write_text(json.dumps(cfg, indent=2, sort_keys=True))
    save_model(model, str(folder / WEIGHTS_NAME))
    for key, codec in (codecs or {}).items():
        mod = _modality_for_key(key)
        sub = folder / "codecs" / mod.name
        sub.mkdir(parents=True, exist_ok=True)
        ccfg = getattr(codec, "_hub_mixin_config", None)
        if not ccfg:
            raise ConfigError(f"codec for {key} has no recorded init config; build it from its class with keywords.")
        (sub / CONFIG_NAME).write_text(json.dumps(dict(ccfg), indent=2, sort_keys=True))
        save_model(codec, str(sub / WEIGHTS_NAME))
    return folder


def _require(folder: Path, names: Sequence[str], what: str) -> None:
    if not folder.is_dir():
        raise CheckpointError(
            f"{what}: folder {folder} does not exist. Download the checkpoint "
            "(e.g. polymathic-ai/aion-base) to a local folder and pass its path."
        )
    missing = [n for n in names if not (folder / n).is_file()]
    if missing:
        raise CheckpointError(
            f"{what}: missing {', '.join(missing)} in {folder}. Expected "
            f"{', '.join(names)} there (as in the downloaded repository)."
        )


def load_model(
    folder: str | Path, *, model_class: type | None = None, device: str | torch.device = "cpu", dtype: str = "float32"
) -> nn.Module:
    """Build the AION transformer from ``config.json`` and load ``model.safetensors`` strictly.

    Parameters
    ----------
    folder
        Checkpoint folder (see module docstring).
    model_class
        Class to build (default ``aion.AION``; the config key ``"scimech_class"`` may name
        ``"astro.models.standin.StandinAION"``).
    dtype
        Floating-point type of the weights and the forward passes (:data:`DTYPES`; cast after
        loading, so the float32 file serves every dtype).

    Raises
    ------
    CheckpointError
        Missing folder/files, unreadable config, or weights that do not match the config
        (missing or unexpected tensors are listed).
    """
    folder = Path(folder)
    _require(folder, (CONFIG_NAME, WEIGHTS_NAME), "AION checkpoint")
    try:
        cfg = json.loads((folder / CONFIG_NAME).read_text())
    except json.JSONDecodeError as e:
        raise CheckpointError(f"{folder / CONFIG_NAME} is not valid JSON ({e}); re-download it.") from None
    if model_class is None:
        name = cfg.get("scimech_class", "aion.AION")
        mod, _, cls = name.rpartition(".")
        model_class = getattr(__import__(mod, fromlist=[cls]), cls)
    try:
        model = model_class(cfg)
    except (KeyError, TypeError) as e:
        raise CheckpointError(f"{folder / CONFIG_NAME} does not describe a {model_class.__name__}: {e!r}.") from None
    try:
        missing, unexpected = st_load(model, str(folder / WEIGHTS_NAME), strict=False)
    except Exception as e:  # corrupt / truncated file
        raise CheckpointError(
            f"Cannot read {folder / WEIGHTS_NAME}: {e}. The file is corrupt or partial; re-download it."
        ) from None
    if missing or unexpected:
        raise CheckpointError(
            f"{folder / WEIGHTS_NAME} does not match {folder / CONFIG_NAME}: "
            f"missing {sorted(missing)[:10]}{' ...' if len(missing) > 10 else ''}, "
            f"unexpected {sorted(unexpected)[:10]}{' ...' if len(unexpected) > 10 else ''}. "
            "Use the config.json that came with these weights."
        )
    return model.to(device=device, dtype=check_dtype(dtype, device)).eval()


def load_codecs(folder: str | Path, token_keys: Sequence[str]) -> dict[str, nn.Module]:
    """Load the codecs of ``token_keys`` from ``folder/codecs/<NAME>/`` (class from the aion mapping).

    Raises
    ------
    CheckpointError
        Naming every missing codec file and where it belongs.
    """
    folder = Path(folder)
    out: dict[str, nn.Module] = {}
    problems = []
    for key in token_keys:
        if key == IMAGE_KEY:
            out[key] = load_image_codec(folder)
            continue
        mod = _modality_for_key(key)
        sub = folder / "codecs" / mod.name
        missing = [n for n in (CONFIG_NAME, WEIGHTS_NAME) if not (sub / n).is_file()]
        if missing:
            problems.append(f"{key}: {', '.join(str(sub / n) for n in missing)}")
            continue
        cls = MODALITY_CODEC_MAPPING[mod]
        try:
            cfg = json.loads((sub / CONFIG_NAME).read_text())
            codec = cls(**cfg)
        except (json.JSONDecodeError, TypeError, ValueError) as e:
            raise CheckpointError(
                f"codec {key}: {sub / CONFIG_NAME} is corrupt or not a codec config ({e}). "
                "Download that codec folder again."
            ) from None
        try:
            state = load_file(str(sub / WEIGHTS_NAME))
        except Exception as e:  # safetensors raises its own SafetensorError on a truncated file
            raise CheckpointError(
                f"codec {key}: {sub / WEIGHTS_NAME} is corrupt or truncated ({e}). Download that codec folder again."
            ) from None
        # buffers created as None (e.g. reservoir quantiles) are sized from the file
        for name, t in state.items():
            target = name.replace("quantizer", "_quantizer", 1) if name.startswith("quantizer") else name
            owner, _, leaf = target.rpartition(".")
            m = codec.get_submodule(owner) if owner else codec
            if leaf in m._buffers and (m._buffers[leaf] is None or m._buffers[leaf].shape != t.shape):
                m._buffers[leaf] = torch.empty_like(t)
        try:
            codec.load_state_dict(state, strict=True)
        except RuntimeError as e:
            raise CheckpointError(f"codec {key} in {sub} does not match its config: {e}") from None
        codec._modality = mod
        out[key] = codec.eval()
    if problems:
        raise CheckpointError(
            "Missing codec files (each codec lives in codecs/<NAME>/ next to model.safetensors): " + "; ".join(problems)
        )
    return out


# ---------------------------------------------------------------- the image codec
def _image_codec_dir(folder: Path) -> Path:
    return Path(folder) / "codecs" / _modality_for_key(IMAGE_KEY).name


def load_image_codec(folder: str | Path, *, device: str | torch.device = "cpu") -> nn.Module:
    """aion's ``ImageCodec`` from ``folder/codecs/image/{config.json, model.safetensors}``.

    The codec is built from its class (``MODALITY_CODEC_MAPPING[LegacySurveyImage]``) with
    the constructor arguments found in ``config.json`` (keys the constructor does not take,
    such as bookkeeping written by the hub, are ignored: the strict weight loading below
    catches any architecture they might have described) and the safetensors are loaded
    strictly: every missing or unexpected tensor is an error.

    Parameters
    ----------
    folder
        The AION checkpoint folder (the one holding ``config.json``, ``model.safetensors``
        and ``codecs/``), not the codec folder itself.

    Raises
    ------
    CheckpointError
        The codec folder or one of its files is missing (each is named with the path where
        it belongs), the config is not JSON or lacks ``quantizer_levels``, or the weights are
        unreadable or do not match the config.
    """
    folder = Path(folder)
    mod = _modality_for_key(IMAGE_KEY)
    sub = _image_codec_dir(folder)
    if not folder.is_dir():
        raise CheckpointError(
            f"image codec: checkpoint folder {folder} does not exist. Download the checkpoint "
            "(e.g. polymathic-ai/aion-base) to a local folder and pass its path."
        )
    missing = [str(sub / n) for n in (CONFIG_NAME, WEIGHTS_NAME) if not (sub / n).is_file()]
    if missing:
        what = "the folder" if not sub.is_dir() else "the file(s)"
        raise CheckpointError(
            f"image codec: missing {', '.join(missing)}. The image codec of an AION checkpoint "
            f"lives in codecs/{mod.name}/ next to model.safetensors ({what} did not come with the "
            f"download); copy codecs/{mod.name}/ from the checkpoint repository into {folder}."
        )
    try:
        cfg = json.loads((sub / CONFIG_NAME).read_text())
        if not isinstance(cfg, dict):
            raise ValueError(f"expected a JSON object, got {type(cfg).__name__}")
    except (json.JSONDecodeError, UnicodeDecodeError, ValueError) as e:
        raise CheckpointError(
            f"image codec: {sub / CONFIG_NAME} is corrupt or not a codec config ({e}). "
            f"Download codecs/{mod.name}/ again."
        ) from None
    cls = MODALITY_CODEC_MAPPING[mod]
    params = [p for p in inspect.signature(cls.__init__).parameters if p != "self"]
    if "quantizer_levels" not in cfg:
        raise CheckpointError(
            f"image codec: {sub / CONFIG_NAME} has no 'quantizer_levels' (found keys "
            f"{sorted(cfg)}); it is not an {cls.__name__} config. Download codecs/{mod.name}/ again."
        )
    try:
        codec = cls(**{k: v for k, v in cfg.items() if k in params})
    except (TypeError, ValueError, RuntimeError) as e:
        raise CheckpointError(f"image codec: {sub / CONFIG_NAME} does not describe an {cls.__name__} ({e}).") from None
    try:
        with safe_open(str(sub / WEIGHTS_NAME), framework="pt") as fh:  # reads the header: a torn file fails
            list(fh.keys())
    except Exception as e:  # safetensors raises its own error types on a torn file
        raise CheckpointError(
            f"image codec: {sub / WEIGHTS_NAME} is corrupt or truncated ({e}). Download codecs/{mod.name}/ again."
        ) from None
    try:
        missing_t, unexpected = st_load(codec, str(sub / WEIGHTS_NAME), strict=False)
    except RuntimeError as e:  # tensors of other shapes than the config builds
        detail = "; ".join(line.strip() for line in str(e).splitlines()[1:4])
        raise CheckpointError(
            f"image codec: {sub / WEIGHTS_NAME} does not match {sub / CONFIG_NAME} ({detail} "
            "...). Use the config.json that came with these weights."
        ) from None
    except Exception as e:
        raise CheckpointError(
            f"image codec: {sub / WEIGHTS_NAME} is corrupt or truncated ({e}). Download codecs/{mod.name}/ again."
        ) from None
    if missing_t or unexpected:
        raise CheckpointError(
            f"image codec: {sub / WEIGHTS_NAME} does not match {sub / CONFIG_NAME}: missing "
            f"{sorted(missing_t)[:10]}, unexpected {sorted(unexpected)[:10]}. Use the config.json "
            "that came with these weights."
        )
    codec._modality = mod
    return codec.to(device).eval()


class ImageCodecTokenizer:
    """Legacy Survey cut-outs -> ``tok_image`` tokens through aion's ``ImageCodec``.

    Parameters
    ----------
    codec
        An ``aion.codecs.ImageCodec`` (e.g. from :func:`load_image_codec`).
    bands
        aion band names of the image channels, in order (default DES-G, DES-R, DES-I, DES-Z:
        Legacy Survey g, r, i, z in nanomaggy per pixel at 0.262 arcsec).
    crop
        Side [pixel] of the cut-out the codec works on (AION-1: 96). Larger images are
        centre-cropped by the codec; smaller ones are zero-padded symmetrically to ``crop``
        here (0 is the sky level of a background-subtracted cut-out), keeping the galaxy at
        the centre pixel ``crop / 2 - 0.5`` when it was at ``size / 2 - 0.5``.
    n_tokens
        Tokens per image the model expects (default ``LegacySurveyImage.num_tokens``, 576 =
        24 x 24). The codec's output is checked against it and a mismatch is an error, never
        a silent truncation; pass the same count to the model (:meth:`AIONRedshift.forward`
        does, via :func:`num_encoder_tokens`).
    batch_size
        Images per codec forward.
    """

    def __init__(
        self,
        codec: nn.Module,
        *,
        bands: Sequence[str] = DES_BANDS,
        crop: int = 96,
        n_tokens: int | None = None,
        batch_size: int = 64,
    ):
        self.codec = codec.eval()
        self.bands = list(bands)
        self.crop = int(crop)
        self.n_tokens = int(n_tokens if n_tokens is not None else _modality_for_key(IMAGE_KEY).num_tokens)
        self.batch_size = int(batch_size)

    def _prepare(self, images) -> torch.Tensor:
        x = torch.as_tensor(np.asarray(images, dtype=np.float32))
        if x.ndim != 4 or x.shape[1] != len(self.bands):
            raise DataValidationError(
                f"images must be (N, {len(self.bands)}, H, W) in bands {self.bands} "
                f"[nanomaggy per pixel]; got shape {tuple(x.shape)}."
            )
        if len(x) == 0:
            raise DataValidationError("no images to tokenise (N = 0).")
        if not torch.isfinite(x).all():
            bad = int((~torch.isfinite(x)).flatten(1).any(1).sum())
            raise DataValidationError(
                f"{bad} image(s) hold NaN or inf pixels; replace them (e.g. by 0, the sky "
                "level, with the pixel masked) before tokenising."
            )
        h, w = x.shape[-2:]
        if h < self.crop or w < self.crop:
            ph, pw = max(0, self.crop - h), max(0, self.crop - w)
            x = torch.nn.functional.pad(x, (pw // 2, pw - pw // 2, ph // 2, ph - ph // 2))
        return x

    @torch.no_grad()
    def __call__(self, images) -> torch.Tensor:
        """Tokens ``(N, n_tokens)`` (int64) of images ``(N, bands, H, W)`` [nanomaggy per pixel]."""
        x = self._prepare(images)
        dev = next(self.codec.parameters()).device
        out = []
        for s in range(0, len(x), self.batch_size):
            # the codec clamps and rescales its input in place: give it a copy of the batch
            chunk = x[s : s + self.batch_size].clone().to(dev)
            out.append(self.codec.encode(LegacySurveyImage(flux=chunk, bands=list(self.bands))).long().cpu())
        tok = torch.cat(out).reshape(len(x), -1)
        if tok.shape[1] != self.n_tokens:
            raise ConfigError(
                f"the image codec gave {tok.shape[1]} tokens per image, the model expects "
                f"{self.n_tokens}; use {self.crop}x{self.crop} cut-outs with the codec the "
                "checkpoint came with, or set n_tokens to the model's image grid."
            )
        return tok


def load_image_tokenizer(folder: str | Path, *, device: str | torch.device = "cpu", **kwargs) -> ImageCodecTokenizer:
    """:class:`ImageCodecTokenizer` around the image codec of a checkpoint folder (see :func:`load_image_codec`)."""
    return ImageCodecTokenizer(load_image_codec(folder, device=device), **kwargs)


def codec_buckets(codec: nn.Module) -> torch.Tensor:
    """Values of every code of a scalar codec, decoded through the codec itself."""
    q = codec.quantizer
    n = q.codebook_size
    with torch.no_grad():
        return codec.decode(torch.arange(n)).value.reshape(-1).float()


def num_encoder_tokens(tokens: Mapping[str, torch.Tensor]) -> int:
    """Number of encoder tokens of an input dict (1 per scalar, H*W per image)."""
    n = 0
    for t in tokens.values():
        n += int(np.prod(t.shape[1:])) if t.dim() >= 2 else 1
    return n


# ---------------------------------------------------------------- the adapter
#: tokens x galaxies per forward pass of the study (AION-1's 8 + 576 tokens: 28 galaxies, the
#: attention scores of 12 heads about 0.5 GB in float32); never more than the caller's maximum
TOKENS_PER_PASS = 2**14


def rows_per_pass(batch: Mapping[str, Any], max_rows: int = 256) -> int:
    """Galaxies per forward pass for a batch dict: :data:`TOKENS_PER_PASS` tokens, at most ``max_rows``
    (the stand-in's 44 tokens: ``max_rows``)."""
    n_tok = sum(int(np.prod(v.shape[1:])) or 1 for k, v in batch.items() if not k.startswith(MASK_PREFIX))
    return int(max(1, min(int(max_rows), TOKENS_PER_PASS // max(1, n_tok))))


def model_device(model: nn.Module) -> torch.device:
    """The device of a model's parameters (the CPU for a model without any)."""
    return next((p.device for p in model.parameters()), torch.device("cpu"))


class AIONRedshift:
    """Run an AION-style model on Legacy Survey inputs and read the redshift.

    Parameters
    ----------
    model
        ``aion.AION`` (or :class:`astro.models.standin.StandinAION`).
    codecs
        ``{token_key: codec}`` for the scalars used and for ``tok_z`` (required to read z).
    image_tokenizer
        Callable ``images (N, 4, H, W) [nmgy] -> LongTensor (N, n_tokens)`` for ``tok_image``
        (the real ImageCodec wrapped, or the stand-in's patch tokenizer).

    Notes
    -----
    Inputs are a flat batch dict ``{key: LongTensor, "mask/<key>": BoolTensor}`` (flat so
    that scimech's batching, slicing and tiling see the batch dimension); a modality that is present but masked (True) is invisible to every attention layer
    (AION masks it as a key), so "photometry only" and "photometry + image" runs share
    token positions and heads can be patched between them.
    """

    def __init__(self, model: nn.Module, codecs: Mapping[str, nn.Module], image_tokenizer=None):
        if Z_KEY not in codecs:
            raise ConfigError("AIONRedshift needs the Z codec (codecs['tok_z']) to read redshift buckets.")
        self.model = model
        self.codecs = dict(codecs)
        self.image_tokenizer = image_tokenizer

    def to(self, device: str | torch.device) -> AIONRedshift:
        """Move the model to ``device`` (``--device``); batches follow it in :meth:`forward`. Returns self."""
        self.model.to(device)
        return self

    @property
    def dtype(self) -> torch.dtype:
        """The floating-point type the transformer computes in (``--dtype``)."""
        return next((p.dtype for p in self.model.parameters() if p.is_floating_point()), torch.float32)

    @classmethod
    def from_folder(
        cls,
        folder: str | Path,
        *,
        scalar_keys: Sequence[str] = tuple(LEGACY_SCALARS),
        image_tokenizer=None,
        image_codec: bool | None = None,
        device: str = "cpu",
        dtype: str = "float32",
    ) -> AIONRedshift:
        """Load model + codecs (``scalar_keys`` and ``tok_z``) from a local checkpoint folder.

        Parameters
        ----------
        image_tokenizer
            A callable for ``tok_image``; when given it is used as is.
        image_codec
            Otherwise: ``True`` loads the checkpoint's image codec (``codecs/image/``) as an
            :class:`ImageCodecTokenizer` and fails if it is missing or partial; ``None``
            (default) does so when ``codecs/image/`` exists (a partial one is an error) and
            runs on photometry only when it does not; ``False`` never loads it.
        dtype
            The transformer's floating-point type (:data:`DTYPES`: ``"bfloat16"`` halves its memory
            and, on CPUs with bfloat16 matrix units, its time). The image codec stays float32 (its
            codes are a rounding of its output: a lower precision would move galaxies across code
            boundaries), as do the redshift read-out and the activations the probes see.
        """
        folder = Path(folder)
        model = load_model(folder, device=device, dtype=dtype)
        codecs = load_codecs(folder, [*scalar_keys, Z_KEY])
        if image_tokenizer is None and (image_codec or (image_codec is None and _image_codec_dir(folder).exists())):
            image_tokenizer = load_image_tokenizer(folder, device=device)
        return cls(model, codecs, image_tokenizer)

    # -------- structure
    @property
    def num_blocks(self) -> int:
        return len(self.model.encoder)

    @property
    def num_heads(self) -> int:
        return int(self.model.encoder[0].attn.num_heads)

    def block_sites(self) -> list[str]:
        """Residual-stream outputs of the encoder blocks, ``encoder.0`` ... ."""
        return [f"encoder.{i}" for i in range(self.num_blocks)]

    def head_sites(self, block: int | None = None) -> list[str]:
        """Head sites of one encoder block (or all)."""
        blocks = range(self.num_blocks) if block is None else [block]
        return [head_site(b, h) for b in blocks for h in range(self.num_heads)]

    # -------- inputs
    def tokenize(
        self, catalog, images: np.ndarray | None = None, keys: Sequence[str] | None = None
    ) -> dict[str, torch.Tensor]:
        """Token dict from a catalogue (QTable with units) and optional images [nmgy].

        ``keys`` defaults to every scalar with a codec, plus ``tok_image`` when images are given.
        """
        keys = [k for k in self.codecs if k in LEGACY_SCALARS] if keys is None else list(keys)
        out: dict[str, torch.Tensor] = {}
        for key in keys:
            if key == IMAGE_KEY:
                continue
            if key not in self.codecs:
                raise ConfigError(f"no codec for {key}; load it (load_codecs) or drop it from keys.")
            mod_name = LEGACY_SCALARS[key][0]
            value = torch.as_tensor(scalar_values(catalog, getattr(self.model, "flux_reference", None), [key])[key])
            with torch.no_grad():
                tok = self.codecs[key].encode(_modality(mod_name)(value=value))
            out[key] = tok.reshape(-1, 1).long()
        if images is not None:
            if self.image_tokenizer is None:
                raise ConfigError("images given but no image_tokenizer; pass one to AIONRedshift.")
            out[IMAGE_KEY] = torch.as_tensor(self.image_tokenizer(images)).long()
        return out

    @staticmethod
    def batch(tokens: Mapping[str, torch.Tensor], masked: Sequence[str] = ()) -> dict[str, Any]:
        """Batch dict for :meth:`forward`; modalities in ``masked`` are hidden from the model."""
        out: dict[str, Any] = dict(tokens)
        for k, v in tokens.items():
            out[MASK_PREFIX + k] = torch.full(v.shape[:1] + (int(np.prod(v.shape[1:])),), k in masked, dtype=torch.bool)
        return out

    @staticmethod
    def split(batch: Mapping[str, torch.Tensor]) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
        """``(tokens, mask)`` of a flat batch dict."""
        tokens = {k: v for k, v in batch.items() if not k.startswith(MASK_PREFIX)}
        mask = {k[len(MASK_PREFIX) :]: v for k, v in batch.items() if k.startswith(MASK_PREFIX)}
        return tokens, mask

    # -------- running
    def forward(self, model: nn.Module, batch: Mapping[str, Any]) -> torch.Tensor:
        """``tok_z`` logits (B, V) for a batch dict; usable as ``forward=`` of scimech calls."""
        tokens, mask = self.split(batch)
        dev = model_device(model)  # the batch follows the model (a no-op on the CPU)
        tokens = {k: v.to(dev) for k, v in tokens.items()}
        mask = {k: v.to(dev) for k, v in mask.items()}
        n_enc = num_encoder_tokens(tokens)  # always explicit: the default (256) truncates
        B = next(iter(tokens.values())).shape[0]
        target = {Z_KEY: torch.zeros(B, Z.num_tokens, dtype=torch.bool, device=dev)}
        logits = model._forward(
            tokens,
            target_mask=target,
            input_mask=mask or None,
            num_decoder_tokens=Z.num_tokens,
            num_encoder_tokens=n_enc,
        )[Z_KEY]
        return logits.reshape(B, -1)

    def encode(
        self, tokens: Mapping[str, torch.Tensor], mask: Mapping[str, torch.Tensor] | None = None
    ) -> torch.Tensor:
        """Encoder context (B, N, D), passing the token count explicitly."""
        return self.model.encode(dict(tokens), input_mask=mask, num_encoder_tokens=num_encoder_tokens(tokens))

    def buckets(self) -> torch.Tensor:
        """Redshift of each ``tok_z`` code, decoded from the Z codec now."""
        return codec_buckets(self.codecs[Z_KEY])

    def expected_z(self, logits: torch.Tensor) -> torch.Tensor:
        """Point estimate: softmax over the codebook's logits times the bucket redshifts."""
        b = self.buckets().to(logits.device)
        p = torch.softmax(logits[..., : b.numel()].float(), dim=-1)  # float32 whatever --dtype
        return p @ b

    def z_metric(self):
        """A scimech metric: expected redshift per sample."""
        return Metric(lambda out, target=None: self.expected_z(out), "expected_z")

    def point_z(self, logits: torch.Tensor, readout: str = "mean") -> torch.Tensor:
        """Point estimate of the binned redshift PDF (softmax of the ``tok_z`` logits over the buckets).

        ``readout`` (:data:`READOUTS`): ``"mean"``, the PDF's expectation (:meth:`expected_z`, differentiable;
        the study's); ``"median"``, the bucket where the cumulative PDF first reaches 1/2; ``"mode"``, the
        most probable bucket (the photo-z literature's usual point estimates of a PDF: e.g. the peak in BPZ,
        Benitez 2000, the median in Tanaka et al. 2018, PASJ 70, S9).
        """
        if readout == "mean":
            return self.expected_z(logits)
        if readout not in READOUTS:
            raise ConfigError(f"readout must be one of {READOUTS}; got {readout!r}.")
        b = self.buckets().to(logits.device)
        p = torch.softmax(logits[..., : b.numel()].float(), dim=-1)
        if readout == "mode":
            return b[p.argmax(dim=-1)]
        below = (torch.cumsum(p, dim=-1) < 0.5).sum(dim=-1).clamp_max(b.numel() - 1)
        return b[below]

    @torch.no_grad()
    def predict_z(self, batch: Mapping[str, Any], batch_size: int = 512, readout: str = "mean") -> np.ndarray:
        """Redshift of every sample of a batch dict (see :meth:`batch`), the PDF's ``readout``
        (:meth:`point_z`; default its expectation), in passes of at most ``batch_size`` galaxies
        (:func:`rows_per_pass`: fewer when a galaxy has many tokens)."""
        if readout not in READOUTS:
            raise ConfigError(f"readout must be one of {READOUTS}; got {readout!r}.")
        self.model.eval()
        batch_size = rows_per_pass(batch, batch_size)
        n = batch_size_of(batch)
        out = np.empty(n)
        for s, b in iter_batches(batch, batch_size):
            z = self.point_z(self.forward(self.model, b), readout)
            out[s : s + len(z)] = z.cpu().numpy()
        return out
