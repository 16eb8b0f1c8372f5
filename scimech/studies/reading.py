"""What a reader read from a file, said back to the scientist before any work.

A domain reader (``ocean.products.open_store``, ``astro.data.catalog.read_legacy_survey``,
``neuro.data.from_traces``) fills one :class:`Reading`: a row per quantity the study needs
(:class:`ReadRow`: the variable that served it, how it was found, its units as found and as
used, each conversion or sign flip) and named sections of facts (``time``: calendar,
frequency, gaps; ``grid``: periodic, staggered, metrics; ``mask``; ``rows``: what was dropped
and why). ``scimech <domain> inspect PATH`` prints it (:meth:`Reading.text`) and writes it as
JSON (:meth:`Reading.save`); every study report on real data opens with it
(:meth:`Reading.markdown`); a notebook gets it as a table (:meth:`Reading.to_frame`).

The core never reads a domain's files: it only holds and shows what the reader says.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["ReadRow", "Reading"]

_COLUMNS = ("quantity", "variable", "found_by", "units_found", "units_used", "conversion")
_HEADERS = ("quantity", "variable", "found by", "units as found", "units as used", "conversion / sign")

#: the sections that list the files read and how they were combined: shown first, before the
#: quantity table, so a report on a product of many files opens with what was read
FILE_SECTIONS = ("files",)


@dataclass
class ReadRow:
    """One quantity the study needs and what served it.

    Parameters
    ----------
    quantity : str
        The study's name for it (``"sst"``, ``"redshift"``, ``"time"``).
    variable : str
        The product's variable or column that served it (``"tos"``, ``"Z"``), or how it was
        derived (``"thetao at 0.5 m"``); ``""`` when the product has none.
    found_by : str
        How it was found: ``"standard_name"``, ``"name"``, ``"axis"``, ``"derived"``, ``"option"``.
    units_found, units_used : str
        The units attribute as found in the file, and the units the study works in.
    conversion : str
        Each conversion or sign flip applied (``"K -> degC"``, ``"positive up: sign flipped"``).
    """

    quantity: str
    variable: str = ""
    found_by: str = ""
    units_found: str = ""
    units_used: str = ""
    conversion: str = ""


@dataclass
class Reading:
    """What a reader read from one product (see the module docstring).

    Parameters
    ----------
    product : str
        What the product is, in words (``"CMIP6 netCDF (CF-1.7), noleap calendar"``).
    source : str
        Where it was read from (a path).
    rows : list of ReadRow
        One per quantity the study needs.
    sections : dict of str to dict of str to str
        Named groups of facts, in order: ``{"time": {"calendar": "noleap", ...}, ...}``.
    notes : list of str
        Anything else the reader wants the scientist to see (warnings it did not refuse).
    """

    product: str
    source: str = ""
    rows: list[ReadRow] = field(default_factory=list)
    sections: dict[str, dict[str, str]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    # --- filling ---------------------------------------------------------------------------
    def add(
        self,
        quantity: str,
        variable: str = "",
        found_by: str = "",
        units_found: str = "",
        units_used: str = "",
        conversion: str = "",
    ) -> ReadRow:
        """Add (or replace) the row of ``quantity``; returns it."""
        row = ReadRow(quantity, variable, found_by, str(units_found or ""), str(units_used or ""), conversion)
        self.rows = [r for r in self.rows if r.quantity != quantity] + [row]
        return row

    def row(self, quantity: str) -> ReadRow:
        """The row of ``quantity`` (KeyError naming the quantities there are)."""
        for r in self.rows:
            if r.quantity == quantity:
                return r
        raise KeyError(f"No row for {quantity!r}; the reading has {[r.quantity for r in self.rows]}.")

    def fact(self, section: str, key: str, value: Any) -> None:
        """Set one fact, ``sections[section][key] = str(value)``."""
        self.sections.setdefault(section, {})[key] = str(value)

    def note(self, text: str) -> None:
        """Add a note (kept once)."""
        if text not in self.notes:
            self.notes.append(text)

    # --- showing ---------------------------------------------------------------------------
    def to_frame(self):
        """The quantity table as a :class:`pandas.DataFrame` indexed by ``quantity``."""
        import pandas as pd

        df = pd.DataFrame([asdict(r) for r in self.rows], columns=list(_COLUMNS))
        return df.set_index("quantity")

    def _sections(self) -> tuple[list[tuple[str, dict]], list[tuple[str, dict]]]:
        """The sections that list the files read (:data:`FILE_SECTIONS`), shown first, and the others."""
        items = list(self.sections.items())
        return [i for i in items if i[0] in FILE_SECTIONS], [i for i in items if i[0] not in FILE_SECTIONS]

    def _grid(self) -> list[list[str]]:
        return [list(_HEADERS)] + [[getattr(r, c) or "-" for c in _COLUMNS] for r in self.rows]

    def text(self) -> str:
        """The reading as plain text for a terminal: the product, the table, then each section."""
        lines = [f"Read: {self.product}"] + ([f"From: {self.source}"] if self.source else [])
        files, others = self._sections()
        for name, facts in files:
            lines += ["", f"{name}:"] + [f"  {k}: {v}" for k, v in facts.items()]
        if self.rows:
            grid = self._grid()
            widths = [max(len(row[i]) for row in grid) for i in range(len(_HEADERS))]
            fmt = "  ".join(f"{{:<{w}}}" for w in widths)
            lines += ["", fmt.format(*grid[0]).rstrip(), fmt.format(*("-" * w for w in widths)).rstrip()]
            lines += [fmt.format(*row).rstrip() for row in grid[1:]]
        for name, facts in others:
            lines += ["", f"{name}:"] + [f"  {k}: {v}" for k, v in facts.items()]
        if self.notes:
            lines += ["", "notes:"] + [f"  - {n}" for n in self.notes]
        return "\n".join(lines)

    def markdown(self, heading: str = "## What was read") -> str:
        """The reading as Markdown, the opening section of a study report on real data."""

        def cell(s: str) -> str:
            return s.replace("|", "\\|") or "-"

        lines = [
            heading,
            "",
            f"**Product:** {self.product}" + (f"  \n**Source:** `{self.source}`" if self.source else ""),
            "",
        ]
        files, others = self._sections()
        for name, facts in files:
            lines += [f"**{name}**", ""] + [f"- {k}: {v}" for k, v in facts.items()] + [""]
        if self.rows:
            lines += ["| " + " | ".join(_HEADERS) + " |", "|" + "---|" * len(_HEADERS)]
            lines += ["| " + " | ".join(cell(getattr(r, c)) for c in _COLUMNS) + " |" for r in self.rows]
            lines.append("")
        for name, facts in others:
            lines += [f"**{name}**", ""] + [f"- {k}: {v}" for k, v in facts.items()] + [""]
        if self.notes:
            lines += ["**notes**", ""] + [f"- {n}" for n in self.notes] + [""]
        return "\n".join(lines)

    def to_dict(self) -> dict:
        """A JSON-ready dict (``rows`` as a list of dicts)."""
        return {
            "product": self.product,
            "source": self.source,
            "rows": [asdict(r) for r in self.rows],
            "sections": {k: dict(v) for k, v in self.sections.items()},
            "notes": list(self.notes),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Reading:
        """The inverse of :meth:`to_dict` (a reading saved with :meth:`save`)."""
        return cls(
            product=d["product"],
            source=d.get("source", ""),
            rows=[ReadRow(**r) for r in d.get("rows", [])],
            sections={k: dict(v) for k, v in d.get("sections", {}).items()},
            notes=list(d.get("notes", [])),
        )

    def save(self, path: str | os.PathLike) -> Path:
        """Write the reading as JSON, atomically; returns the path."""
        from scimech.run.results import atomic_write_text

        return atomic_write_text(path, json.dumps(self.to_dict(), indent=2) + "\n")

    @classmethod
    def load(cls, path: str | os.PathLike) -> Reading:
        """A reading written by :meth:`save`."""
        return cls.from_dict(json.loads(Path(path).read_text()))

    def __str__(self) -> str:
        return self.text()
