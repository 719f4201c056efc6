"""KFP 2.16's list semantics -- filter, sort, page size and page tokens -- over the local
API's records, answered as the KFP API server answers them (kubeflow/pipelines 2.16.0):

- the filter is a JSON `v2beta1.Filter` (backend/api/v2beta1/filter.proto), parsed as
  protojson parses it (proto names or camelCase, an operation by name or number, exactly one
  value), checked as `apiserver/filter/filter.go` `toPredicate` and `checkPredicate` check
  it, its keys mapped per resource as `ReplaceKeys` maps them (each model's
  `APIToModelFieldMap`, `apiserver/model/*.go`), and applied as the SQL that
  `Filter.AddToSelect` builds would apply it (timestamps compare as Unix seconds);
- `sort_by` is "field", "field asc" or "field desc" (`apiserver/list/list.go` `NewOptions`);
  the default order is `created_at` ascending; ties are broken by the primary key in the
  same direction (`AddSortingToSelect`);
- `page_size` 0 means 20 and anything over 200 means 200 (`validatePageSize`);
- `next_page_token` is KFP's own: base64 of the JSON `token` struct naming the next row's
  sort value and key (`NextPageToken`), so a token is read back exactly as KFP reads it
  (`NewOptionsFromToken`), and a token given with a different sort or filter is refused
  (`validatedListOptions` in `apiserver/server/list_request_util.go`).

Errors carry KFP's messages (`common/util/error.go`): the HTTP answer's `message` is the
wrapped internal error, its `details` the user-facing message (kfp_api.ApiError).
"""

from __future__ import annotations

import base64
import binascii
import calendar
import json
import re
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from lab.limits import MAX_FILTER_CHARS, MAX_FILTER_DEPTH

DEFAULT_PAGE_SIZE = 20  # list.go defaultPageSize
MAX_PAGE_SIZE = 200  # list.go maxPageSize

# Predicate.Operation (filter.proto): name <-> number.
OPERATIONS = {"OPERATION_UNSPECIFIED": 0, "EQUALS": 1, "NOT_EQUALS": 2, "GREATER_THAN": 3,
              "GREATER_THAN_EQUALS": 5, "LESS_THAN": 6, "LESS_THAN_EQUALS": 7, "IN": 8,
              "IS_SUBSTRING": 9}
_OP_NAMES = {v: k for k, v in OPERATIONS.items()}
# filter.go filterForMarshaling: the token's Filter groups, in Go's field order.
_GROUPS = {"EQUALS": "EQ", "NOT_EQUALS": "NEQ", "GREATER_THAN": "GT",
           "GREATER_THAN_EQUALS": "GTE", "LESS_THAN": "LT", "LESS_THAN_EQUALS": "LTE",
           "IN": "IN", "IS_SUBSTRING": "SUBSTRING"}
# the oneof `value` of Predicate, by proto name, with its JSON (camelCase) name
_VALUES = {"int_value": "intValue", "long_value": "longValue", "string_value": "stringValue",
           "timestamp_value": "timestampValue", "int_values": "intValues",
           "long_values": "longValues", "string_values": "stringValues"}


class ListError(Exception):
    """A list request KFP refuses: HTTP status, gRPC code, the internal (wrapped) message
    and the user-facing one (util.UserError's internalError and externalMessage)."""

    def __init__(self, internal: str, external: str, http: int = 400, code: int = 3) -> None:
        super().__init__(internal)
        self.external = external
        self.http = http
        self.code = code


def _invalid(message: str) -> ListError:
    """util.NewInvalidInputError."""
    return ListError(f"Invalid input error: {message}", message)


def _unknown_api(what: str, go_type: str) -> ListError:
    """util.NewUnknownApiVersionError: "Error using %s with %T"."""
    message = f"Error using {what} with {go_type}"
    return ListError(f"UnknownApiVersionError: {message}", message)


# --- resources: the fields KFP lists by (model/*.go) -------------------------------------


def epoch(stamp: Any) -> int:
    """An RFC 3339 time (what the API writes) as Unix seconds (the column KFP compares)."""
    if not isinstance(stamp, str) or not stamp:
        return 0
    text = stamp.rstrip("Z").split(".")[0].split("+")[0]
    try:
        return calendar.timegm(time.strptime(text, "%Y-%m-%dT%H:%M:%S"))
    except ValueError:
        return 0


