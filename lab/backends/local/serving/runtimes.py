"""Which KServe serving runtime runs an InferenceService, and which file it loads.

RUNTIMES is the ClusterServingRuntime table the lab installs (KServe v0.16 in
kubeflow/manifests 26.03, kserve-cluster-resources.yaml; a test compares it with the
upstream copy). `choose` restates KServe's selection (kserve/kserve
pkg/apis/serving/v1beta1/predictor_model.go `GetSupportingRuntimes`,
`RuntimeSupportsModel`, `sortSupportedRuntimeByPriority`;
pkg/controller/v1beta1/inferenceservice/components/predictor.go for an explicit
`runtime`): runtimes whose auto-selectable formats carry the model's format (and version,
when given) and whose protocols include the model's (v1 by default), highest priority
first. So sklearn and xgboost go to their kserve servers with v1, and to MLServer
(priority 2) with v2.

`model_file` restates how each runtime finds the file it loads: KServe's sklearn and xgb
servers take exactly one file with their suffixes (python/sklearnserver/.../model.py and
python/xgbserver/.../model.py, `load`); MLServer 1.5 reads model-settings.json when there
is one, else the storage folder, where it looks for well-known names
(SeldonIO/MLServer mlserver/utils.py `get_model_uri`, mlserver/repository/load.py
`load_model_settings`, runtimes/{sklearn,xgboost} `WELLKNOWN_MODEL_FILENAMES`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from lab.errors import InputError
from lab.yamlio import read_json


@dataclass(frozen=True)
class Format:
    name: str
    version: str | None
    auto_select: bool
    priority: int | None


@dataclass(frozen=True)
class Runtime:
    name: str
    protocols: tuple[str, ...]
    formats: tuple[Format, ...]
    multinode: bool = False

    def priority(self, fmt: str) -> int | None:
        return next((f.priority for f in self.formats if f.name == fmt), None)


def _f(name: str, version: str, priority: int | None, auto: bool = True) -> Format:
    return Format(name, version, auto, priority)


RUNTIMES: tuple[Runtime, ...] = (
    Runtime("kserve-huggingfaceserver", ("v2", "v1"), (_f("huggingface", "1", 1),)),
    Runtime("kserve-huggingfaceserver-multinode", ("v2", "v1"),
            (_f("huggingface", "1", 2),), multinode=True),
    Runtime("kserve-lgbserver", ("v1", "v2"), (_f("lightgbm", "3", 1),)),
    Runtime("kserve-mlserver", ("v2",), (
        _f("sklearn", "0", 2), _f("sklearn", "1", 2), _f("xgboost", "1", 2),
        _f("xgboost", "2", 2), _f("lightgbm", "3", 2), _f("lightgbm", "4", 2),
        _f("mlflow", "1", 1), _f("mlflow", "2", 1))),
    Runtime("kserve-paddleserver", ("v1", "v2"), (_f("paddle", "2", 1),)),
    Runtime("kserve-pmmlserver", ("v1", "v2"), (_f("pmml", "3", 1), _f("pmml", "4", 1))),
    Runtime("kserve-sklearnserver", ("v1", "v2"), (_f("sklearn", "1", 1),)),
    Runtime("kserve-tensorflow-serving", ("v1", "grpc-v1"),
            (_f("tensorflow", "1", 2), _f("tensorflow", "2", 2))),
    Runtime("kserve-torchserve", ("v1", "v2", "grpc-v2"), (_f("pytorch", "1", 2),)),
    Runtime("kserve-tritonserver", ("v2", "grpc-v2"), (
        _f("tensorrt", "8", 1), _f("tensorflow", "1", 1), _f("tensorflow", "2", 1),
        _f("onnx", "1", 1), _f("pytorch", "1", None, auto=False), _f("triton", "2", 1))),
    Runtime("kserve-xgbserver", ("v1", "v2"), (_f("xgboost", "1", 1),)),
)
BY_NAME = {r.name: r for r in RUNTIMES}
# Runtimes the local backend can stand in for, and the formats they load locally.
LOCAL = {"kserve-sklearnserver": ("sklearn",), "kserve-xgbserver": ("xgboost",),
         "kserve-lgbserver": ("lightgbm",), "kserve-mlserver": ("sklearn", "xgboost", "lightgbm")}
# KServe's own servers: exactly one file with one of these suffixes.
SUFFIXES = {"sklearn": (".joblib", ".pkl", ".pickle"), "xgboost": (".bst", ".json", ".ubj"),
            "lightgbm": (".bst",)}
# MLServer's well-known file names, tried in this order.
WELL_KNOWN = {"sklearn": ("model.joblib", "model.pickle", "model.pkl"),
              "xgboost": ("model.bst", "model.json", "model.ubj"),
              "lightgbm": ("model.bst",)}
MLSERVER_CLASS = {"sklearn": "mlserver_sklearn.SKLearnModel",
                  "xgboost": "mlserver_xgboost.XGBoostModel",
                  "lightgbm": "mlserver_lightgbm.LightGBMModel"}
SETTINGS_FILE = "model-settings.json"


class NoRuntime(LookupError):
    """No runtime serves this model; the message says why, in KServe's words."""


