"""A report folder: figures plus a summary in Markdown (and a self-contained HTML copy).

>>> rep = Report("reports/ocean", title="OceanCBM study")      # doctest: +SKIP
>>> rep.text("Mixed supervision gives the most consistent bottleneck.")
>>> rep.figure(fig, "cka", caption="Seed x seed linear CKA")
>>> rep.table(skill_df, caption="Skill by regime")
>>> rep.write()   # -> reports/ocean/report.md and report.html
"""

from __future__ import annotations

import base64
import datetime as _dt
import html
import os
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from .results import atomic_write_text, provenance

__all__ = ["Report"]


def _to_frame(table: Any):

    if isinstance(table, pd.DataFrame):
        return table
    if isinstance(table, pd.Series):
        return table.to_frame()
    if isinstance(table, xr.DataArray):
        return table.to_dataframe(name=table.name or "value").drop(
            columns=[c for c in table.coords if c not in table.dims], errors="ignore"
        ) if table.ndim else pd.DataFrame({table.name or "value": [table.item()]})
    if isinstance(table, xr.Dataset):
        return table.to_dataframe()
    if isinstance(table, dict):
        return pd.DataFrame(table)
    raise TypeError(f"Report.table takes a DataFrame, Series, dict or xarray object; got {type(table).__name__}.")


def _fmt(v: Any) -> str:
    if isinstance(v, (float, np.floating)):
        if not np.isfinite(v):
            return str(v)
        return f"{v:.4g}"
    return str(v)


def _cell(text: str) -> str:
    """A Markdown table cell: a '|' in the text (``|r|``) would end the cell, so it is escaped."""
    return str(text).replace("|", "\\|").replace("\n", " ")


class Report:
    """Collect text, figures and tables; write ``report.md`` and ``report.html``.

    Parameters
    ----------
    out_dir
        Folder of the report; figures go to ``out_dir/figures``.
    title
        The report's heading.
    """

    def __init__(self, out_dir: str | os.PathLike, title: str):
        self.out_dir = Path(out_dir)
        self.fig_dir = self.out_dir / "figures"
        self.fig_dir.mkdir(parents=True, exist_ok=True)
        self.title = title
        self._blocks: list[tuple[str, Any]] = []

    def heading(self, text: str, level: int = 2) -> Report:
        self._blocks.append(("heading", (level, text)))
        return self

    def text(self, markdown: str) -> Report:
        """A paragraph of Markdown."""
        self._blocks.append(("text", markdown.strip()))
        return self

    def figure(self, fig, name: str, caption: str = "", dpi: int = 110) -> Path:
        """Save a matplotlib figure as ``figures/<name>.png`` and add it; returns the path."""
        import matplotlib.pyplot as plt

        path = self.fig_dir / f"{name}.png"
        tmp = path.with_name(f".{path.name}.tmp.png")
        fig.savefig(tmp, dpi=dpi, bbox_inches="tight")
        os.replace(tmp, path)
        plt.close(fig)
        self._blocks.append(("figure", (path, caption)))
        return path

    def table(self, table: Any, caption: str = "", index: bool = True) -> Report:
        """A table from a DataFrame, dict or xarray object."""
        df = _to_frame(table)
        self._blocks.append(("table", (df, caption, index)))
        return self

    # writers ----------------------------------------------------------------------
    def _markdown(self) -> str:
        lines = [f"# {self.title}", "", f"_Generated {_dt.datetime.now(_dt.UTC):%Y-%m-%d %H:%M} UTC "
                 f"by scimech {provenance()['scimech_version']}._", ""]
        for kind, payload in self._blocks:
            if kind == "heading":
                level, text = payload
                lines += ["#" * level + " " + text, ""]
            elif kind == "text":
                lines += [payload, ""]
            elif kind == "figure":
                path, caption = payload
                rel = path.relative_to(self.out_dir)
                lines += [f"![{caption or path.stem}]({rel.as_posix()})", ""]
                if caption:
                    lines += [f"*{caption}*", ""]
            elif kind == "table":
                df, caption, index = payload
                if caption:
                    lines += [f"**{caption}**", ""]
                cols = ([df.index.name or ""] if index else []) + [str(c) for c in df.columns]
                lines.append("| " + " | ".join(map(_cell, cols)) + " |")
                lines.append("|" + "---|" * len(cols))
                for idx, row in df.iterrows():
                    cells = ([_fmt(idx)] if index else []) + [_fmt(v) for v in row.to_numpy()]
                    lines.append("| " + " | ".join(map(_cell, cells)) + " |")
                lines.append("")
        return "\n".join(lines)

    def _html(self) -> str:
        parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(self.title)}</title>",
                 "<style>body{font-family:sans-serif;max-width:1100px;margin:2em auto;line-height:1.4}"
                 "table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:3px 8px;"
                 "text-align:right}img{max-width:100%}figcaption{font-style:italic;color:#444}</style>"
                 "</head><body>", f"<h1>{html.escape(self.title)}</h1>"]
        for kind, payload in self._blocks:
            if kind == "heading":
                level, text = payload
                parts.append(f"<h{level}>{html.escape(text)}</h{level}>")
            elif kind == "text":
                body = "<br>".join(html.escape(line) for line in payload.splitlines())
                parts.append(f"<p>{body}</p>")
            elif kind == "figure":
                path, caption = payload
                data = base64.b64encode(path.read_bytes()).decode()
                parts.append(f"<figure><img src='data:image/png;base64,{data}'>"
                             f"<figcaption>{html.escape(caption)}</figcaption></figure>")
            elif kind == "table":
                df, caption, index = payload
                if caption:
                    parts.append(f"<p><b>{html.escape(caption)}</b></p>")
                parts.append(df.to_html(index=index, float_format=lambda v: f"{v:.4g}"))
        parts.append("</body></html>")
        return "\n".join(parts)

    def write(self) -> Path:
        """Write ``report.md`` and ``report.html``; returns the Markdown path."""
        md = self.out_dir / "report.md"
        atomic_write_text(md, self._markdown())
        atomic_write_text(self.out_dir / "report.html", self._html())
        return md