def _v1_state(state: Any) -> str:
    """model/run.go RuntimeState.ToV1: the `Conditions` column a run's `status` maps to."""
    return {"PENDING": "Pending", "PAUSED": "Pending", "RUNNING": "Running",
            "SUCCEEDED": "Succeeded", "SKIPPED": "Skipped", "FAILED": "Failed",
            "CANCELED": "Failed", "CANCELING": "Terminating"}.get(str(state), "Unknown")


Getter = Callable[[dict[str, Any]], Any]


def _text(key: str) -> Getter:
    return lambda rec: str(rec.get(key) or "")


def _time(key: str) -> Getter:
    return lambda rec: epoch(rec.get(key))


@dataclass(frozen=True)
class Listable:
    """One resource's list.Listable: its Go type name (in messages), table prefix, the API
    field -> model column map, and how each column is read from an API-shaped record."""

    type_name: str
    model: str  # GetModelName: the prefix of filter keys ("" for runs)
    fields: dict[str, str]  # APIToModelFieldMap
    columns: dict[str, Getter]  # model column -> value of an API-shaped record
    key: str = "UUID"  # PrimaryKeyColumnName
    metric_sort: bool = False  # runs also sort by "metric:NAME" (Run.GetField)

    def prefix(self) -> str:
        return f"{self.model}." if self.model else ""


RUNS = Listable("Run", "", {
    # model/run.go runAPIToModelFieldMap
    "run_id": "UUID", "id": "UUID", "display_name": "DisplayName", "name": "DisplayName",
    "created_at": "CreatedAtInSec", "finished_at": "FinishedAtInSec",
    "description": "Description", "scheduled_at": "ScheduledAtInSec",
    "storage_state": "StorageState", "status": "Conditions", "namespace": "Namespace",
    "experiment_id": "ExperimentUUID", "state": "State", "state_history": "StateHistory",
    "runtime_details": "PipelineRuntimeManifest", "recurring_run_id": "JobUUID"}, {
    "UUID": _text("run_id"), "DisplayName": _text("display_name"),
    "CreatedAtInSec": _time("created_at"), "FinishedAtInSec": _time("finished_at"),
    "Description": _text("description"), "ScheduledAtInSec": _time("scheduled_at"),
    "StorageState": _text("storage_state"), "Conditions": lambda r: _v1_state(r.get("state")),
    "Namespace": _text("namespace"), "ExperimentUUID": _text("experiment_id"),
    "State": _text("state"),
    "StateHistory": lambda r: json.dumps(r.get("state_history") or [], sort_keys=True),
    "PipelineRuntimeManifest": lambda r: "", "JobUUID": _text("recurring_run_id")},
    metric_sort=True)
EXPERIMENTS = Listable("Experiment", "experiments", {
    # model/experiment.go experimentAPIToModelFieldMap
    "id": "UUID", "experiment_id": "UUID", "name": "Name", "display_name": "Name",
    "created_at": "CreatedAtInSec", "last_run_created_at": "LastRunCreatedAtInSec",
    "description": "Description", "namespace": "Namespace",
    "storage_state": "StorageState"}, {
    "UUID": _text("experiment_id"), "Name": _text("display_name"),
    "CreatedAtInSec": _time("created_at"),
    "LastRunCreatedAtInSec": _time("last_run_created_at"),
    "Description": _text("description"), "Namespace": _text("namespace"),
    "StorageState": _text("storage_state")})
PIPELINES = Listable("Pipeline", "pipelines", {
    # model/pipeline.go pipelineAPIToModelFieldMap
    "id": "UUID", "pipeline_id": "UUID", "name": "Name", "display_name": "DisplayName",
    "created_at": "CreatedAtInSec", "description": "Description", "namespace": "Namespace"}, {
    "UUID": _text("pipeline_id"), "Name": _text("name"), "DisplayName": _text("display_name"),
    "CreatedAtInSec": _time("created_at"), "Description": _text("description"),
    "Namespace": _text("namespace")})
VERSIONS = Listable("PipelineVersion", "pipeline_versions", {
    # model/pipeline_version.go PipelineVersion.APIToModelFieldMap
    "id": "UUID", "pipeline_version_id": "UUID", "name": "Name", "display_name": "DisplayName",
    "created_at": "CreatedAtInSec", "status": "Status", "description": "Description",
    "pipeline_spec": "PipelineSpec"}, {
    "UUID": _text("pipeline_version_id"), "Name": _text("name"),
    "DisplayName": _text("display_name"), "CreatedAtInSec": _time("created_at"),
    "Status": lambda r: "READY", "Description": _text("description"),
    "PipelineSpec": lambda r: json.dumps(r.get("pipeline_spec") or {}, sort_keys=True)})
