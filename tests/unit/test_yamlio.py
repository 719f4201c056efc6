from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from lab import limits
from lab.errors import InputError
from lab.yamlio import dotted, load_data, load_documents, load_file, load_json, read_text


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


# --- the safe loader: hostile input -------------------------------------------------------

REPO = Path(__file__).resolve().parents[2]


def laughs(levels: int = 9, width: int = 9) -> str:
    """The classic: each level is a list of `width` aliases to the level below."""
    lines = ['a0: &a0 ["lol"]']
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * width) + "]"
              for i in range(1, levels + 1)]
    return "\n".join(lines) + "\n"


def map_doubling(levels: int = 40) -> str:
    """Mappings, each holding its predecessor twice: 2**40 nodes from 1.3 KB."""
    lines = ["x0: &x0 {k: v}"]
    lines += [f"x{i}: &x{i} {{a: *x{i - 1}, b: *x{i - 1}}}" for i in range(1, levels + 1)]
    return "\n".join(lines) + "\n"


def merge_doubling(levels: int = 40) -> str:
    """The same through merge keys, which a loader also has to expand."""
    lines = ["m0: &m0 {k0: v}"]
    lines += [f"m{i}: &m{i} {{<<: *m{i - 1}, k{i}: *m{i - 1}}}" for i in range(1, levels + 1)]
    return "\n".join(lines) + "\n"


def fan_out(width: int = 1200) -> str:
    """No nesting trick: one 1200-item anchor used 1200 times in one list (1.4M values)."""
    return ("base: &b [" + ", ".join(["1"] * width) + "]\nuse: ["
            + ", ".join(["*b"] * width) + "]\n")


def spread_over_documents(docs: int = 40) -> str:
    """Each document just under the limit on its own; together far over it."""
    per_doc = "x: &x [" + ", ".join(["1"] * 100) + "]\ny: [" + ", ".join(["*x"] * 60) + "]\n"
    return "---\n".join([per_doc] * docs)


BOMBS = {"laughs": laughs(), "map-doubling": map_doubling(),
         "merge-doubling": merge_doubling(), "fan-out": fan_out(),
         "spread-over-documents": spread_over_documents(),
         "deep-flow": "[" * 50_000 + "]" * 50_000,
         "deep-block": "".join(" " * i + "a:\n" for i in range(1000))}

MEASURE = textwrap.dedent("""
    import json, resource, sys, time
    from lab.errors import InputError
    from lab.yamlio import load_documents
    text = sys.stdin.read()
    t0 = time.perf_counter()
    try:
        load_documents(text, "bomb.yaml")
        outcome = "loaded"
    except InputError as exc:
        outcome = str(exc)
    seconds = time.perf_counter() - t0
    # Peak RSS of this process's own memory: VmHWM belongs to the address space exec made.
    # (ru_maxrss keeps the parent's high-water mark across fork+exec: a big pytest inflates it.)
    try:
        hwm = next(l for l in open("/proc/self/status") if l.startswith("VmHWM:"))
        rss = int(hwm.split()[1]) / 1024
    except (OSError, StopIteration):
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"outcome": outcome, "seconds": seconds, "rss_mb": rss}))
""")


@pytest.mark.parametrize("shape", sorted(BOMBS))
def test_alias_bombs_are_refused_fast_and_small(shape: str) -> None:
    """Measured in a fresh process: its peak RSS covers Python, PyYAML and the attempt
    (the loader of main before this change took 5.6 s and 248 MB for a 6-level `laughs`,
    and ran out of a 1 GB cap after 24 s on the 9-level one below)."""
    out = subprocess.run([sys.executable, "-c", MEASURE], input=BOMBS[shape], text=True,
                         capture_output=True, cwd=REPO, timeout=60, check=True)
    result = json.loads(out.stdout)
    assert result["outcome"].startswith("bomb.yaml:"), result
    assert "limit" in result["outcome"] or "nesting" in result["outcome"], result
    assert result["seconds"] < 0.5, result
    assert result["rss_mb"] < 100, result


def test_limits_are_named_with_the_field() -> None:
    with pytest.raises(InputError) as exc:
        load_documents(laughs(), "bomb.yaml")
    assert exc.value.field is not None and exc.value.field.startswith("a")
    assert "MAX_NODES" in str(exc.value)
    with pytest.raises(InputError) as exc:
        load_documents("spec:\n  x: " + "[" * 200 + "]" * 200 + "\n", "deep.yaml")
    assert "MAX_DEPTH" in str(exc.value) and exc.value.field.startswith("spec.x")


def test_aliases_and_merge_keys_load_as_copies() -> None:
    doc = load_documents(textwrap.dedent("""
        base: &base {image: python, env: [{name: A, value: "1"}]}
        one: *base
        two:
          <<: *base
          image: torch          # the mapping's own key wins over the merged one
        three:
          <<: [{a: 1, b: 1}, {a: 2, c: 2}]   # the earlier source wins
    """), "m.yaml")[0]
    assert doc.data["one"] == doc.data["base"] and doc.data["one"] is not doc.data["base"]
    doc.data["one"]["env"].append("x")  # copies: mutating one use leaves the others alone
    assert doc.data["base"]["env"] == [{"name": "A", "value": "1"}]
    assert doc.data["two"] == {"image": "torch", "env": [{"name": "A", "value": "1"}]}
    assert doc.data["three"] == {"a": 1, "b": 1, "c": 2}
    assert doc.line(("two", "image")) == 6


