"""A class on one shared cluster: per student a namespace, quota, ServiceAccount and kubeconfig.

What `kflab class create` makes, all server-side applied by the field manager `kflab-class`
and labelled `kflab.dev/class=NAME`, so `class delete` finds it again:

- per student: a Namespace `CLASS-STUDENT` labelled for Katib's metrics-collector injection
  (the same labels as the lab namespace), a ResourceQuota and a LimitRange sized from the
  labs' workloads (sizing.py), a ServiceAccount `student` and a RoleBinding of it to the
  ClusterRole below, in that namespace only (a RoleBinding grants a ClusterRole's rules in
  its own namespace and nowhere else);
- once: the ClusterRole `kflab-class-student`. Not Kubernetes' `edit`: `edit` is an
  aggregated role whose rules the controller-manager fills in, and Kubeflow's CRDs aggregate
  to `kubeflow-edit` (a role of the multi-user install the lab profile leaves out), so `edit`
  would not let a student create a Katib Experiment. The rules name exactly the API groups
  the labs use;
- in the KFP namespace (single-user KFP), when it exists and unless `kfp=False`: a Role that
  lets the students' ServiceAccounts port-forward to KFP's API, ML Metadata and object store
  and read the artifact store's Secret and the pipeline pods' logs -- what kflab's cluster
  backend needs to run a pipeline. Single-user KFP has one API for everybody: students can
  see each other's runs and artifacts (docs/teaching.md). Each student's runs go to their own
  KFP experiment, named after their namespace (the cluster backend's rule).

Each student's kubeconfig holds a token from the TokenRequest API (bound to the
ServiceAccount, expiring after `hours`), the server's URL and its CA, and is written 0600.
"""

from __future__ import annotations

import base64
import contextlib
import os
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

from lab.errors import LabError
from lab.kube.conditions import now
from lab.kube.namespaces import LAB_LABELS
from lab.kube.objects import Ref, apply, delete, get, list_objects
from lab.teaching.roster import Roster, Student, check_class_name

MANAGER = "kflab-class"
CLASS_LABEL = "kflab.dev/class"
STUDENT_LABEL = "kflab.dev/student"
STUDENT_ROLE = "kflab-class-student"
KFP_ROLE = "kflab-class-kfp"
SERVICE_ACCOUNT = "student"
KFP_NAMESPACE = "kubeflow"
KFP_SERVICES = ("ml-pipeline", "metadata-grpc-service", "seaweedfs")
KFP_INDEX = "kflab-pip-index"  # lab/backends/cluster/pipelines/index.py NAME
KFP_SECRETS = ("mlpipeline-minio-artifact",)
FORMAT = 1
# Pod Security admission (Kubernetes >= 1.25 enforces these namespace labels): `baseline`
# refuses privileged pods, host namespaces and hostPath volumes, so a student's pod cannot
# take over the shared node. `privileged` is needed only for KFLAB_WHEELHOUSE (a hostPath).
POD_SECURITY = ("baseline", "privileged")
_ID = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")  # a student id: a DNS-1123 label