RECURRING_RUNS = Listable("Job", "jobs", {
    # model/job.go jobAPIToModelFieldMap
    "id": "UUID", "recurring_run_id": "UUID", "name": "DisplayName",
    "display_name": "DisplayName", "created_at": "CreatedAtInSec",
    "updated_at": "UpdatedAtInSec", "description": "Description"}, {
    "UUID": _text("recurring_run_id"), "DisplayName": _text("display_name"),
    "CreatedAtInSec": _time("created_at"), "UpdatedAtInSec": _time("updated_at"),
    "Description": _text("description")})


# --- the filter --------------------------------------------------------------------------


@dataclass
class Predicate:
    operation: str
    key: str
    value: Any  # int, str, or a list of int / str; timestamps already Unix seconds
    go_type: str  # the Go type of the value, for KFP's messages: int32, []string, ...


def parse_filter(raw: str) -> list[Predicate]:
    """The predicates of a `filter` query parameter, as list_request_util.go parseAPIFilter
    and filter.go toPredicates read them; errors carry KFP's messages."""
    from lab.webui.jsonlimit import BodyTooDeep, loads

    def bad(why: str) -> ListError:
        return _invalid(f"failed to parse valid filter from {json.dumps(raw[:500])}: "
                        f"proto: {why}")

    if len(raw) > MAX_FILTER_CHARS:
        raise _invalid(f"the filter is {len(raw)} characters, over kflab's limit of "
                       f"{MAX_FILTER_CHARS} (MAX_FILTER_CHARS)")
    # list_request_util.go parseAPIFilter: url.QueryUnescape first (the KFP UI sends
    # encodeURIComponent(JSON.stringify(filter)) as the value), so '+' reads as a space
    bad_escape = re.search(r"%(?![0-9A-Fa-f]{2})", raw)
    if bad_escape:
        raise _invalid(f"failed to parse valid filter from {json.dumps(raw[:500])}: invalid "
                       f"URL escape {json.dumps(raw[bad_escape.start():bad_escape.start() + 3])}")
    text = urllib.parse.unquote_plus(raw)
    try:
        doc = loads(text.encode(), max_depth=MAX_FILTER_DEPTH)
    except BodyTooDeep:
        raise bad(f"nested deeper than {MAX_FILTER_DEPTH} levels: not a v2beta1.Filter"
                  ) from None
    except ValueError as exc:
        raise bad(f"syntax error: {exc}") from None
    if not isinstance(doc, dict):
        raise bad("syntax error: a Filter is a JSON object")
    for name in doc:
        if name != "predicates":
            raise bad(f"unknown field {json.dumps(name)}")
    items = doc.get("predicates")
    if items is None:
        return []
    if not isinstance(items, list):
        raise bad("invalid value for repeated field predicates")
    return [_predicate(p, bad) for p in items]


def _predicate(p: Any, bad: Callable[[str], ListError]) -> Predicate:
    if not isinstance(p, dict):
        raise bad("invalid value for message field predicates: not an object")
    op: Any = 0
    key = ""
    value: Any = None
    go_type = "<nil>"
    seen: str | None = None
    for name, raw in p.items():
        if name == "operation":
            if isinstance(raw, str):
                if raw not in OPERATIONS:
                    raise bad(f"invalid value for enum field operation: {json.dumps(raw)}")
                op = OPERATIONS[raw]
            elif isinstance(raw, int) and not isinstance(raw, bool):
                op = raw
            else:
                raise bad(f"invalid value for enum field operation: {json.dumps(raw)}")
            continue
        if name == "key":
            if not isinstance(raw, str):
                raise bad(f"invalid value for string field key: {json.dumps(raw)[:100]}")
            key = raw
            continue
        proto = name if name in _VALUES else next(
            (k for k, v in _VALUES.items() if v == name), None)
        if proto is None:
            raise bad(f"unknown field {json.dumps(name)}")
        if seen is not None:
            raise bad(f"error parsing {json.dumps(name)}, oneof "
                      f"kubeflow.pipelines.backend.api.v2beta1.Predicate.value is already set")
        seen = proto
        value, go_type = _value(proto, raw, bad)
    name = _OP_NAMES.get(op)
    if name is None or name == "OPERATION_UNSPECIFIED":
        # filter.go toOperation: anything else is an unknown API version
        raise _unknown_api("Filter.Predicate.Operation", "v2beta1.Predicate_Operation")
    if seen is None:
        raise _unknown_api("Filter.Predicate.Value", "<nil>")  # filter.go toValue
    if key == "":
        raise _invalid(f"Predicate key cannot be empty for operation {name} and value "
                       f"{_go_print(value)}")
    pred = Predicate(name, key, value, go_type)
    _check(pred)
    return pred


