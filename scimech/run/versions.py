"""The versions a bug report needs: Python, the machine, scimech and every library it uses.

:func:`show_versions` prints them (``scimech versions`` on the command line), as
``xarray.show_versions()`` does; :func:`versions` returns them. Library versions are read from the
installed distributions' metadata (no library is imported for it), in the order scimech's own
metadata lists its requirements: the required ones, then those of each extra (``models``, ``docs``,
...), ``not installed`` where an optional one is missing.
"""

from __future__ import annotations

import locale
import platform
import re
import struct
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import TextIO

__all__ = ["versions", "show_versions"]

#: what is shown first: the libraries a verb's answer depends on most
FIRST = ("torch", "numpy", "xarray", "dask", "distributed", "captum", "scipy", "pandas", "zarr", "scikit-learn")


def _requirements() -> tuple[list[str], list[str]]:
    """The distribution names scimech requires, and those only its extras (other than ``dev``) add."""
    required: list[str] = []
    optional: list[str] = []
    for req in metadata.requires("scimech") or []:
        found = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", req)
        if found is None:
            continue
        name = found.group(1)
        extra = re.search(r"extra\s*==\s*['\"]([^'\"]+)['\"]", req)
        if extra is None:
            required.append(name)
        elif extra.group(1) != "dev" and name not in optional:
            optional.append(name)
    first = [n for n in FIRST if n in required]
    return first + [n for n in required if n not in first], [n for n in optional if n not in required]


def _version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "not installed"


def _commit() -> str | None:
    """The git commit of a clone scimech runs from (``pip install -e .``), or ``None``."""
    root = Path(__file__).resolve().parents[2]
    if not (root / ".git").exists():
        return None
    try:
        out = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5, check=True
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def _accelerators() -> dict[str, str]:
    """torch's view of the accelerators (only when torch is installed: importing it takes a second)."""
    if _version("torch") == "not installed":
        return {}
    import torch

    found = {"torch CUDA build": str(torch.version.cuda or "none (CPU build)")}
    if torch.cuda.is_available():
        names = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
        found["GPUs"] = ", ".join(names)
    else:
        found["GPUs"] = "none visible to torch"
    return found


def versions() -> dict[str, dict[str, str]]:
    """The versions and the machine a bug report needs.

    Returns
    -------
    dict
        ``{"system": {...}, "required": {...}, "optional": {...}}``: ``system`` holds ``python``,
        ``python-bits``, ``OS``, ``OS-release``, ``machine``, ``byteorder``, ``LANG`` (the
        locale), ``commit`` (the git commit of a clone, where scimech runs from one) and torch's
        CUDA build and GPUs; ``required`` maps ``scimech`` and each library scimech requires to its
        installed version; ``optional`` each library of an extra (``models``, ``docs``, ``hpc``,
        ``bench``) to its version or ``"not installed"``.

    Examples
    --------
    >>> from scimech.run.versions import versions
    >>> import numpy
    >>> versions()["required"]["numpy"] == numpy.__version__
    True
    """
    system = {
        "python": sys.version.replace("\n", " "),
        "python-bits": str(struct.calcsize("P") * 8),
        "OS": platform.system(),
        "OS-release": platform.release(),
        "machine": platform.machine(),
        "byteorder": sys.byteorder,
        "LANG": ".".join(x for x in locale.getlocale() if x) or "unset",
    }
    commit = _commit()
    if commit:
        system["commit"] = commit
    system.update(_accelerators())
    required, optional = _requirements()
    return {
        "system": system,
        "required": {"scimech": _version("scimech"), **{n: _version(n) for n in required}},
        "optional": {n: _version(n) for n in optional},
    }


def show_versions(file: TextIO | None = None) -> None:
    """Print the versions of Python, the machine, scimech and its libraries, for a bug report.

    Parameters
    ----------
    file : file-like, optional
        Where to print (default: standard output).

    Examples
    --------
    >>> import scimech as sm
    >>> sm.show_versions()  # doctest: +ELLIPSIS
    <BLANKLINE>
    INSTALLED VERSIONS
    ------------------
    python: ...
    scimech: ...
    """
    out = sys.stdout if file is None else file
    found = versions()
    lines = ["", "INSTALLED VERSIONS", "------------------"]
    lines += [f"{k}: {v}" for k, v in found["system"].items()]
    lines.append("")
    lines += [f"{k}: {v}" for k, v in found["required"].items()]
    if found["optional"]:
        lines += ["", "optional (extras):"]
        lines += [f"{k}: {v}" for k, v in found["optional"].items()]
    print("\n".join(lines), file=out)
