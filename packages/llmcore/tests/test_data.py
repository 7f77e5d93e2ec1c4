"""Tests of llmcore.data: JSONL errors, atomic writes, resumable results and Dataset round trip."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import pytest

from llmcore.data import (
    ResultsWriter,
    atomic_write_json,
    atomic_write_text,
    filter_pending,
    from_dataset,
    iter_jsonl,
    read_jsonl,
    to_dataset,
    write_jsonl,
)
from llmcore.errors import DataError, LLMCoreError


def _leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(".tmp"))


# --- JSONL reading ---------------------------------------------------------------------------


def test_read_jsonl_skips_blank_lines(tmp_path: Path) -> None:
    p = tmp_path / "d.jsonl"
    p.write_text('{"a": 1}\n\n   \n{"a": "é"}\n', encoding="utf-8")
    assert read_jsonl(p) == [{"a": 1}, {"a": "é"}]
    assert list(iter_jsonl(str(p))) == [{"a": 1}, {"a": "é"}]


def test_read_jsonl_last_line_without_newline(tmp_path: Path) -> None:
    p = tmp_path / "d.jsonl"
    p.write_text('{"a": 1}\n{"a": 2}', encoding="utf-8")
    assert read_jsonl(p) == [{"a": 1}, {"a": 2}]


def test_invalid_json_names_file_and_line(tmp_path: Path) -> None:
    p = tmp_path / "data.jsonl"
    p.write_text('{"a": 1}\n\n{"a" 2}\n{"a": 3}\n', encoding="utf-8")
    with pytest.raises(DataError, match=r"data\.jsonl:3: invalid JSON \(Expecting ':'"):
        read_jsonl(p)


def test_error_is_raised_lazily_at_the_bad_line(tmp_path: Path) -> None:
    p = tmp_path / "data.jsonl"
    p.write_text('{"a": 1}\n{"a": 2}\n{oops\n', encoding="utf-8")
    it = iter_jsonl(p)
    assert next(it) == {"a": 1}
    assert next(it) == {"a": 2}
    with pytest.raises(DataError, match=r":3: invalid JSON"):
        next(it)


@pytest.mark.parametrize(
    ("line", "kind"), [("[1, 2]", "list"), ("3", "int"), ('"s"', "str"), ("null", "NoneType")]
)
def test_non_object_line_is_rejected(tmp_path: Path, line: str, kind: str) -> None:
    p = tmp_path / "x.jsonl"
    p.write_text(f'{{"a": 1}}\n{line}\n', encoding="utf-8")
    with pytest.raises(DataError, match=rf"x\.jsonl:2: expected a JSON object, got {kind}"):
        read_jsonl(p)


def test_invalid_utf8_names_line(tmp_path: Path) -> None:
    p = tmp_path / "x.jsonl"
    p.write_bytes(b'{"a": 1}\n{"a": "\xff"}\n')
    with pytest.raises(DataError, match=r"x\.jsonl:2: invalid UTF-8"):
        read_jsonl(p)


def test_missing_file_names_path(tmp_path: Path) -> None:
    p = tmp_path / "nope.jsonl"
    with pytest.raises(DataError, match=r"nope\.jsonl"):
        read_jsonl(p)
    # DataError is both an LLMCoreError and a ValueError.
    with pytest.raises(LLMCoreError):
        read_jsonl(p)


# --- atomic writes ---------------------------------------------------------------------------


def test_write_jsonl_round_trip_and_parents(tmp_path: Path) -> None:
    p = tmp_path / "a" / "b" / "rows.jsonl"
    rows = [{"id": 1, "text": "héllo\nworld"}, {"id": 2, "nested": {"x": [1, 2.5, None]}}]
    assert write_jsonl(p, rows) == 2
    assert read_jsonl(p) == rows
    # One physical line per row (the newline inside the string is escaped).
    assert len(p.read_text(encoding="utf-8").splitlines()) == 2
    assert _leftovers(p.parent) == []


def test_write_jsonl_accepts_generator(tmp_path: Path) -> None:
    p = tmp_path / "g.jsonl"
    assert write_jsonl(p, ({"i": i} for i in range(5))) == 5
    assert [r["i"] for r in read_jsonl(p)] == list(range(5))


def test_write_jsonl_does_not_clobber_on_exception(tmp_path: Path) -> None:
    p = tmp_path / "rows.jsonl"
    write_jsonl(p, [{"old": True}])

    def rows():
        yield {"new": 1}
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        write_jsonl(p, rows())
    assert read_jsonl(p) == [{"old": True}]
    assert _leftovers(tmp_path) == []


def test_write_jsonl_bad_row_is_data_error(tmp_path: Path) -> None:
    p = tmp_path / "rows.jsonl"
    write_jsonl(p, [{"old": True}])
    with pytest.raises(DataError, match="row 1: row is not JSON-serialisable"):
        write_jsonl(p, [{"a": 1}, {"a": object()}])
    with pytest.raises(DataError, match="row 0: a JSONL row must be a mapping"):
        write_jsonl(p, [[1, 2]])  # type: ignore[list-item]
    with pytest.raises(DataError, match="not JSON-serialisable"):
        write_jsonl(p, [{"a": float("nan")}])
    assert read_jsonl(p) == [{"old": True}]
    assert _leftovers(tmp_path) == []


def test_atomic_write_text_and_json(tmp_path: Path) -> None:
    t = tmp_path / "sub" / "t.txt"
    atomic_write_text(t, "first")
    atomic_write_text(t, "second ✓")
    assert t.read_text(encoding="utf-8") == "second ✓"

    j = tmp_path / "sub" / "o.json"
    atomic_write_json(j, {"b": [1, 2], "a": "x"})
    assert json.loads(j.read_text(encoding="utf-8")) == {"b": [1, 2], "a": "x"}
    assert j.read_text(encoding="utf-8").startswith('{\n  "b"')
    atomic_write_json(j, [1], indent=None)
    assert j.read_text(encoding="utf-8") == "[1]\n"
    assert _leftovers(t.parent) == []


def test_atomic_write_json_unserialisable_keeps_old(tmp_path: Path) -> None:
    j = tmp_path / "o.json"
    atomic_write_json(j, {"ok": 1})
    with pytest.raises(DataError, match=r"o\.json: object is not JSON-serialisable"):
        atomic_write_json(j, {"bad": {1, 2}})
    assert json.loads(j.read_text(encoding="utf-8")) == {"ok": 1}
    assert _leftovers(tmp_path) == []


def test_atomic_write_uses_umask_and_keeps_existing_mode(tmp_path: Path) -> None:
    if os.name != "posix":
        pytest.skip("POSIX permissions")
    p = tmp_path / "m.txt"
    old = os.umask(0o022)
    try:
        atomic_write_text(p, "x")
        assert p.stat().st_mode & 0o777 == 0o644
        p.chmod(0o640)
        atomic_write_text(p, "y")
        assert p.stat().st_mode & 0o777 == 0o640
    finally:
        os.umask(old)


# --- ResultsWriter ---------------------------------------------------------------------------


def test_results_writer_basic(tmp_path: Path) -> None:
    p = tmp_path / "out" / "res.jsonl"
    with ResultsWriter(p) as w:
        assert len(w) == 0 and p.exists()
        w.write({"id": "a", "score": 1})
        w.write({"id": 2, "score": 2})
        assert w.is_done("a") and w.is_done(2) and not w.is_done("2")
        assert "a" in w and w.done_ids == {"a", 2}
        assert w.rows() == [{"id": "a", "score": 1}, {"id": 2, "score": 2}]
    with pytest.raises(LLMCoreError, match="closed"):
        w.write({"id": "b"})


def test_results_writer_rejects_duplicates_and_missing_ids(tmp_path: Path) -> None:
    p = tmp_path / "res.jsonl"
    with ResultsWriter(p, id_key="uid") as w:
        w.write({"uid": 1})
        with pytest.raises(DataError, match="duplicate id 1"):
            w.write({"uid": 1, "x": 2})
        with pytest.raises(DataError, match="no id key 'uid'"):
            w.write({"id": 3})
        with pytest.raises(DataError, match="must be a str or int"):
            w.write({"uid": [3]})
        with pytest.raises(DataError, match="not JSON-serialisable"):
            w.write({"uid": 4, "x": object()})
        assert w.rows() == [{"uid": 1}]
    # A duplicate across sessions is refused too.
    with ResultsWriter(p, id_key="uid") as w, pytest.raises(DataError, match="duplicate id 1"):
        w.write({"uid": 1})


def test_results_writer_resume_after_crash(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    p = tmp_path / "res.jsonl"
    items = [{"id": f"q{i}", "x": i} for i in range(6)]

    # First run processes three items, then "crashes" half-way through the fourth line.
    with ResultsWriter(p) as w:
        for item in w.pending(items)[:3]:
            w.write({"id": item["id"], "y": item["x"] * 10, "text": "ünïcode"})
    with p.open("ab") as f:
        f.write('{"id": "q3", "y": 30, "text": "ü'.encode()[:-1])  # torn mid-character

    with caplog.at_level(logging.WARNING, logger="llmcore.data"), ResultsWriter(p) as w:
        assert w.done_ids == {"q0", "q1", "q2"}
        assert "partial last line 4" in caplog.text
        todo = w.pending(items)
        assert [t["id"] for t in todo] == ["q3", "q4", "q5"]
        for item in todo:
            w.write({"id": item["id"], "y": item["x"] * 10, "text": "ünïcode"})

    rows = read_jsonl(p)
    assert [r["id"] for r in rows] == [f"q{i}" for i in range(6)]
    assert [r["y"] for r in rows] == [i * 10 for i in range(6)]
    # Nothing left to do on a third run.
    with ResultsWriter(p) as w:
        assert w.pending(items) == []
        assert len(w.rows()) == 6


def test_results_writer_keeps_complete_last_row_missing_newline(tmp_path: Path) -> None:
    p = tmp_path / "res.jsonl"
    p.write_text('{"id": 1}\n{"id": 2}', encoding="utf-8")
    with ResultsWriter(p) as w:
        assert w.done_ids == {1, 2}
        w.write({"id": 3})
    assert read_jsonl(p) == [{"id": 1}, {"id": 2}, {"id": 3}]


def test_results_writer_torn_last_line_followed_by_blank(tmp_path: Path) -> None:
    p = tmp_path / "res.jsonl"
    p.write_text('{"id": 1}\n{"id": 2, "a\n\n', encoding="utf-8")
    with ResultsWriter(p) as w:
        assert w.done_ids == {1}
        w.write({"id": 2})
    assert p.read_text(encoding="utf-8") == '{"id": 1}\n{"id": 2}\n'


def test_results_writer_earlier_corruption_is_an_error(tmp_path: Path) -> None:
    p = tmp_path / "res.jsonl"
    original = '{"id": 1}\n{"id": 2, oops\n{"id": 3}\n'
    p.write_text(original, encoding="utf-8")
    with pytest.raises(DataError, match=r"res\.jsonl:2: invalid JSON"):
        ResultsWriter(p)
    assert p.read_text(encoding="utf-8") == original  # nothing truncated


@pytest.mark.parametrize(
    ("content", "match"),
    [
        ('{"id": 1}\n{"id": 1}\n', r":2: duplicate id 1"),
        ('{"id": 1}\n{"x": 1}\n', r":2: row has no id key 'id'"),
        ('{"id": 1}\n[1]\n', r":2: expected a JSON object"),
    ],
)
def test_results_writer_bad_complete_rows_are_errors(
    tmp_path: Path, content: str, match: str
) -> None:
    p = tmp_path / "res.jsonl"
    p.write_text(content, encoding="utf-8")
    with pytest.raises(DataError, match=match):
        ResultsWriter(p)


def test_results_writer_unreadable_path_is_data_error(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="cannot read results file"):
        ResultsWriter(tmp_path)  # a directory


def test_results_writer_two_writers_share_one_file(tmp_path: Path) -> None:
    p = tmp_path / "res.jsonl"
    with ResultsWriter(p) as a, ResultsWriter(p) as b:
        assert a.write({"id": "x", "by": "a"})
        assert b.is_done("x") and b.pending([{"id": "x"}, {"id": "y"}]) == [{"id": "y"}]
        assert b.write({"id": "y", "by": "b"})
        # a started "y" before it saw b's row: its write is skipped, not duplicated
        assert a.write({"id": "y", "by": "a"}) is False
        assert a.done_ids == {"x", "y"} and len(a) == 2
        with pytest.raises(DataError, match="duplicate id 'x'"):
            a.write({"id": "x"})  # its own row: still a caller error
        assert b.rows() == [{"id": "x", "by": "a"}, {"id": "y", "by": "b"}]


def test_results_writer_repairs_a_dead_writers_torn_tail(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    p = tmp_path / "res.jsonl"
    with ResultsWriter(p) as w:
        w.write({"id": 1})
        with p.open("ab") as f:  # another process died half-way through its line
            f.write(b'{"id": 2, "te')
        with caplog.at_level(logging.WARNING, logger="llmcore.data"):
            assert w.write({"id": 3})
        assert "stopped mid-write" in caplog.text and not w.is_done(2)
    assert read_jsonl(p) == [{"id": 1}, {"id": 3}]


def test_results_writer_names_the_line_of_a_bad_row_from_another_writer(tmp_path: Path) -> None:
    p = tmp_path / "res.jsonl"
    with ResultsWriter(p) as w:
        w.write({"id": 1})
        with p.open("ab") as f:
            f.write(b'{"id": 2}\n[2]\n')
        with pytest.raises(DataError, match=r"res\.jsonl:3: expected a JSON object"):
            w.is_done(2)


_WORKER = """
import sys
from llmcore.data import ResultsWriter
with ResultsWriter(sys.argv[1]) as w:
    for i in range(int(sys.argv[2])):
        if not w.is_done(i):
            w.write({"id": i, "worker": sys.argv[3]})