RW = ["get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"]
RO = ["get", "list", "watch"]
# The labs' API groups (lab/kube/kinds.py, and what their workloads make).
STUDENT_RULES: list[dict[str, Any]] = [
    {"apiGroups": [""], "resources": ["pods", "services", "configmaps", "secrets",
                                      "persistentvolumeclaims", "serviceaccounts"],
     "verbs": RW},
    {"apiGroups": [""], "resources": ["pods/log", "pods/status", "events", "endpoints",
                                      "resourcequotas", "limitranges"], "verbs": RO},
    {"apiGroups": [""], "resources": ["pods/portforward", "pods/exec"],
     "verbs": ["get", "create"]},
    {"apiGroups": ["apps"], "resources": ["deployments", "statefulsets", "replicasets"],
     "verbs": RW},
    {"apiGroups": ["batch"], "resources": ["jobs", "cronjobs"], "verbs": RW},
    {"apiGroups": ["kubeflow.org"], "resources": ["experiments", "trials", "suggestions",
                                                  "pytorchjobs", "tfjobs", "notebooks"],
     "verbs": RW},
    {"apiGroups": ["kubeflow.org"], "resources": ["experiments/status", "trials/status",
                                                  "pytorchjobs/status", "tfjobs/status",
                                                  "notebooks/status"], "verbs": RO},
    {"apiGroups": ["trainer.kubeflow.org"], "resources": ["trainjobs"], "verbs": RW},
    {"apiGroups": ["trainer.kubeflow.org"],
     "resources": ["trainingruntimes", "clustertrainingruntimes"], "verbs": RO},
    {"apiGroups": ["jobset.x-k8s.io"], "resources": ["jobsets"], "verbs": RO},
    {"apiGroups": ["serving.kserve.io"], "resources": ["inferenceservices"], "verbs": RW},
    {"apiGroups": ["serving.kserve.io"],
     "resources": ["inferenceservices/status", "servingruntimes",
                   "clusterservingruntimes"], "verbs": RO},
]


@dataclass
class Seat:
    """One student's place in the class, as recorded."""

    id: str
    name: str
    email: str
    namespace: str
    kubeconfig: str
    expires: str | None = None


@dataclass
class ClassRecord:
    name: str
    created_at: str
    server: str
    quota: dict[str, str]
    kfp: bool
    kubeconfigs: str
    seats: list[Seat] = field(default_factory=list)
    format: int = FORMAT

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ClassRecord:
        """The record as class.json holds it; ValueError names the first field that is
        missing or of the wrong type (a hand-edited or foreign file)."""
        def text(d: dict[str, Any], key: str, where: str, optional: bool = False) -> Any:
            value = d.get(key)
            if not (isinstance(value, str) or (optional and value is None)):
                raise ValueError(f"field '{where}{key}': expected text, got "
                                 f"{type(value).__name__}")
            return value

        seats_raw = data.get("seats")
        if not isinstance(seats_raw, list):
            raise ValueError("field 'seats': expected a list")
        seats = []
        for i, s in enumerate(seats_raw):
            if not isinstance(s, dict):
                raise ValueError(f"field 'seats[{i}]': expected a mapping")
            seat = Seat(*(text(s, k, f"seats[{i}].") for k in
                          ("id", "name", "email", "namespace", "kubeconfig")),
                        text(s, "expires", f"seats[{i}].", optional=True))
            if not _ID.match(seat.id) or seat.namespace != f"{data.get('name')}-{seat.id}":
                raise ValueError(f"field 'seats[{i}]': id {seat.id!r} and namespace "
                                 f"{seat.namespace!r} are not the class's")
            seats.append(seat)
        quota = data.get("quota")
        if not isinstance(quota, dict) or not all(isinstance(v, str) for v in quota.values()):
            raise ValueError("field 'quota': expected a mapping of quantities")
        if not isinstance(data.get("kfp"), bool):
            raise ValueError("field 'kfp': expected true or false")
        fmt = data.get("format", FORMAT)
        if fmt != FORMAT:
            raise ValueError(f"field 'format': {fmt!r}; this kflab reads format {FORMAT}")
        return cls(check_class_name(text(data, "name", "")), text(data, "created_at", ""),
                   text(data, "server", ""), dict(quota), data["kfp"],
                   text(data, "kubeconfigs", ""), seats)


def record_path(state: Path, name: str) -> Path:
    from lab.state import path

    return path(state, "classes", check_class_name(name), "class.json")


def load_record(state: Path, name: str) -> ClassRecord:
    from lab.state import read_json

    data = read_json(record_path(state, name), fix="delete the class's namespaces by label "
                     f"{CLASS_LABEL}={name} and create it again")
    if data is None:
        raise LabError(f"no class named {name!r} here",
                       hint="create it with `kflab class create ROSTER.csv --class NAME`")
    try:
        record = ClassRecord.from_dict(data)
    except (ValueError, LabError) as exc:
        raise LabError(f"{record_path(state, name)}: not a class record kflab wrote: "
                       f"{str(exc).splitlines()[0]}",
                       hint="restore it from a backup, or delete the class's namespaces by "
                            f"label {CLASS_LABEL}={name}, remove the file and create the "
                            "class again") from None
    if record.name != name:
        raise LabError(f"{record_path(state, name)}: holds class {record.name!r}, not {name!r}",
                       hint="restore the file, or remove it and create the class again")
    return record