def _supports(rt: Runtime, fmt: str, version: str | None, explicit: bool) -> bool:
    labels = set()
    for f in rt.formats:
        if explicit or f.auto_select:
            labels.add(f.name)
            if f.version is not None:
                labels.add(f"{f.name}:{f.version}")
    return (f"{fmt}:{version}" if version else fmt) in labels


def choose(fmt: str, version: str | None, protocol: str | None,
           runtime: str | None = None) -> str:
    """The runtime KServe picks for this model, or NoRuntime."""
    protocol = protocol or "v1"
    if runtime is not None:
        rt = BY_NAME.get(runtime)
        if rt is None:
            raise NoRuntime(f"no ServingRuntime named '{runtime}' (the lab installs: "
                            f"{', '.join(BY_NAME)})")
        if protocol not in rt.protocols:
            raise NoRuntime(f"specified runtime {runtime} does not support specified "
                            f"protocol version ({protocol})")
        if not _supports(rt, fmt, version, explicit=True):
            raise NoRuntime(f"specified runtime {runtime} does not support specified "
                            "framework/version")
        return runtime
    found = [rt for rt in RUNTIMES if not rt.multinode and protocol in rt.protocols
             and _supports(rt, fmt, version, explicit=False)]
    if not found:
        raise NoRuntime("No runtime found to support specified framework/version "
                        f"({fmt}{':' + version if version else ''}, protocol {protocol})")
    found.sort(key=lambda rt: -(rt.priority(fmt) or 0))  # stable: table order breaks ties
    return found[0].name


@dataclass(frozen=True)
class Loadable:
    path: Path                 # the file the runtime loads
    settings: Path | None = None  # MLServer's model-settings.json, when one was read
    name: str | None = None    # the model name it declares


def model_file(runtime: str, fmt: str, storage: Path) -> Loadable:
    """The file `runtime` loads from the downloaded storage (a folder, or one file);
    FileNotFoundError / ValueError with the runtime's own complaint otherwise."""
    if runtime == "kserve-mlserver":
        return _mlserver(fmt, storage)
    suffixes = SUFFIXES[fmt]
    folder = storage.parent if storage.is_file() else storage
    files = [storage] if storage.is_file() else sorted(
        p for p in storage.iterdir() if p.is_file())
    candidates = [p for p in files if p.name.endswith(suffixes)]
    if not candidates:
        raise FileNotFoundError(f"no {fmt} model file ({'/'.join(suffixes)}) in {folder}")
    if len(candidates) > 1:
        raise ValueError(
            f"more than one model file in {folder} ({', '.join(p.name for p in candidates)}); "
            f"{runtime} loads exactly one (a model-settings.json counts: it ends in .json)")
    return Loadable(candidates[0])


def _mlserver(fmt: str, storage: Path) -> Loadable:
    if storage.is_file():  # the storage initializer puts a single file in the folder
        if storage.name in WELL_KNOWN[fmt]:
            return Loadable(storage)
        raise FileNotFoundError(
            f"MLServer looks for {' / '.join(WELL_KNOWN[fmt])} (or a {SETTINGS_FILE} naming "
            f"the file), not {storage.name}: rename it")
    found = sorted(storage.rglob(SETTINGS_FILE))
    if len(found) > 1:
        raise ValueError(f"{len(found)} {SETTINGS_FILE} files under {storage}: MLServer "
                         "would serve one model per file; the local server serves one")
    uri, settings, name = storage, None, None
    if found:
        settings = found[0]
        try:
            data = read_json(settings)  # the learner's file: capped, depth-bounded
        except InputError as exc:
            raise ValueError(f"{settings} is not readable JSON: {exc.problem}") from None
        if not isinstance(data, dict):
            raise ValueError(f"{settings} must hold a JSON object")
        impl = data.get("implementation")
        if impl is not None and impl != MLSERVER_CLASS[fmt]:
            # MLServer 1.5 imports the file's class (pydantic v1 settings: the file beats
            # KServe's MLSERVER_MODEL_IMPLEMENTATION); it has no mlserver.models module.
            module = impl.rpartition(".")[0] if isinstance(impl, str) else ""
            why = (f"MLServer 1.5 cannot import it (no module named '{module}')"
                   if module.startswith("mlserver.") or module == "mlserver" else
                   f"it is not MLServer's {fmt} runtime")
            raise ValueError(f"{settings}: implementation '{impl}': {why}; write "
                             f"\"implementation\": \"{MLSERVER_CLASS[fmt]}\" or leave the "
                             "key out (KServe then sets it)")
        name = data.get("name") if isinstance(data.get("name"), str) else None
        params = data.get("parameters") if isinstance(data.get("parameters"), dict) else {}
        raw = params.get("uri")
        uri = settings.parent
        if isinstance(raw, str) and raw:
            given = Path(raw.removeprefix("file://"))
            uri = given if given.is_absolute() else (settings.parent / given)
    if uri.is_file():
        return Loadable(uri, settings, name)
    if uri.is_dir():
        for candidate in WELL_KNOWN[fmt]:
            if (uri / candidate).is_file():
                return Loadable(uri / candidate, settings, name)
    raise FileNotFoundError(
        f"MLServer finds no model in {uri}: it loads {' / '.join(WELL_KNOWN[fmt])} "
        f"(or the file a {SETTINGS_FILE} names in parameters.uri)")
