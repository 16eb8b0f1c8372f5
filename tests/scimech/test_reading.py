"""scimech.studies.reading: what a reader read, said back (terminal, Markdown, JSON, a notebook table), and
the ``inspect`` verb every study answers."""

import argparse
import json

import pytest

from scimech.studies.contract import Study
from scimech.studies.reading import Reading


def _reading() -> Reading:
    r = Reading("toy product (CF-1.8), noleap calendar", source="/data/toy.nc")
    r.add("sst", "tos", "standard_name", "K", "degree_Celsius", "K -> degC")
    r.add("qnet", "hfds", "standard_name", "W m-2", "W m-2", "positive up: sign flipped")
    r.fact("time", "calendar", "noleap")
    r.fact("time", "frequency", "monthly (MS)")
    r.fact("grid", "longitude", "periodic")
    r.note("one member of 3 chosen by --member")
    return r


def test_a_reading_shows_every_row_and_fact_in_each_form(tmp_path):
    r = _reading()
    text = r.text()
    # every cell the reader filled appears in the terminal table, the Markdown and the JSON
    for s in ("tos", "K -> degC", "positive up: sign flipped", "noleap", "monthly (MS)", "periodic", "--member"):
        assert s in text and s in r.markdown()
    assert text.splitlines()[0] == "Read: toy product (CF-1.8), noleap calendar"
    saved = json.loads(r.save(tmp_path / "reading.json").read_text())
    assert saved["rows"][1] == {
        "quantity": "qnet",
        "variable": "hfds",
        "found_by": "standard_name",
        "units_found": "W m-2",
        "units_used": "W m-2",
        "conversion": "positive up: sign flipped",
    }
    assert Reading.load(tmp_path / "reading.json") == r


def test_the_files_read_come_before_the_table_and_the_other_facts():
    # a report on a product of many files opens with the files, however late the reader said them
    r = _reading()
    r.fact("files", "thetao_Omon_185001-186912.nc", "thetao, 240 steps")
    r.fact("files", "combined by", "xarray.open_mfdataset, by coordinates")
    for shown in (r.text(), r.markdown()):
        at = {
            s: shown.index(s)
            for s in ("thetao_Omon_185001-186912.nc", "combined by", "hfds", "monthly (MS)", "periodic")
        }
        assert at["thetao_Omon_185001-186912.nc"] < at["combined by"] < at["hfds"] < at["monthly (MS)"] < at["periodic"]
    # without a files section the order is the reader's: table, then sections as said
    plain = _reading().markdown()
    assert plain.index("hfds") < plain.index("monthly (MS)") < plain.index("periodic")
    df = r.to_frame()
    assert list(df.index) == ["sst", "qnet"] and df.loc["sst", "units_found"] == "K"


def test_a_row_is_replaced_not_repeated_and_a_missing_one_is_named():
    r = _reading()
    r.add("sst", "thetao at 0.5 m", "derived", "degC", "degree_Celsius")
    assert [x.quantity for x in r.rows] == ["qnet", "sst"] and r.row("sst").variable == "thetao at 0.5 m"
    with pytest.raises(KeyError, match=r"\['qnet', 'sst'\]"):
        r.row("mld")


def test_markdown_escapes_a_pipe_in_a_cell():
    r = Reading("p")
    r.add("x", "a|b")
    assert "a\\|b" in r.markdown()


class _Toy(Study):
    name = "toy"
    title = "toy"

    def add_options(self, parser): ...
    def plan(self, args): ...
    def run(self, plan, client=None): ...
    def findings(self, evidence): ...
    def planted_truth(self, evidence): ...
    def report(self, evidence, plan): ...
    def load(self, folder): ...


class _Reads(_Toy):
    def inspect(self, path, args):
        r = Reading(f"toy file of {path.stat().st_size} bytes", source=str(path))
        r.add("x", "col0", "name", "m", "m")
        return r


def _parse(study, argv):
    root = argparse.ArgumentParser()
    study.register(root.add_subparsers(dest="command"))
    return root.parse_args(["toy", *argv])


def test_inspect_prints_the_reading_and_writes_json(tmp_path, capsys):
    f = tmp_path / "data.bin"
    f.write_bytes(b"12345")
    args = _parse(_Reads(), ["inspect", str(f), "--json", str(tmp_path / "r.json")])
    assert args.func(args) == 0
    out = capsys.readouterr().out
    assert "Read: toy file of 5 bytes" in out and "col0" in out
    assert json.loads((tmp_path / "r.json").read_text())["rows"][0]["variable"] == "col0"


def test_a_study_without_a_reader_says_so(tmp_path, capsys):
    f = tmp_path / "data.bin"
    f.write_bytes(b"")
    args = _parse(_Toy(), ["inspect", str(f)])
    assert args.func(args) == 2
    assert "reads no product of yours" in capsys.readouterr().err
