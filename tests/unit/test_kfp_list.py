"""KFP 2.16's list semantics in kflab's local API (lab/webui/kfp_list.py): the filter as
parseAPIFilter and filter.go read it, sort_by and page sizes as list.go NewOptions and
validatePageSize take them, page tokens in KFP's own format, with KFP's messages. Expected
values come from KFP 2.16.0's own tests and code (cited per test)."""

from __future__ import annotations

import base64
import json
import urllib.parse
from typing import Any

import pytest

from lab.webui import kfp_list
from lab.webui.kfp_list import RUNS, ListError, options, page


def runs(n: int) -> list[dict[str, Any]]:
    """n runs created a second apart, every other one SUCCEEDED."""
    return [{"run_id": f"id-{i:02d}", "display_name": f"run {i}",
             "created_at": f"2026-01-01T00:00:{i:02d}Z", "experiment_id": "e1" if i < 3 else "e2",
             "state": "SUCCEEDED" if i % 2 else "FAILED", "storage_state": "AVAILABLE",
             "finished_at": "1970-01-01T00:00:00Z"} for i in range(n)]


def names(query: dict[str, str], records: list[dict[str, Any]]) -> list[str]:
    shown, _, _ = page(options(RUNS, query), records)
    return [r["display_name"] for r in shown]


def pred(op: Any, key: str, **value: Any) -> str:
    return json.dumps({"predicates": [{"operation": op, "key": key, **value}]})


def test_filter_operations_on_runs() -> None:
    """Every Predicate.Operation, by name and by number (kfp.Client sends numbers,
    client.py _FILTER_OPERATIONS), with camelCase and proto value names."""
    rs = runs(6)
    assert names({"filter": pred(1, "display_name", stringValue="run 2")}, rs) == ["run 2"]
    assert names({"filter": pred("EQUALS", "name", string_value="run 2")}, rs) == ["run 2"]
    assert len(names({"filter": pred("NOT_EQUALS", "state", stringValue="FAILED")}, rs)) == 3
    after = "2026-01-01T00:00:03Z"
    assert names({"filter": pred("GREATER_THAN", "created_at", timestampValue=after)}, rs) == \
        ["run 4", "run 5"]
    assert names({"filter": pred(5, "created_at", timestamp_value=after)}, rs) == \
        ["run 3", "run 4", "run 5"]
    assert names({"filter": pred("LESS_THAN", "created_at", timestampValue=after)}, rs) == \
        ["run 0", "run 1", "run 2"]
    assert len(names({"filter": pred(7, "created_at", timestampValue=after)}, rs)) == 4
    assert names({"filter": pred("IN", "run_id", stringValues={"values": ["id-01", "id-04"]})},
                 rs) == ["run 1", "run 4"]
    assert len(names({"filter": pred(9, "display_name", stringValue="run")}, rs)) == 6
    both = json.dumps({"predicates": [
        {"operation": "EQUALS", "key": "experiment_id", "stringValue": "e2"},
        {"operation": "EQUALS", "key": "state", "stringValue": "SUCCEEDED"}]})
    assert names({"filter": both}, rs) == ["run 3", "run 5"]


def test_filter_is_url_unescaped_as_parseAPIFilter_does() -> None:
    """list_request_util_test.go TestParseAPIFilter_DecodesEncodedString: the KFP UI sends
    encodeURIComponent(JSON.stringify(filter))."""
    encoded = ("%7B%22predicates%22%3A%5B%7B%22operation%22%3A%22EQUALS%22%2C%22key%22%3A%22"
               "testkey%22%2C%22stringValue%22%3A%22testvalue%22%7D%5D%7D")
    preds = kfp_list.parse_filter(encoded)
    assert [(p.operation, p.key, p.value) for p in preds] == [("EQUALS", "testkey",
                                                               "testvalue")]
    spaced = pred("EQUALS", "display_name", stringValue="run+1")  # '+' reads as a space
    assert names({"filter": spaced}, runs(3)) == ["run 1"]


@pytest.mark.parametrize(("flt", "message"), [
    ("lkjlkjlkj", 'failed to parse valid filter from "lkjlkjlkj"'),  # TestParseAPIFilter_Invalid
    ('{"predicates": [], "x": 1}', 'unknown field "x"'),
    (pred("EQUALS", "display_name", stringValue="a", intValue=1), "oneof"),
    (pred("FOO", "display_name", stringValue="a"), 'invalid value for enum field operation'),
    (pred(4, "display_name", stringValue="a"),
     "Error using Filter.Predicate.Operation with v2beta1.Predicate_Operation"),
    (pred("EQUALS", "display_name"), "Error using Filter.Predicate.Value with <nil>"),
    (pred("EQUALS", "", stringValue="a"),
     "Predicate key cannot be empty for operation EQUALS and value a"),
    (pred("IN", "run_id", stringValue="a"), "cannot use IN operator with scalar type string"),
    (pred("EQUALS", "run_id", stringValues={"values": ["a"]}),
     "cannot use scalar operator EQUALS on array type []string"),
    (pred("IS_SUBSTRING", "run_id", intValue=3),
     "cannot use non string value type string with operator 3"),
    (pred("EQUALS", "no_such", stringValue="a"),
     'no support for filtering on unrecognized field "no_such"'),
    ("%zz", "invalid URL escape"),
    ("[" * 50 + "]" * 50, "nested deeper than"),
])
def test_refused_filters_get_kfps_message(flt: str, message: str) -> None:
    with pytest.raises(ListError) as err:
        options(RUNS, {"filter": flt})
    assert message in str(err.value), str(err.value)
    assert err.value.http == 400 and err.value.code == 3


