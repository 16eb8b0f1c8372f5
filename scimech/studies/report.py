"""A report folder: figures plus a summary in Markdown (and a self-contained HTML copy).

>>> rep = Report("reports/ocean", title="OceanCBM study")      # doctest: +SKIP
>>> rep.text("Mixed supervision gives the most consistent bottleneck.")
>>> rep.figure(fig, "cka", caption="Seed x seed linear CKA")
>>> rep.table(skill_df, caption="Skill by regime")
>>> rep.write()   # -> reports/ocean/report.md and report.html

The HTML copy is rendered from the same Markdown (CommonMark plus tables, raw HTML escaped),
so bold text, lists and links look in a browser as they do in a Markdown viewer. A relative
link to ``x/report.md`` opens ``x/report.html`` instead when that file exists at ``write()``.

How a report reads:

- ``world``: what the results are about, ``"synthetic world (<size>)"`` or ``"your product
  (<name>)"`` (:func:`scimech.studies.competence.synthetic_world`); it is said under the title
  and tags every figure's and table's caption;
- :meth:`Report.competence`: the model against its field's yardsticks, always the report's first
  section, wherever it is called;
- within each section (the blocks between two headings) the text comes first, then the figures,
  then the tables, in the order they were added;
- a table wider than :data:`MAX_COLUMNS` columns is shown as several tables of at most that many
  columns, each with the row labels, so no column is hidden behind a scroll bar.
"""

from __future__ import annotations

import base64
import datetime as _dt
import html
import os
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

import numpy as np
import pandas as pd
import xarray as xr
from markdown_it import MarkdownIt

from scimech.run.results import atomic_write_text, provenance

__all__ = ["Report", "MAX_COLUMNS"]

#: the most columns (row labels included) one table shows; wider tables are split
MAX_COLUMNS = 8


def _to_frame(table: Any) -> pd.DataFrame:
    """The table as a DataFrame whose index is one column (a MultiIndex's levels become columns)."""
    if isinstance(table, pd.DataFrame):
        if isinstance(table.index, pd.MultiIndex):  # one column per level, not a column of tuples
            names = [n or f"level {k}" for k, n in enumerate(table.index.names)]
            return table.rename_axis(names).reset_index().set_index(names[0])
        return table
    if isinstance(table, pd.Series):
        return _to_frame(table.to_frame())
    if isinstance(table, xr.DataArray):
        return (
            _to_frame(
                table.to_dataframe(name=table.name or "value").drop(
                    columns=[c for c in table.coords if c not in table.dims], errors="ignore"
                )
            )
            if table.ndim
            else pd.DataFrame({table.name or "value": [table.item()]})
        )
    if isinstance(table, xr.Dataset):
        return _to_frame(table.to_dataframe())
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


# HTML -------------------------------------------------------------------------------

_CSS = (
    "body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;"
    "line-height:1.5;color:#222}"
    "table{border-collapse:collapse;margin:1em 0}"
    "th,td{border:1px solid #ccc;padding:4px 10px;text-align:left;vertical-align:top;overflow-wrap:break-word}"
    "th{background:#f2f2f2}.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}"
    "caption{text-align:left;font-weight:bold;padding:.3em 0}.wide{overflow-x:auto;margin:1em 0}.wide table{margin:0}"
    "img{max-width:100%;height:auto}figure{margin:1em 0}figcaption{font-style:italic;color:#444}"
    "code{background:#f2f2f2;padding:0 .2em}pre{background:#f6f6f6;padding:.6em;overflow-x:auto}"
    ".meta{color:#666}"
)


def _html_sibling(href: str, folder: Path | None) -> str:
    """``sub/report.md`` -> ``sub/report.html`` if that file exists in ``folder``; other links unchanged."""
    parts = urlsplit(href)
    if folder is None or parts.scheme or parts.netloc or parts.path.startswith("/") or not parts.path.endswith(".md"):
        return href
    target = parts.path[: -len(".md")] + ".html"
    if not (folder / unquote(target)).is_file():
        return href
    return urlunsplit(parts._replace(path=target))


def _link_open(renderer, tokens, idx, options, env):
    """markdown-it render rule for ``<a>``: point Markdown links at their HTML siblings."""
    token = tokens[idx]
    token.attrSet("href", _html_sibling(str(token.attrGet("href")), env.get("folder")))
    return renderer.renderToken(tokens, idx, options, env)


# CommonMark plus pipe tables; raw HTML in the text is shown as text, never injected
_MD = MarkdownIt("commonmark", {"html": False}).enable("table")
_MD.add_render_rule("link_open", _link_open)


def _is_number(v: Any) -> bool:
    """Numbers are right-aligned in tables; True/False are words, so they are not numbers here."""
    return isinstance(v, (int, float, np.number)) and not isinstance(v, (bool, np.bool_))