def _int(raw: Any, bits: int, field_name: str, bad: Callable[[str], ListError]) -> int:
    """protojson's int32/int64: a JSON number or a decimal string, within range."""
    try:
        if isinstance(raw, bool):
            raise ValueError
        if isinstance(raw, float):
            if not raw.is_integer():
                raise ValueError
            raw = int(raw)
        number = int(raw) if isinstance(raw, (int, str)) else None
        if number is None:
            raise ValueError
    except ValueError:
        raise bad(f"invalid value for int{bits} field {field_name}: "
                  f"{json.dumps(raw)[:100]}") from None
    if not -(2 ** (bits - 1)) <= number < 2 ** (bits - 1):
        raise bad(f"invalid value for int{bits} field {field_name}: {number}")
    return number


def _value(proto: str, raw: Any, bad: Callable[[str], ListError]) -> tuple[Any, str]:
    if proto == "int_value":
        return _int(raw, 32, proto, bad), "int32"
    if proto == "long_value":
        return _int(raw, 64, proto, bad), "int64"
    if proto == "string_value":
        if not isinstance(raw, str):
            raise bad(f"invalid value for string field {proto}: {json.dumps(raw)[:100]}")
        return raw, "string"
    if proto == "timestamp_value":
        stamp = epoch(raw) if isinstance(raw, str) else None
        if not stamp and raw not in ("1970-01-01T00:00:00Z",):
            raise bad(f"invalid google.protobuf.Timestamp value {json.dumps(raw)[:100]}")
        return stamp, "int64"  # filter.go toValue: TimestampValue.AsTime().Unix()
    if not isinstance(raw, dict) or any(k != "values" for k in raw):
        raise bad(f"invalid value for message field {proto}")
    values = raw.get("values") or []
    if not isinstance(values, list):
        raise bad(f"invalid value for repeated field {proto}.values")
    if proto == "string_values":
        if not all(isinstance(v, str) for v in values):
            raise bad(f"invalid value for string field {proto}.values")
        return values, "[]string"
    bits = 32 if proto == "int_values" else 64
    return [_int(v, bits, f"{proto}.values", bad) for v in values], f"[]int{bits}"


def _go_print(value: Any) -> str:
    """Go's %v of a value: lists as [a b c]."""
    if isinstance(value, list):
        return "[" + " ".join(str(v) for v in value) + "]"
    return str(value)


def _check(p: Predicate) -> None:
    """filter.go checkPredicate, messages as KFP writes them."""
    scalar = not p.go_type.startswith("[]")
    if p.operation == "IN" and scalar:
        raise _invalid(f"cannot use IN operator with scalar type {p.go_type}")
    if p.operation == "IS_SUBSTRING" and p.go_type != "string":
        # KFP passes (operation, type) to "... type %T with operator %v": kept as written
        raise _invalid(f"cannot use non string value type string with operator "
                       f"{_go_print(p.value)}")
    if p.operation not in ("IN", "IS_SUBSTRING") and not scalar:
        raise _invalid(f"cannot use scalar operator {p.operation} on array type {p.go_type}")


@dataclass
class Filter:
    """Predicates with their keys mapped to model columns (filter.go ReplaceKeys)."""

    groups: dict[str, dict[str, list[Any]]] = field(default_factory=dict)  # EQ -> col -> vals

    def to_json(self) -> dict[str, Any]:
        """filterForMarshaling, as the page token carries it."""
        return {g: self.groups.get(g, {}) for g in _GROUPS.values()}

    @classmethod
    def from_json(cls, data: Any) -> Filter | None:
        if data is None:
            return None
        if not isinstance(data, dict):
            raise ValueError("Filter is not an object")
        groups: dict[str, dict[str, list[Any]]] = {}
        for g in _GROUPS.values():
            cols = data.get(g) or {}
            if not isinstance(cols, dict) or not all(isinstance(v, list)
                                                     for v in cols.values()):
                raise ValueError(f"Filter.{g} is not a map of lists")
            if cols:
                groups[g] = {str(k): list(v) for k, v in cols.items()}
        return cls(groups)

    def matches(self, listable: Listable, rec: dict[str, Any]) -> bool:
        """The WHERE clause filter.go AddToSelect builds, on one record."""
        for group, cols in self.groups.items():
            for col, values in cols.items():
                getter = listable.columns.get(col.removeprefix(listable.prefix()))
                have = getter(rec) if getter else None
                for want in values:
                    if not _holds(group, have, want):
                        return False
        return True


