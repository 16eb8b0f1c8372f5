"""report.html shows the report's Markdown as a browser should: bold, lists, clickable links, tidy tables."""

from html.parser import HTMLParser
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pandas as pd
import pytest

from scimech.studies.report import Report

# tags that start a new line of visible text
_LINE_BREAKS = {"br", "p", "li", "ul", "ol", "tr", "td", "th", "figcaption", "h1", "h2", "h3", "h4", "h5", "h6"}


class _Page(HTMLParser):
    """What a reader of the page sees: the visible text, the tags, the links and the table cells."""

    def __init__(self):
        super().__init__()
        self.text, self.tags, self.hrefs, self.tables = [], [], [], []
        self._hidden = 0  # inside <style>, <script> or <title>
        self._in_head = False  # inside <thead>
        self._cell = None  # (tag, classes, text pieces) of the table cell being read
        self._row_cells = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.tags.append(tag)
        self._hidden += tag in ("style", "script", "title")
        if tag in _LINE_BREAKS:
            self.text.append("\n")
        self._in_head |= tag == "thead"
        if tag == "a":
            self.hrefs.append(attrs.get("href"))
        if tag == "table":
            self.tables.append({"head_rows": 0, "head": [], "body": []})
        if tag == "tr" and self.tables:
            self._row_cells = []
        if tag in ("th", "td"):
            self._cell = (tag, (attrs.get("class") or "").split(), [])

    def handle_endtag(self, tag):
        self._hidden -= tag in ("style", "script", "title")
        self._in_head &= tag != "thead"
        if tag in ("th", "td") and self._cell:
            self._row_cells.append(self._cell)
            self._cell = None
        if tag == "tr" and self.tables:
            table = self.tables[-1]
            if self._in_head:
                table["head_rows"] += 1
                table["head"] = table["head"] or self._row_cells
            else:
                table["body"].append(self._row_cells)

    def handle_data(self, data):
        if not self._hidden:
            self.text.append(data)
            if self._cell:
                self._cell[2].append(data)


@pytest.fixture
def page(tmp_path):
    """A report in tmp_path with a heading, Markdown text, a link to a sibling report, a table and a figure."""
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "report.md").write_text("# sub\n")
    (sub / "report.html").write_text("<h1>sub</h1>\n")
    rep = Report(tmp_path, title="Index")
    rep.heading("Studies")
    rep.text(
        "The fit is **bold** news.\n\n- first finding\n- second finding\n\n"
        "See [sub/report.md](sub/report.md) and <script>alert(1)</script>."
    )
    frame = pd.DataFrame(
        {"study": ["ocean", "astro"], "report": ["[sub/report.md](sub/report.md)", "none"], "rmse": [0.123456, 2.0]}
    ).set_index("study")
    rep.table(frame, caption="Skill")
    fig, ax = plt.subplots(figsize=(2, 2))
    ax.plot([0, 1], [1, 0])
    rep.figure(fig, "line", caption="A line")
    rep.write()
    parsed = _Page()
    parsed.feed((tmp_path / "report.html").read_text())
    parsed.folder = tmp_path
    return parsed


def _visible_lines(page):
    return [line.strip() for line in "".join(page.text).splitlines() if line.strip()]


def test_markdown_text_is_rendered_not_shown_raw(page):
    visible = "".join(page.text)
    assert "**" not in visible
    assert not [line for line in _visible_lines(page) if line.startswith("- ")]
    assert "](" not in visible
    assert "strong" in page.tags and page.tags.count("li") == 2


def test_a_link_to_a_sibling_report_opens_its_html_and_every_relative_link_resolves(page):
    assert "sub/report.html" in page.hrefs
    relative = [h for h in page.hrefs if h and "://" not in h and not h.startswith(("#", "data:"))]
    assert relative and all((page.folder / h).is_file() for h in relative)


def test_raw_html_in_text_is_escaped(page):
    assert "script" not in page.tags
    assert any("<script>alert(1)</script>" in line for line in _visible_lines(page))


def test_table_has_one_header_row_and_aligns_numbers_right(page):
    (table,) = page.tables
    assert table["head_rows"] == 1
    assert ["".join(text) for _, _, text in table["head"]] == ["study", "report", "rmse"]
    assert ["".join(text) for _, _, text in table["body"][0]] == ["ocean", "sub/report.md", "0.1235"]
    for row in table["body"]:  # study and report are text, left-aligned; rmse is a number, right-aligned
        assert [("num" in classes) for _, classes, _ in row] == [False, False, True]


def test_figure_is_embedded_with_its_caption(page):
    assert "figure" in page.tags and "img" in page.tags and "A line" in "".join(page.text)


def test_a_link_without_an_html_sibling_keeps_pointing_at_markdown(tmp_path):
    (tmp_path / "only.md").write_text("x\n")
    rep = Report(tmp_path / "rep", title="t")
    rep.text("[md](../only.md) and [web](https://example.org/a.md)")
    rep.write()
    html = Path(tmp_path / "rep" / "report.html").read_text()
    assert 'href="../only.md"' in html and 'href="https://example.org/a.md"' in html


def _table_of(tmp_path, table, **kw):
    rep = Report(tmp_path, title="t")
    rep.table(table, **kw)
    rep.write()
    parsed = _Page()
    parsed.feed((tmp_path / "report.html").read_text())
    (out,) = parsed.tables
    return out, (tmp_path / "report.md").read_text()


def test_a_multiindex_is_one_column_per_level_not_tuples(tmp_path):
    frame = pd.DataFrame(
        {"mode": ["phot", "phot", "multi"], "population": ["all", "dusty", "all"], "bias": [0.1, -0.2, 0.3]}
    ).set_index(["mode", "population"])
    table, md = _table_of(tmp_path, frame)
    assert ["".join(t) for _, _, t in table["head"]] == ["mode", "population", "bias"]
    assert ["".join(t) for _, _, t in table["body"][1]] == ["phot", "dusty", "-0.2"]
    assert "('phot'" not in md and "| mode | population | bias |" in md


def test_numbers_written_as_text_are_right_aligned_like_numbers(tmp_path):
    frame = pd.DataFrame({"what": ["edges", "signs"], "found": ["0.999", "nan"], "interval": ["[0.9, 1]", "[0, 1]"]})
    table, _ = _table_of(tmp_path, frame, index=False)
    for row in [table["head"], *table["body"]]:  # what and interval are text; found holds numbers
        assert [("num" in classes) for _, classes, _ in row] == [False, True, False]


def test_a_numbered_finding_in_the_demo_index_stays_one_bullet(tmp_path):
    from scimech.cli.commands import _list_item

    rep = Report(tmp_path, title="t")
    rep.text("\n".join(f"- {_list_item(line)}" for line in ["1. NOT reproduced: a", "2) REPRODUCED: b", "plain"]))
    rep.write()
    parsed = _Page()
    parsed.feed((tmp_path / "report.html").read_text())
    assert parsed.tags.count("li") == 3 and "ol" not in parsed.tags
    assert "1. NOT reproduced: a" in _visible_lines(parsed) and "2) REPRODUCED: b" in _visible_lines(parsed)
