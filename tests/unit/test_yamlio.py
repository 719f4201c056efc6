from __future__ import annotations

import pytest

from lab.errors import InputError
from lab.yamlio import dotted, load_documents


def test_lines_are_recorded_for_nested_fields() -> None:
    doc = load_documents("a: 1\nb:\n  - x: 2\n    y: [1, 2]\n", "f.yaml")[0]
    assert doc.data == {"a": 1, "b": [{"x": 2, "y": [1, 2]}]}
    assert doc.line(("b", 0, "y")) == 4
    assert doc.line(("b", 0, "missing")) == 3  # falls back to the nearest ancestor


def test_error_names_file_line_and_field() -> None:
    doc = load_documents("a:\n  b: 3\n", "lab.yaml")[0]
    err = doc.error(("a", "b"), "must be text", hint="quote it")
    assert str(err) == "lab.yaml:2: field 'a.b': must be text\n  fix: quote it"


def test_invalid_yaml_reports_line() -> None:
    with pytest.raises(InputError) as exc:
        load_documents("a: 1\n b: 2\n  - c\n", "bad.yaml")
    assert exc.value.file == "bad.yaml" and exc.value.line is not None


def test_multi_document_and_typed_keys() -> None:
    docs = load_documents("1: one\n---\nk: v\n")
    assert docs[0].data == {"1": "one"} and docs[1].data == {"k": "v"}


def test_dotted_paths() -> None:
    assert dotted(("steps", 2, "checks", 0, "type")) == "steps[2].checks[0].type"