def _holds(group: str, have: Any, want: Any) -> bool:
    if group == "SUBSTRING":  # LIKE '%v%'
        return str(want) in str(have)
    if group == "IN":  # squirrel.Eq with a list: IN (...)
        return any(_cmp(have, w) == 0 for w in (want if isinstance(want, list) else [want]))
    order = _cmp(have, want)
    return {"EQ": order == 0, "NEQ": order != 0, "GT": order > 0, "GTE": order >= 0,
            "LT": order < 0, "LTE": order <= 0}[group]


def _cmp(have: Any, want: Any) -> int:
    """Compare a column with a value as the database does: numbers as numbers (a number
    column against a numeric string too), text as text."""
    if isinstance(have, int) or isinstance(want, int):
        try:
            a, b = int(have), int(want)
        except (TypeError, ValueError):
            a, b = str(have), str(want)  # type: ignore[assignment]
    else:
        a, b = str(have), str(want)  # type: ignore[assignment]
    return (a > b) - (a < b)  # type: ignore[operator]


def build_filter(listable: Listable, predicates: list[Predicate]) -> Filter | None:
    if not predicates:
        return None  # filter.go NewFromPredicate: no predicates, no filter
    out = Filter()
    for p in predicates:
        out.groups.setdefault(_GROUPS[p.operation], {}).setdefault(p.key, []).append(p.value)
    for cols in out.groups.values():  # ReplaceKeys
        for key in list(cols):
            col = listable.fields.get(key)
            if col is None:
                raise _invalid(f"no support for filtering on unrecognized field {json.dumps(key)}")
            cols[listable.prefix() + col] = cols.pop(key)
    return out


# --- options: sort, page size, token ------------------------------------------------------


@dataclass
class Options:
    """list.go Options: page size and the token (sort, next row, filter)."""

    page_size: int
    sort_field: str
    desc: bool
    listable: Listable
    filter: Filter | None = None
    after: tuple[Any, str] | None = None  # (sort value, key) of the first row to return

    def token_json(self, sort_value: Any, key: str) -> dict[str, Any]:
        """list.go token, as json.Marshal writes it (Go's field order)."""
        prefix = self.listable.prefix() if self.sort_field in self.listable.columns else ""
        return {"SortByFieldName": self.sort_field, "SortByFieldValue": sort_value,
                "SortByFieldPrefix": prefix, "KeyFieldName": self.listable.key,
                "KeyFieldValue": key, "KeyFieldPrefix": self.listable.prefix(),
                "IsDesc": self.desc, "ModelName": self.listable.model,
                "Filter": self.filter.to_json() if self.filter else None}

    def same_criteria(self, other: Options) -> bool:
        """list.go Options.Matches."""
        mine = self.filter.to_json() if self.filter else None
        theirs = other.filter.to_json() if other.filter else None
        return (self.sort_field, self.desc, mine) == (other.sort_field, other.desc, theirs)


def page_size(size: Any) -> int:
    """list.go validatePageSize."""
    try:
        n = int(size or 0)
    except (TypeError, ValueError):
        raise ListError(f"invalid page_size {str(size)[:50]!r}: a number of items",
                        "invalid page_size") from None
    if n < 0:
        raise _invalid(f"The page size should be greater than 0. Got {n}")
    if n == 0:
        return DEFAULT_PAGE_SIZE
    return min(n, MAX_PAGE_SIZE)


def new_options(listable: Listable, size: Any, sort_by: str, raw_filter: str) -> Options:
    """list.go NewOptions (with list_request_util.go's filter parsing)."""
    n = page_size(size)
    words = (sort_by or "").lower().split()
    if len(words) > 2 or (len(words) == 2 and words[1] not in ("desc", "asc")):
        raise _invalid(f"Received invalid sort by format {json.dumps(sort_by)}. Supported "
                       'format: "field_name", "field_name desc", or "field_name asc"')
    sort_field = "CreatedAtInSec"  # every Listable's DefaultSortField
    if words:
        if words[0] in listable.fields:
            sort_field = listable.fields[words[0]]
        elif listable.metric_sort and words[0].startswith("metric:"):
            sort_field = words[0][len("metric:"):]
        else:
            raise _invalid(f"Invalid sorting field: {json.dumps(words[0])} on listable type "
                           f"{listable.type_name}")
    predicates = parse_filter(raw_filter) if raw_filter else []
    return Options(n, sort_field, len(words) == 2 and words[1] == "desc", listable,
                   build_filter(listable, predicates))