def _labels(class_name: str, student: Student | None = None) -> dict[str, str]:
    out = {"app.kubernetes.io/managed-by": "kflab", CLASS_LABEL: class_name}
    if student is not None:
        out[STUDENT_LABEL] = student.id
    return out


def student_objects(class_name: str, student: Student, quota: dict[str, str],
                    pod_security: str = "baseline") -> list[dict[str, Any]]:
    """What one student gets, in apply order (the namespace first)."""
    from lab.teaching.sizing import limit_range

    ns = student.namespace(class_name)
    labels = _labels(class_name, student)
    meta = {"namespace": ns, "labels": labels}
    lr = limit_range()
    lr["metadata"].update(meta)
    return [
        {"apiVersion": "v1", "kind": "Namespace",
         "metadata": {"name": ns, "labels": {
             **LAB_LABELS, **labels,
             "pod-security.kubernetes.io/enforce": pod_security,
             "pod-security.kubernetes.io/warn": "baseline"}}},
        {"apiVersion": "v1", "kind": "ResourceQuota",
         "metadata": {"name": "kflab-class", **meta}, "spec": {"hard": dict(quota)}},
        lr,
        {"apiVersion": "v1", "kind": "ServiceAccount",
         "metadata": {"name": SERVICE_ACCOUNT, **meta}},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
         "metadata": {"name": STUDENT_ROLE, **meta},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                     "name": STUDENT_ROLE},
         "subjects": [{"kind": "ServiceAccount", "name": SERVICE_ACCOUNT, "namespace": ns}]},
    ]


def kfp_objects(class_name: str, namespaces: list[str]) -> list[dict[str, Any]]:
    """The Role (and its binding) in the KFP namespace that lets students run pipelines."""
    name = f"{KFP_ROLE}-{class_name}"
    meta = {"name": name, "namespace": KFP_NAMESPACE, "labels": _labels(class_name)}
    rules = [
        {"apiGroups": [""], "resources": ["services"], "resourceNames": list(KFP_SERVICES),
         "verbs": ["get"]},
        {"apiGroups": [""], "resources": ["secrets"], "resourceNames": list(KFP_SECRETS),
         "verbs": ["get"]},
        # the class's package index for pipeline steps, when `kflab up --bundle` made one
        # (lab/backends/cluster/pipelines/index.py reads it to point every step at it)
        {"apiGroups": [""], "resources": ["configmaps"], "resourceNames": [KFP_INDEX],
         "verbs": ["get"]},
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]},
        {"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"]},
        {"apiGroups": [""], "resources": ["pods/portforward"], "verbs": ["get", "create"]},
    ]
    return [
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": meta,
         "rules": rules},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
         "metadata": dict(meta),
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
         "subjects": [{"kind": "ServiceAccount", "name": SERVICE_ACCOUNT, "namespace": ns}
                      for ns in namespaces]},
    ]


def cluster_role() -> dict[str, Any]:
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": STUDENT_ROLE,
                         "labels": {"app.kubernetes.io/managed-by": "kflab"}},
            "rules": STUDENT_RULES}


def _server(kube: Any, server: str | None) -> tuple[str, dict[str, Any]]:
    """The URL students use and the cluster entry of their kubeconfig (CA embedded)."""
    cfg = kube.api.configuration
    url = server or str(cfg.host)
    if not url.startswith("https://"):
        raise LabError(f"server URL {url!r} is not https://", hint="give --server https://HOST:PORT")
    entry: dict[str, Any] = {"server": url}
    if cfg.ssl_ca_cert:
        entry["certificate-authority-data"] = base64.b64encode(
            Path(cfg.ssl_ca_cert).read_bytes()).decode()
    elif not cfg.verify_ssl:
        entry["insecure-skip-tls-verify"] = True
    return url, entry


