"""Pipelines and pipeline versions of the local KFP API, as KFP 2.16 answers them:
apiserver/server/pipeline_server.go (create, get, get by name, list, delete, versions),
pipeline_upload_server.go (multipart uploads), resource/resource_manager.go (DeletePipeline,
CreatePipelineVersion), api_converter.go (toModelPipeline, toApiPipeline,
toApiPipelineVersion)."""

from __future__ import annotations

import urllib.parse
import urllib.request
from email.parser import BytesParser
from email.policy import HTTP
from typing import Any

from lab.kube.conditions import now
from lab.webui import kfp_list
from lab.webui.kfp_store import (
    ApiError,
    already_exists,
    internal,
    invalid,
    list_error,
    listed,
    new_id,
    not_found,
)

MAX_FILE_BYTES = 32 << 20  # apiserver/common/const.go MaxFileLength
URL_TIMEOUT = 30.0  # seconds to fetch a version's package_url
PIPELINE_FIELDS = ("pipeline_id", "name", "display_name", "description", "created_at",
                   "namespace", "error")
VERSION_FIELDS = ("pipeline_id", "pipeline_version_id", "name", "display_name",
                  "description", "created_at", "package_url", "code_source_url",
                  "pipeline_spec", "error")


def upload_error(status: int, message: str, detail: str) -> ApiError:
    """pipeline_upload_server.go writeErrorToResponse: an apiv1beta1.Error body
    ({error_message, error_details}); kflab puts its reason in error_details."""
    err = ApiError(status, message)
    err.body = lambda: {"error_message": message,  # type: ignore[method-assign]
                        "error_details": f"{message}: {detail}"}
    return err


def documents(spec: Any) -> list[dict[str, Any]]:
    """The YAML documents of a pipeline: the PipelineSpec, then the PlatformSpec when the
    SDK sent both ({pipeline_spec, platform_spec}, as kfp.Client's _PipelineDoc does)."""
    if isinstance(spec, dict) and isinstance(spec.get("pipeline_spec"), dict):
        platform = spec.get("platform_spec")
        if platform is not None and not isinstance(platform, dict):
            raise ApiError(400, "platform_spec (the YAML's second document) must be a mapping")
        docs = [spec["pipeline_spec"]] + ([platform] if platform else [])
    else:
        docs = [spec]
    if not isinstance(docs[0], dict) or "root" not in docs[0]:
        raise ApiError(400, "pipeline_spec is not a compiled KFP pipeline (no 'root'): "
                            "give what kfp.compiler.Compiler().compile() writes")
    return docs


def read_spec(raw: bytes, source: str) -> dict[str, Any]:
    """A compiled pipeline YAML (one document, or a PipelineSpec and a PlatformSpec) read
    with kflab's bounded loader: an alias bomb, deep nesting or a python tag is refused
    before it is expanded."""
    from lab.errors import InputError
    from lab.yamlio import load_documents

    try:
        docs = [d.data for d in load_documents(raw, source, duplicates="keep") if d.data]
    except InputError as exc:
        raise ApiError(400, f"{source}: {str(exc).splitlines()[0]}") from None
    if len(docs) == 2:
        docs = [{"pipeline_spec": docs[0], "platform_spec": docs[1]}]
    spec = docs[0] if docs else None
    documents(spec)  # refuses what is not a compiled pipeline
    return spec  # type: ignore[return-value]