def options(listable: Listable, query: dict[str, str]) -> Options:
    """list_request_util.go validatedListOptions: from a page token, or from sort_by and
    filter; a token given with other criteria is refused."""
    token = query.get("page_token") or ""
    sort_by, raw_filter = query.get("sort_by") or "", query.get("filter") or ""
    if not token:
        return new_options(listable, query.get("page_size"), sort_by, raw_filter)
    opts = _from_token(listable, token, query.get("page_size"))
    if (sort_by or raw_filter) and not opts.same_criteria(
            new_options(listable, query.get("page_size"), sort_by, raw_filter)):
        raise _invalid("page token does not match the supplied sort by and/or filtering "
                       "criteria. Either specify the same criteria or leave the latter "
                       "empty if page token is specified")
    return opts


def _from_token(listable: Listable, token: str, size: Any) -> Options:
    """list.go NewOptionsFromToken / token.unmarshal."""
    n = page_size(size)

    def bad(why: str) -> ListError:
        # util.NewInvalidInputErrorWithDetails(err, "Invalid package token")
        return ListError(f"InvalidInputError: Invalid package token: {why}",
                         "Invalid package token")

    if len(token) > MAX_FILTER_CHARS * 2:
        raise bad("longer than any token this server writes")
    try:
        raw = base64.b64decode(token.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError, ValueError) as exc:
        raise bad(f"illegal base64 data: {exc}") from None
    from lab.webui.jsonlimit import BodyTooDeep, loads

    try:
        data = loads(raw, max_depth=MAX_FILTER_DEPTH)
    except (ValueError, BodyTooDeep) as exc:
        raise bad(str(exc)[:200]) from None
    if not isinstance(data, dict):
        raise bad("json: cannot unmarshal into Go value of type list.token")
    sort_field = data.get("SortByFieldName")
    key_value = data.get("KeyFieldValue")
    try:
        flt = Filter.from_json(data.get("Filter"))
    except ValueError as exc:
        raise bad(str(exc)) from None
    known_sort = sort_field in listable.columns or (
        listable.metric_sort and isinstance(sort_field, str) and sort_field)
    if not known_sort or data.get("KeyFieldName", listable.key) != listable.key \
            or data.get("ModelName", listable.model) != listable.model:
        raise bad(f"the token is not one for listing {listable.type_name}s")
    after = None
    if data.get("SortByFieldValue") is not None and key_value is not None:
        after = (data["SortByFieldValue"], str(key_value))
    return Options(n, str(sort_field), bool(data.get("IsDesc")), listable, flt, after)


def _sort_value(opts: Options, rec: dict[str, Any]) -> Any:
    getter = opts.listable.columns.get(opts.sort_field)
    return getter(rec) if getter else None  # a run metric: runs of the v2 API have none


def page(opts: Options, records: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], int, str]:
    """(this page, total_size, next_page_token) as the stores' List* answer: the filter
    applied, sorted, from the token's row on, page_size rows, and a token for the next."""
    rows = [r for r in records if opts.filter is None or opts.filter.matches(opts.listable, r)]
    total = len(rows)
    key = opts.listable.columns[opts.listable.key]

    def order(rec: dict[str, Any]) -> tuple[Any, str]:
        value = _sort_value(opts, rec)
        return (_orderable(value), key(rec))

    rows.sort(key=order, reverse=opts.desc)
    if opts.after is not None:
        bound = (_orderable(opts.after[0]), opts.after[1])
        rows = [r for r in rows if (order(r) <= bound if opts.desc else order(r) >= bound)]
    shown, rest = rows[:opts.page_size], rows[opts.page_size:]
    token = ""
    if rest:
        first = rest[0]
        token = base64.b64encode(json.dumps(
            opts.token_json(_sort_value(opts, first), key(first)),
            separators=(",", ":")).encode()).decode()
    return shown, total, token


def _orderable(value: Any) -> tuple[int, Any]:
    """Numbers before text, None first (SQL sorts NULL first ascending)."""
    if value is None:
        return (0, 0)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return (1, value)
    return (2, str(value))