def test_recursive_and_unknown_aliases_are_errors() -> None:
    with pytest.raises(InputError, match="recursive"):
        load_documents("a: &a [1, *a]\n", "r.yaml")
    with pytest.raises(InputError, match=r"unknown alias '\*nope'"):
        load_documents("a: *nope\n", "r.yaml")


def test_timestamps_stay_text_as_kubectl_keeps_them() -> None:
    data = load_documents("a: 2024-13-45\nb: 2024-01-02\nc: 2024-01-02T03:04:05Z\n")[0].data
    assert data == {"a": "2024-13-45", "b": "2024-01-02", "c": "2024-01-02T03:04:05Z"}


@pytest.mark.parametrize("text,tag", [("a: !!binary aGVsbG8=\n", "!!binary"),
                                      ("a: !!python/object:os.system {}\n", "!!python"),
                                      ("a: !!set {x, y}\n", "!!set"),
                                      ("a: !custom 3\n", "!custom")])
def test_tags_beyond_plain_data_are_refused(text: str, tag: str) -> None:
    with pytest.raises(InputError, match="not supported") as exc:
        load_documents(text, "t.yaml")
    assert tag in str(exc.value) and exc.value.field == "a"


def test_integers_beyond_64_bits_are_refused() -> None:
    with pytest.raises(InputError, match="64 bits"):
        load_documents("replicas: 99999999999999999999\n", "i.yaml")
    with pytest.raises(InputError, match=r"not a valid integer|64 bits"):
        load_documents("replicas: " + "9" * 5000 + "\n", "i.yaml")  # Python's digit limit
    assert load_documents(f"n: {limits.INT64_MAX}\n")[0].data == {"n": limits.INT64_MAX}


def test_non_utf8_names_the_byte_offset_and_line(tmp_path: Path) -> None:
    path = tmp_path / "latin1.yaml"
    path.write_bytes(b"a: 1\nname: caf" + b"\xe9\n")
    with pytest.raises(InputError) as exc:
        load_file(path)
    assert "byte 0xe9 at byte offset 14" in str(exc.value) and exc.value.line == 2
    path.write_bytes(b"\xef\xbb\xbfa: 1\n")  # a UTF-8 BOM is fine
    assert load_file(path).data == {"a": 1}


def test_oversize_files_are_refused_before_reading(tmp_path: Path) -> None:
    path = tmp_path / "big.yaml"
    path.write_bytes(b"# " + b"x" * limits.MAX_FILE_BYTES)
    with pytest.raises(InputError, match="MAX_FILE_BYTES"):
        read_text(path)
    with pytest.raises(InputError, match="cannot read"):
        read_text(tmp_path / "missing.yaml")
    with pytest.raises(InputError, match="not a valid path"):
        read_text(Path("nul\0byte.yaml"))


def test_empty_documents_are_skipped_as_kubectl_skips_them() -> None:
    docs = load_documents("---\n---\n# only a comment\n---\na: 1\n---\n~\n---\nnull\n")
    assert [d.data for d in docs] == [{"a": 1}]


def test_duplicate_keys_error_in_kflab_files_and_are_kept_for_manifests() -> None:
    text = "a: 1\nb:\n  c: 1\n  c: 2\n"
    with pytest.raises(InputError, match="given twice") as exc:
        load_documents(text, "lab.yaml")
    assert exc.value.field == "b.c" and exc.value.line == 4
    doc = load_documents(text, "m.yaml", duplicates="keep")[0]
    assert doc.data["b"]["c"] == 2  # the later wins, as the API server decodes
    assert doc.duplicates == [(("b", "c"), 4)]


def test_keys_are_text_and_complex_keys_refused() -> None:
    assert load_documents("1: a\ntrue: b\nnull: c\n")[0].data == {"1": "a", "true": "b",
                                                                   "null": "c"}
    with pytest.raises(InputError, match="mapping key"):
        load_documents("? [a, b]\n: c\n")


def test_control_characters_are_a_yaml_error_with_a_line() -> None:
    with pytest.raises(InputError, match="invalid YAML") as exc:
        load_documents("a: 1\nb: x\x07y\n", "c.yaml")
    assert exc.value.line == 2


def test_json_errors_stay_json_errors() -> None:
    with pytest.raises(InputError, match=r"invalid JSON: Expecting ',' delimiter") as exc:
        load_json('{"instances": [1, 2\n', "body.json")
    assert exc.value.line == 2
    with pytest.raises(InputError, match="MAX_DEPTH"):
        load_json("[" * 100_000 + "]" * 100_000, "deep.json")
    with pytest.raises(InputError, match="MAX_DEPTH"):
        load_json("[" * 150 + "]" * 150, "deep.json")
    assert load_data('{"a": [1]}', "b.json") == {"a": [1]}
    assert load_data("instances: [[1, 2]]\n", "b.yaml") == {"instances": [[1, 2]]}