def _token(kube: Any, namespace: str, hours: float) -> tuple[str, str | None]:
    """A bound token for the student's ServiceAccount (TokenRequest API) and its expiry."""
    from kubernetes import client

    from lab.kube.apierrors import translated

    # A plain body: the typed model insists on audiences; left out, the server gives its own.
    body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
            "spec": {"expirationSeconds": int(hours * 3600)}}
    with translated("create", f"a token for ServiceAccount {namespace}/{SERVICE_ACCOUNT}"):
        out = client.CoreV1Api(kube.api).create_namespaced_service_account_token(
            SERVICE_ACCOUNT, namespace, body, _request_timeout=kube.timeout)
    stamp = out.status.expiration_timestamp
    return str(out.status.token), stamp.strftime("%Y-%m-%dT%H:%M:%SZ") if stamp else None


def write_kubeconfig(path: Path, cluster: dict[str, Any], user: str, token: str,
                     namespace: str) -> Path:
    """A student's kubeconfig, mode 0600 from the first byte (never readable by others)."""
    doc = {"apiVersion": "v1", "kind": "Config", "current-context": user,
           "clusters": [{"name": "kflab-class", "cluster": cluster}],
           "users": [{"name": user, "user": {"token": token}}],
           "contexts": [{"name": user, "context": {"cluster": "kflab-class", "user": user,
                                                   "namespace": namespace}}]}
    tmp = path.with_name(f".{path.name}.part")
    tmp.unlink(missing_ok=True)  # a stale one, or a symlink planted in a shared folder
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as fh:
        yaml.safe_dump(doc, fh, sort_keys=False)
    os.replace(tmp, path)
    return path


def create(kube: Any, state: Path, roster: Roster, class_name: str, out_dir: Path, *,
           quota: dict[str, str], server: str | None = None, hours: float = 24 * 7,
           kfp: bool = True, pod_security: str = "baseline") -> ClassRecord:
    """Make the class (idempotent: running it again re-applies and re-issues tokens)."""
    from lab.state import write_json

    if not 1 <= hours <= 24 * 365:
        raise LabError(f"token lifetime {hours:g} h is out of range",
                       hint="give --hours between 1 and 8760")
    if pod_security not in POD_SECURITY:
        raise LabError(f"unknown pod security level {pod_security!r}",
                       hint=f"use one of {', '.join(POD_SECURITY)}")
    url, cluster = _server(kube, server)
    taken = []
    for student in roster.students:
        ns = get(kube, Ref("v1", "Namespace", student.namespace(class_name)), missing_ok=True)
        owner = ((ns or {}).get("metadata") or {}).get("labels", {}) or {}
        if ns is not None and owner.get(CLASS_LABEL) != class_name:
            taken.append(f"{student.namespace(class_name)} (line {student.line})")
    if taken:  # checked before anything is made: never take over someone's namespace
        raise LabError(f"namespace(s) already exist and are not class {class_name!r}'s: "
                       f"{', '.join(taken[:5])}{' ...' if len(taken) > 5 else ''}",
                       hint="choose another --class name")
    out_dir = out_dir.resolve()  # the record must find the files from any folder
    if not out_dir.is_dir():  # a folder of ours: private; an existing one keeps its mode
        out_dir.mkdir(parents=True)  # (`--out .` must not chmod the current folder)
        os.chmod(out_dir, 0o700)
    apply(kube, cluster_role(), manager=MANAGER)
    for student in roster.students:
        for obj in student_objects(class_name, student, quota, pod_security):
            apply(kube, obj, manager=MANAGER)
    namespaces = [s.namespace(class_name) for s in roster.students]
    with_kfp = kfp and get(kube, Ref("v1", "Namespace", KFP_NAMESPACE), missing_ok=True) \
        is not None
    if with_kfp:
        for obj in kfp_objects(class_name, namespaces):
            apply(kube, obj, manager=MANAGER)
    record = ClassRecord(class_name, now(), url, dict(quota), with_kfp, str(out_dir))
    for student in roster.students:
        ns = student.namespace(class_name)
        token, expires = _token(kube, ns, hours)
        path = write_kubeconfig(out_dir / f"{student.id}.kubeconfig", cluster,
                                f"{class_name}-{student.id}", token, ns)
        record.seats.append(Seat(student.id, student.name, student.email, ns, str(path),
                                 expires))
    write_json(record_path(state, class_name), record.to_dict())
    return record