"""


def test_results_writer_concurrent_processes_never_duplicate(tmp_path: Path) -> None:
    """Two processes race through the same 150 ids on one file: every id lands exactly once
    and the file stays valid JSONL."""
    import subprocess
    import sys

    p = tmp_path / "res.jsonl"
    procs = [
        subprocess.Popen([sys.executable, "-c", _WORKER, str(p), "150", name])
        for name in ("a", "b")
    ]
    assert [pr.wait(timeout=120) for pr in procs] == [0, 0]
    rows = read_jsonl(p)
    assert sorted(r["id"] for r in rows) == list(range(150))


def test_filter_pending_key_variants() -> None:
    items = [{"id": 1}, {"id": 2}, {"id": 3}]
    assert filter_pending(items, {2}) == [{"id": 1}, {"id": 3}]
    assert filter_pending(items, [1, 3], key=lambda it: it["id"]) == [{"id": 2}]
    assert filter_pending(["a", "b"], {"b"}, key=lambda s: s) == ["a"]


# --- datasets ---------------------------------------------------------------------------------


def test_dataset_round_trip() -> None:
    rows = [
        {"id": 1, "text": "a", "scores": [0.5, 1.0], "meta": {"k": "v"}},
        {"id": 2, "text": "b", "scores": [], "meta": {"k": "w"}},
    ]
    ds = to_dataset(rows)
    assert ds.num_rows == 2 and ds.column_names == ["id", "text", "scores", "meta"]
    assert from_dataset(ds) == rows
    assert from_dataset(ds.to_list()) == rows
    assert from_dataset(to_dataset([])) == []


def test_to_dataset_ragged_rows_keep_all_columns() -> None:
    ds = to_dataset([{"a": 1}, {"a": 2, "b": "x"}])
    assert ds.column_names == ["a", "b"]
    assert from_dataset(ds) == [{"a": 1, "b": None}, {"a": 2, "b": "x"}]


def test_to_dataset_mixed_types_is_data_error() -> None:
    with pytest.raises(DataError, match="cannot be converted to a Dataset"):
        to_dataset([{"a": 1}, {"a": "x"}])