def test_sort_and_paging_as_list_go() -> None:
    """Default order created_at ascending, 'name desc', page tokens, page sizes
    (list.go validatePageSize: 0 -> 20, over 200 -> 200)."""
    rs = runs(25)
    assert names({}, rs)[:2] == ["run 0", "run 1"] and len(names({}, rs)) == 20
    assert names({"sort_by": "created_at desc", "page_size": "1"}, rs) == ["run 24"]
    assert names({"sort_by": "name desc", "page_size": "2"}, rs) == ["run 9", "run 8"]
    assert len(names({"page_size": "1000"}, runs(250))) == 200
    seen, token = [], ""
    for _ in range(10):
        shown, total, token = page(options(RUNS, {"sort_by": "created_at desc",
                                                  "page_size": "7", "page_token": token}), rs)
        assert total == 25
        seen += [r["display_name"] for r in shown]
        if not token:
            break
    assert seen == [f"run {i}" for i in range(24, -1, -1)]


def test_a_token_is_kfps_own_and_keeps_its_filter() -> None:
    """list.go token: base64 of the JSON struct; the filter travels in it (keys as model
    columns), so the next page needs neither sort_by nor filter again."""
    flt = pred("EQUALS", "experiment_id", stringValue="e2")
    _, total, token = page(options(RUNS, {"filter": flt, "page_size": "2"}), runs(8))
    data = json.loads(base64.b64decode(token))
    assert data["SortByFieldName"] == "CreatedAtInSec" and data["KeyFieldName"] == "UUID"
    assert data["Filter"]["EQ"] == {"ExperimentUUID": ["e2"]} and data["IsDesc"] is False
    assert total == 5
    assert names({"page_token": token, "page_size": "2"}, runs(8)) == ["run 5", "run 6"]
    with pytest.raises(ListError) as err:  # validatedListOptions: same criteria or none
        options(RUNS, {"page_token": token, "sort_by": "name"})
    assert "page token does not match the supplied sort by" in str(err.value)


@pytest.mark.parametrize(("query", "message"), [
    ({"sort_by": "unknownfield"}, 'Invalid sorting field: "unknownfield" on listable type Run'),
    ({"sort_by": "created_at descending"}, "Received invalid sort by format"),
    ({"sort_by": "created_at asc hello"}, "Received invalid sort by format"),
    ({"page_size": "-1"}, "The page size should be greater than 0. Got -1"),
    ({"page_token": "!!!"}, "InvalidInputError: Invalid package token"),
    ({"page_token": base64.b64encode(b"[1]").decode()}, "Invalid package token"),
    ({"page_token": base64.b64encode(json.dumps(
        {"SortByFieldName": "Name", "KeyFieldName": "UUID", "ModelName": "experiments"}
    ).encode()).decode()}, "Invalid package token"),
])
def test_refused_list_options_get_kfps_message(query: dict[str, str], message: str) -> None:
    """list_test.go TestNewOptions_InvalidSortOptions, ..._InvalidPageSize; list.go
    token.unmarshal. A token for another resource is refused too."""
    with pytest.raises(ListError) as err:
        options(RUNS, query)
    assert message in str(err.value)


def test_every_resource_lists_by_the_fields_kfp_maps() -> None:
    """APIToModelFieldMap of each model (apiserver/model/*.go): a field of another resource
    is refused, the v1 alias of a field is taken."""
    for listable, alias, other in [(kfp_list.EXPERIMENTS, "name", "pipeline_id"),
                                   (kfp_list.PIPELINES, "id", "state"),
                                   (kfp_list.VERSIONS, "pipeline_version_id", "run_id"),
                                   (kfp_list.RECURRING_RUNS, "recurring_run_id", "state")]:
        options(listable, {"filter": pred("EQUALS", alias, stringValue="x")})
        with pytest.raises(ListError):
            options(listable, {"filter": pred("EQUALS", other, stringValue="x")})


def test_get_pipeline_id_style_lookup_finds_only_that_name() -> None:
    """kfp.Client.get_pipeline_id: EQUALS on display_name over pipelines."""
    pipes = [{"pipeline_id": "p1", "name": "a", "display_name": "a",
              "created_at": "2026-01-01T00:00:00Z"},
             {"pipeline_id": "p2", "name": "b", "display_name": "b",
              "created_at": "2026-01-01T00:00:01Z"}]
    query = {"filter": urllib.parse.quote(pred(1, "display_name", stringValue="b"))}
    shown, _, _ = page(options(kfp_list.PIPELINES, query), pipes)
    assert [p["pipeline_id"] for p in shown] == ["p2"]
    query = {"filter": pred(1, "display_name", stringValue="no-such-name")}
    assert page(options(kfp_list.PIPELINES, query), pipes)[0] == []