class Pipelines:
    def __init__(self, api: Any) -> None:
        self.api = api
        self.records = api.records

    # -- reads ------------------------------------------------------------------------------

    def _pipeline(self, pid: str) -> dict[str, Any]:
        found = self.records.get("pipelines", pid)
        if found is None:
            raise not_found("Pipeline", pid)
        return found

    def get(self, pid: str, **_: Any) -> dict[str, Any]:
        try:
            return _pipeline_view(self._pipeline(pid))
        except ApiError as exc:  # PipelineServer.GetPipeline
            raise exc.wrap(f"Failed to get pipeline with id {pid}").wrap(
                f"Failed to get a pipeline {pid}. Check error stack") from None

    def get_by_name(self, name: str, query: dict[str, str], **_: Any) -> dict[str, Any]:
        """PipelineServer.GetPipelineByName: by the `name` column (pipeline_store.go
        GetPipelineByNameAndNamespace), single-user: namespace "" (ReplaceNamespace)."""
        name = urllib.parse.unquote(name)
        for p in self.records.all("pipelines"):
            if p.get("name") == name:
                return _pipeline_view(p)
        raise not_found("Namespace/Pipeline", f"/{name}").wrap(
            f"Failed to get a pipeline named {name} in namespace ").wrap(
            f"Failed to get a pipeline with name {name} and namespace "
            f"{query.get('namespace', '')}. Check error stack.")

    def list(self, query: dict[str, str], **_: Any) -> dict[str, Any]:
        """PipelineServer.ListPipelines."""
        try:
            opts = kfp_list.options(kfp_list.PIPELINES, query)
        except kfp_list.ListError as exc:
            raise list_error(exc).wrap(
                f"Failed to list pipelines due invalid list options: pageToken: "
                f"{query.get('page_token', '')}, pageSize: {query.get('page_size', 0)}, "
                f"sortBy: {query.get('sort_by', '')}, filter: {query.get('filter', '')}"
            ) from None
        rows = [_pipeline_view(p) for p in self.records.all("pipelines")]
        page, total, token = kfp_list.page(opts, rows)
        return listed("pipelines", page, total, token)

    def list_versions(self, pid: str, query: dict[str, str], **_: Any) -> dict[str, Any]:
        """PipelineServer.ListPipelineVersions."""
        try:
            opts = kfp_list.options(kfp_list.VERSIONS, query)
        except kfp_list.ListError as exc:
            raise list_error(exc).wrap(
                f"Failed to list pipeline versions due invalid list options: pageToken: "
                f"{query.get('page_token', '')}, pageSize: {query.get('page_size', 0)}, "
                f"sortBy: {query.get('sort_by', '')}, filter: {query.get('filter', '')}"
            ) from None
        try:
            self._pipeline(pid)
        except ApiError as exc:
            raise exc.wrap(f"Failed to list pipeline versions due to error fetching the "
                           f"namespace for pipeline {pid}").wrap(
                f"Failed to list pipeline versions for pipeline {pid}") from None
        rows = [_version_view(v) for v in self.versions_of(pid)]
        page, total, token = kfp_list.page(opts, rows)
        return listed("pipeline_versions", page, total, token)

    def versions_of(self, pid: str) -> list[dict[str, Any]]:
        return [v for v in self.records.all("versions") if v["pipeline_id"] == pid]

    def get_version(self, pid: str, vid: str, **_: Any) -> dict[str, Any]:
        """PipelineServer.GetPipelineVersion: by the version's id (the pipeline id in the
        path is not checked, as in KFP)."""
        found = self.records.get("versions", vid)
        if found is None:
            raise not_found("PipelineVersion", vid).wrap(
                f"Failed to get pipeline version {vid}").wrap(
                f"Failed to get a pipeline version {vid}")
        return _version_view(found)

    def spec_of(self, ref: dict[str, Any]) -> dict[str, Any]:
        """The spec a run of `pipeline_version_reference` runs: that version, or the
        pipeline's latest (resource_manager.go GetLatestPipelineVersion)."""
        pid = ref.get("pipeline_id") or ""
        vid = ref.get("pipeline_version_id")
        if not vid:
            versions = self.versions_of(pid)
            if not self.records.get("pipelines", pid):
                raise not_found("Pipeline", pid)
            if not versions:
                raise not_found("PipelineVersion", pid)
            vid = versions[-1]["pipeline_version_id"]
        version = self.records.get("versions", vid)
        if version is None:
            raise not_found("PipelineVersion", vid)
        return version["pipeline_spec"]

    # -- writes -----------------------------------------------------------------------------

    def _name_taken(self, name: str) -> bool:
        return any(p["name"] == name for p in self.records.all("pipelines"))

    def _new_pipeline(self, name: str, display: str, description: str,
                      namespace: str) -> dict[str, Any]:
        return {"pipeline_id": new_id(), "name": name, "display_name": display or name,
                "description": description, "created_at": now(), "namespace": ""}

    def _new_version(self, pid: str, name: str, display: str, description: str,
                     spec: dict[str, Any], url: str = "") -> dict[str, Any]:
        taken = {v["name"] for v in self.versions_of(pid)}
        if name in taken:  # pipeline_store.go CreatePipelineVersion: unique (Name, PipelineId)
            raise already_exists(f"Failed to create a new pipeline version. The name {name} "
                                 "already exist. Specify a new name")
        version = {"pipeline_id": pid, "pipeline_version_id": new_id(), "name": name,
                   "display_name": display or name, "description": description,
                   "created_at": now(), "pipeline_spec": spec}
        if url:
            version["package_url"] = {"pipeline_url": url}
        return version

    def upload(self, query: dict[str, str], content_type: str, body: bytes,
               **_: Any) -> dict[str, Any]:
        """PipelineUploadServer.uploadPipeline."""
        failed = "Failed to create a pipeline and a pipeline version"
        spec, filename = self._uploaded(content_type, body, "Failed to read a pipeline spec "
                                        "file")
        name = query.get("name") or query.get("display_name") or filename  # buildPipelineName
        if self._name_taken(name):
            raise upload_error(409, failed, f"a pipeline named '{name}' already exists: "
                                            "upload a new version of it instead")
        pipeline = self._new_pipeline(name, query.get("display_name") or name,
                                      query.get("description", ""), "")
        version = self._new_version(pipeline["pipeline_id"], name, pipeline["display_name"],
                                    pipeline["description"], spec)
        self.records.put("pipelines", pipeline, pipeline["pipeline_id"])
        self.records.put("versions", version, version["pipeline_version_id"])
        return _pipeline_view(pipeline)

    def upload_version(self, query: dict[str, str], content_type: str, body: bytes,
                       **_: Any) -> dict[str, Any]:
        """PipelineUploadServer.uploadPipelineVersion."""
        failed = "Failed to create a pipeline version"
        spec, filename = self._uploaded(content_type, body, failed)
        pid = query.get("pipelineid") or ""
        if not pid:
            raise upload_error(400, failed, "the query parameter 'pipelineid' is missing "
                                            "(kfp.Client: pipeline_id, or a pipeline_name "
                                            "that exists)")
        if self.records.get("pipelines", pid) is None:
            raise upload_error(400, failed, f"pipeline {pid} not found")
        name = query.get("name") or query.get("display_name") or filename
        try:
            version = self._new_version(pid, name, query.get("display_name") or name,
                                        query.get("description", ""), spec)
        except ApiError as exc:
            raise upload_error(409, failed, exc.external) from None
        self.records.put("versions", version, version["pipeline_version_id"])
        return _version_view(version)

    def _uploaded(self, content_type: str, body: bytes, failed: str
                  ) -> tuple[dict[str, Any], str]:
        """The pipeline spec of a multipart `uploadfile` (the YAML the compiler wrote)."""
        if not content_type.startswith("multipart/form-data"):
            raise upload_error(400, failed, "upload a pipeline as multipart/form-data field "
                                            "'uploadfile'")
        msg = BytesParser(policy=HTTP).parsebytes(
            f"Content-Type: {content_type}\r\n\r\n".encode() + body)
        for part in msg.iter_parts():
            if part.get_param("name", header="content-disposition") == "uploadfile":
                raw = part.get_payload(decode=True) or b""
                if len(raw) > MAX_FILE_BYTES:
                    raise upload_error(400, failed, "the file is over 32 MiB "
                                                    "(KFP's MaxFileLength)")
                try:
                    spec = read_spec(raw, "uploadfile")
                except ApiError as exc:
                    raise upload_error(400, failed, str(exc)) from None
                return spec, part.get_filename() or "pipeline.yaml"
        raise upload_error(400, failed, "missing form field 'uploadfile'")

    def create(self, body: bytes, **_: Any) -> dict[str, Any]:
        """PipelineServer.CreatePipeline: a pipeline without versions."""
        data = self.api.json_body(body, PIPELINE_FIELDS)
        pipeline = self._checked_pipeline(data, "Failed to create a pipeline due to server "
                                                "error")
        self.records.put("pipelines", pipeline, pipeline["pipeline_id"])
        return _pipeline_view(pipeline)

    def _checked_pipeline(self, data: dict[str, Any], failed: str) -> dict[str, Any]:
        name = str(data.get("name") or data.get("display_name") or "")  # toModelPipeline
        if not name:
            raise invalid("name is required").wrap(failed)
        if self._name_taken(name):
            raise already_exists(f"Failed to create a new pipeline. The name {name} already "
                                 "exist. Please specify a new name").wrap(failed)
        return self._new_pipeline(name, str(data.get("display_name") or name),
                                  str(data.get("description") or ""), "")

    def create_with_version(self, body: bytes, **_: Any) -> dict[str, Any]:
        """PipelineServer.CreatePipelineAndVersion: the version's spec from its URL."""
        data = self.api.json_body(body, ("pipeline", "pipeline_version"))
        pdata, vdata = data.get("pipeline") or {}, data.get("pipeline_version") or {}
        if not isinstance(pdata, dict) or not isinstance(vdata, dict):
            raise ApiError(400, "pipeline and pipeline_version must be objects")
        pipeline = self._checked_pipeline(pdata, "Failed to create a pipeline")
        url = _url_of(vdata)
        spec = self._fetch(url, "Failed to create a pipeline")
        version = self._new_version(pipeline["pipeline_id"], pipeline["name"],
                                    pipeline["display_name"], pipeline["description"], spec,
                                    url)
        self.records.put("pipelines", pipeline, pipeline["pipeline_id"])
        self.records.put("versions", version, version["pipeline_version_id"])
        return _pipeline_view(pipeline)

    def create_version(self, pid: str, body: bytes, **_: Any) -> dict[str, Any]:
        """PipelineServer.CreatePipelineVersion: the spec is fetched from package_url."""
        data = self.api.json_body(body, VERSION_FIELDS)
        failed = "Failed to create a pipeline version. Check error stack"
        url = _url_of(data)
        if not url:
            raise invalid("Failed to create a pipeline version. Package URL is nil")
        if not data.get("pipeline_id"):
            raise invalid("Failed to create a pipeline version. Parent pipeline id is empty")
        name = str(data.get("name") or data.get("display_name") or "")
        if not name:
            raise invalid("name is required").wrap(failed)
        if self.records.get("pipelines", pid) is None:
            raise not_found("Pipeline", pid).wrap(failed)
        spec = self._fetch(url, failed)
        version = self._new_version(pid, name, str(data.get("display_name") or name),
                                    str(data.get("description") or ""), spec, url)
        self.records.put("versions", version, version["pipeline_version_id"])
        return _version_view(version)

    def _fetch(self, url: str, failed: str) -> dict[str, Any]:
        """pipeline_server.go createPipelineVersion: GET the URL (http or https only here),
        at most MaxFileLength bytes, then read it as an uploaded file."""
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise invalid(f"Failed to create a pipeline version due to invalid pipeline spec "
                          f"URI. PipelineSpecURI: {url}. Please specify a valid URL").wrap(
                failed)
        try:
            with urllib.request.urlopen(url, timeout=URL_TIMEOUT) as resp:  # noqa: S310
                raw = resp.read(MAX_FILE_BYTES + 1)
        except OSError as exc:
            status = getattr(exc, "code", None)
            if status is not None:
                raise invalid(f"Failed to fetch pipeline spec with url: {url}. Request "
                              f"returned {status}").wrap(failed) from None
            raise internal(str(exc)[:200], "Failed to create a pipeline version due error "
                                           f"downloading the pipeline spec from {url}"
                           ).wrap(failed) from None
        if len(raw) > MAX_FILE_BYTES:
            raise invalid(f"the pipeline at {url} is over 32 MiB (MaxFileLength)").wrap(failed)
        try:
            return read_spec(raw, urllib.parse.urlsplit(url).path.rsplit("/", 1)[-1]
                             or "pipeline.yaml")
        except ApiError as exc:
            raise invalid(str(exc)).wrap(failed) from None

    def delete(self, pid: str, query: dict[str, str], **_: Any) -> dict[str, Any]:
        """resource_manager.go DeletePipeline: refused while versions exist, unless
        cascade=true deletes them first."""
        outer = f"Failed to delete pipeline {pid}. Check error stack"
        if self.records.get("pipelines", pid) is None:
            raise not_found("Pipeline", pid).wrap(
                f"Failed to delete pipeline with id {pid} as it was not found").wrap(outer)
        versions = self.versions_of(pid)
        cascade = (query.get("cascade") or "").lower() in ("true", "1")
        if versions and not cascade:
            raise invalid(f"Failed to delete pipeline with id {pid} as it has existing "
                          f"pipeline versions (e.g. {versions[-1]['pipeline_version_id']}). "
                          "Set cascade=true to delete all versions").wrap(outer)
        for v in versions:
            self.records.drop("versions", v["pipeline_version_id"])
        self.records.drop("pipelines", pid)
        return {}

    def delete_version(self, pid: str, vid: str, **_: Any) -> dict[str, Any]:
        """resource_manager.go DeletePipelineVersion."""
        if self.records.get("versions", vid) is None:
            raise not_found("PipelineVersion", vid).wrap(
                f"Failed to delete pipeline version {vid} due to error fetching it").wrap(
                f"Failed to delete a pipeline version id {vid} under pipeline id {pid}. "
                "Check error stack")
        self.records.drop("versions", vid)
        return {}


def _url_of(data: dict[str, Any]) -> str:
    package = data.get("package_url") or {}
    return str(package.get("pipeline_url") or "") if isinstance(package, dict) else ""




def _pipeline_view(p: dict[str, Any]) -> dict[str, Any]:
    """api_converter.go toApiPipeline, empty fields left out."""
    return {k: p[k] for k in ("pipeline_id", "name", "display_name", "description",
                              "created_at", "namespace") if p.get(k)}


def _version_view(v: dict[str, Any]) -> dict[str, Any]:
    """api_converter.go toApiPipelineVersion, empty fields left out."""
    return {k: v[k] for k in ("pipeline_id", "pipeline_version_id", "name", "display_name",
                              "description", "created_at", "package_url", "pipeline_spec")
            if v.get(k)}