def _html_cell(v: Any, env: dict, tag: str = "td", num: bool | None = None) -> str:
    """One table cell: text as inline Markdown (links, bold), numbers formatted as in report.md."""
    num = _is_number(v) if num is None else num
    body = _MD.renderInline(v, env) if isinstance(v, str) else html.escape(_fmt(v))
    return f"<{tag} class='num'>{body}</{tag}>" if num else f"<{tag}>{body}</{tag}>"


def _numeric_text(v: Any) -> bool:
    """A number written as text (``'0.999'``, ``'nan'``), as a report's pre-formatted cells are."""
    try:
        float(v)
    except (TypeError, ValueError):
        return False
    return True


def _html_table(df: pd.DataFrame, caption: str, index: bool, env: dict) -> str:
    """A table with one header row (the index name first, if ``index``); numeric columns right-aligned.

    A column is numeric when every cell is a number or a number written as text; a wide table
    scrolls inside its own box instead of widening the page."""
    cols = ([df.index] if index else []) + [df.iloc[:, k] for k in range(df.shape[1])]
    names = ([df.index.name or ""] if index else []) + [str(c) for c in df.columns]
    numeric = [
        len(col) > 0 and all(_is_number(v) or (isinstance(v, str) and _numeric_text(v)) for v in col) for col in cols
    ]
    head = "".join(_html_cell(n, env, "th", num) for n, num in zip(names, numeric))
    rows = "".join(
        "<tr>" + "".join(_html_cell(v, env, "td", num) for v, num in zip(row, numeric)) + "</tr>\n"
        for row in df.itertuples(index=index, name=None)
    )
    cap = f"<caption>{_MD.renderInline(caption, env)}</caption>" if caption else ""
    return f"<div class='wide'><table>{cap}\n<thead><tr>{head}</tr></thead>\n<tbody>\n{rows}</tbody></table></div>"


def _column_chunks(df: pd.DataFrame, index: bool) -> list[pd.DataFrame]:
    """The table in pieces of at most :data:`MAX_COLUMNS` columns (row labels counted), every column shown."""
    per = MAX_COLUMNS - (1 if index else 0)
    if df.shape[1] <= per:
        return [df]
    return [df.iloc[:, k : k + per] for k in range(0, df.shape[1], per)]


def _chunk_caption(caption: str, k: int, n: int, df: pd.DataFrame, start: int) -> str:
    if n == 1:
        return caption
    return f"{caption} (columns {start + 1}-{start + df.shape[1]}, part {k + 1} of {n})"


def _generated() -> str:
    """The provenance line under the title (no final full stop)."""
    return f"Generated {_dt.datetime.now(_dt.UTC):%Y-%m-%d %H:%M} UTC by scimech {provenance()['scimech_version']}"


def _markdown_table(df: pd.DataFrame, caption: str, index: bool) -> list[str]:
    """A pipe table (several, each with the row labels, when wider than :data:`MAX_COLUMNS`)."""
    lines: list[str] = []
    chunks = _column_chunks(df, index)
    start = 0
    for k, part in enumerate(chunks):
        cap = _chunk_caption(caption, k, len(chunks), part, start)
        start += part.shape[1]
        if cap:
            lines += [f"**{cap}**", ""]
        cols = ([part.index.name or ""] if index else []) + [str(c) for c in part.columns]
        lines.append("| " + " | ".join(map(_cell, cols)) + " |")
        lines.append("|" + "---|" * len(cols))
        for idx, row in part.iterrows():
            cells = ([_fmt(idx)] if index else []) + [_fmt(v) for v in row.to_numpy()]
            lines.append("| " + " | ".join(map(_cell, cells)) + " |")
        lines.append("")
    return lines