def delete_class(kube: Any, state: Path, class_name: str) -> list[str]:
    """Delete everything the class made (found by label, so a lost record is no obstacle);
    returns what was deleted. Namespaces delete their contents."""
    done = []
    selector = f"{CLASS_LABEL}={check_class_name(class_name)}"
    for ns in list_objects(kube, "v1", "Namespace", label_selector=selector):
        name = ns["metadata"]["name"]
        # Access goes first: a namespace may stay Terminating for minutes (finalizers), and
        # its ServiceAccount's tokens stop working once the ServiceAccount is gone.
        for ref in (Ref("rbac.authorization.k8s.io/v1", "RoleBinding", STUDENT_ROLE, name),
                    Ref("v1", "ServiceAccount", SERVICE_ACCOUNT, name)):
            delete(kube, ref)
        if delete(kube, Ref("v1", "Namespace", name)):
            done.append(f"Namespace/{name}")
    if get(kube, Ref("v1", "Namespace", KFP_NAMESPACE), missing_ok=True) is not None:
        for kind in ("RoleBinding", "Role"):
            ref = Ref("rbac.authorization.k8s.io/v1", kind, f"{KFP_ROLE}-{class_name}",
                      KFP_NAMESPACE)
            if delete(kube, ref):
                done.append(f"{kind}/{KFP_NAMESPACE}/{ref.name}")
    others = [p for p in (state / "classes").glob("*/class.json")
              if p.parent.name != class_name] if (state / "classes").is_dir() else []
    if not others and delete(kube, Ref("rbac.authorization.k8s.io/v1", "ClusterRole",
                                       STUDENT_ROLE)):
        done.append(f"ClusterRole/{STUDENT_ROLE}")
    target = record_path(state, class_name)
    if target.exists():
        try:
            record = load_record(state, class_name)
        except LabError as exc:  # the cluster side is gone already: say so, keep going
            done.append(f"not removed (unreadable record): the kubeconfig files; {exc}")
            record = ClassRecord(class_name, "", "", {}, False, "")
        folder = Path(record.kubeconfigs)
        for seat in record.seats:
            # only the file `create` wrote: <kubeconfigs>/<id>.kubeconfig (an edited record
            # must not make `class delete` remove some other file)
            path = folder / f"{seat.id}.kubeconfig"
            if Path(seat.kubeconfig) != path or not folder.is_absolute():
                continue
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
                done.append(f"file {path}")
        target.unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            target.parent.rmdir()
    return done



def instructor_cluster(state: Path, kubeconfig: str | None,
                       context: str | None) -> tuple[Any, str, str | None]:
    """(Kube, kubeconfig path, context) of the instructor's cluster: the ones given, else
    the lab that `kflab up` verified, else $KUBECONFIG / ~/.kube/config."""
    from lab.backends import choose
    from lab.backends.cluster import kubeconfig_path
    from lab.kube.client import connect

    choice = choose("cluster", state, context=context, kubeconfig=kubeconfig)
    path = kubeconfig_path(choice.kubeconfig)
    kube = connect(path, choice.context)
    # Ask the server once, now: an unreachable cluster must stop the command with that reason,
    # not show every student 0/N (status, grade) as if nobody had done the work.
    kube.dynamic  # noqa: B018 (discovery: raises Unreachable / Forbidden)
    return kube, str(path), choice.context