class Report:
    """Collect text, figures and tables; write ``report.md`` and ``report.html``.

    Parameters
    ----------
    out_dir
        Folder of the report; figures go to ``out_dir/figures``.
    title
        The report's heading.
    world
        What the results are about (``"synthetic world (12 x 16 grid, ...)"``, ``"your product
        (oras5.zarr)"``): said under the title and added to every caption.

    Examples
    --------
    >>> report = Report("out", "Heat transport probes", world="synthetic world (4 x 5 grid)")
    >>> _ = report.heading("Probes").text("The probe of **layer 2** reads the heat flux.")
    >>> _ = report.table({"layer": [1, 2], "r2": [0.5, 0.9]}, caption="Out-of-fold R2")
    >>> path = report.write()
    >>> path.as_posix(), sorted(p.name for p in path.parent.iterdir())
    ('out/report.md', ['figures', 'report.html', 'report.md'])
    >>> lines = path.read_text().splitlines()
    >>> lines[0], lines[4]
    ('# Heat transport probes', '## Probes')
    >>> [line for line in lines if line.startswith("**")]  # the caption names the world
    ['**Out-of-fold R2 · synthetic world (4 x 5 grid)**']
    >>> [line for line in lines if line.startswith("| 1")]
    ['| 1 | 2 | 0.9 |']
    """

    def __init__(self, out_dir: str | os.PathLike, title: str, world: str | None = None):
        self.out_dir = Path(out_dir)
        self.fig_dir = self.out_dir / "figures"
        self.fig_dir.mkdir(parents=True, exist_ok=True)
        self.title = title
        self.world = world
        self._blocks: list[tuple[str, Any]] = []
        self._opening: list[tuple[str, Any]] = []

    def _tagged(self, caption: str) -> str:
        """The caption with the world it is about (``caption · synthetic world (...)``)."""
        if not self.world:
            return caption
        return f"{caption} · {self.world}" if caption else self.world

    def competence(self, table: Any) -> Report:
        """The report's first section, wherever this is called: the dissected model against its
        field's yardsticks (:func:`scimech.studies.competence.competence`), its verdict first."""
        from .competence import competence_frame, competence_markdown

        self._opening = [
            ("heading", (2, "Is the model competent?")),
            ("text", competence_markdown(table)),
            ("table", (competence_frame(table), self._tagged("The model against its field's yardsticks"), True)),
        ]
        return self

    def heading(self, text: str, level: int = 2) -> Report:
        self._blocks.append(("heading", (level, text)))
        return self

    def text(self, markdown: str) -> Report:
        """A block of Markdown: paragraphs, **bold**, lists, [links](x/report.md), code, tables."""
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
        self._blocks.append(("figure", (path, self._tagged(caption))))
        return path

    def table(self, table: Any, caption: str = "", index: bool = True) -> Report:
        """A table from a DataFrame, dict or xarray object; text cells may hold inline Markdown."""
        df = _to_frame(table)
        self._blocks.append(("table", (df, self._tagged(caption), index)))
        return self

    def _ordered(self) -> list[tuple[str, Any]]:
        """The competence section first; then, within each section, text, figures, tables."""
        out: list[tuple[str, Any]] = list(self._opening)
        section: list[tuple[str, Any]] = []
        rank = {"text": 0, "figure": 1, "table": 2}

        def flush():
            out.extend(sorted(section, key=lambda b: rank[b[0]]))  # stable: the order they were added
            section.clear()

        for block in self._blocks:
            starts = block[0] == "heading" or (block[0] == "text" and str(block[1]).lstrip().startswith("#"))
            if starts:
                flush()
            if block[0] == "heading":
                out.append(block)
            else:
                section.append(block)
        flush()
        return out

    def _subtitle(self) -> str:
        return _generated() + (f". Data: {self.world}" if self.world else "")

    # writers ----------------------------------------------------------------------
    def _markdown(self) -> str:
        lines = [f"# {self.title}", "", f"_{self._subtitle()}._", ""]
        for kind, payload in self._ordered():
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
                lines += _markdown_table(*payload)
        return "\n".join(lines)

    def _html(self) -> str:
        """The report as one HTML page: Markdown rendered, figures embedded, links to .html siblings."""
        env = {"folder": self.out_dir}
        title = html.escape(self.title)
        parts = [
            f"<!doctype html><html><head><meta charset='utf-8'><title>{title}</title>"
            f"<style>{_CSS}</style></head><body>",
            f"<h1>{_MD.renderInline(self.title, env)}</h1>",
            f"<p class='meta'>{html.escape(self._subtitle())}.</p>",
        ]
        for kind, payload in self._ordered():
            if kind == "heading":
                level, text = payload
                parts.append(f"<h{level}>{_MD.renderInline(text, env)}</h{level}>")
            elif kind == "text":
                parts.append(_MD.render(payload, env))
            elif kind == "figure":
                path, caption = payload
                data = base64.b64encode(path.read_bytes()).decode()
                alt = html.escape(caption or path.stem)
                parts.append(
                    f"<figure><img src='data:image/png;base64,{data}' alt='{alt}'>"
                    f"<figcaption>{_MD.renderInline(caption, env)}</figcaption></figure>"
                )
            elif kind == "table":
                df, caption, index = payload
                chunks = _column_chunks(df, index)
                start = 0
                for k, part in enumerate(chunks):
                    parts.append(_html_table(part, _chunk_caption(caption, k, len(chunks), part, start), index, env))
                    start += part.shape[1]
        parts.append("</body></html>")
        return "\n".join(parts)

    def write(self) -> Path:
        """Write ``report.md`` and ``report.html``; returns the Markdown path."""
        md = self.out_dir / "report.md"
        atomic_write_text(md, self._markdown())
        atomic_write_text(self.out_dir / "report.html", self._html())
        return md
