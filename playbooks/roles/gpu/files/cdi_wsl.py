#!/usr/bin/env python3
"""Complete the CDI spec `nvidia-ctk cdi generate --mode=wsl --format=json` writes in WSL 2,
so that the device plugin (NVIDIA/k8s-device-plugin, "No devices found" in legacy mode on
WSL 2: issue 646) and GPU pods work with nvidia-container-runtime in CDI mode:

- WSL mode names one device, `all`; the device plugin hands GPUs to containers by UUID (its
  default id strategy), which the runtime in CDI mode turns into `nvidia.com/gpu=<UUID>`:
  every GPU gets a device of its own UUID and one of its index, with `all`'s edits (in WSL
  every GPU is behind the one /dev/dxg);
- NVML needs libdxcore.so (it reaches the Windows driver through /dev/dxg); nvidia-ctk may
  leave it out (nvidia-container-toolkit issue 1739): it is mounted when missing;
- device names that start with a digit need CDI spec version 0.5.0.

Usage: cdi_wsl.py GENERATED.json OUTPUT.json LIBDXCORE UUID [UUID...]
Standard library only (it runs with the node's python3). Writes OUTPUT only when it changes;
prints "changed" or "unchanged".
"""

import json
import os
import sys
import tempfile

MIN_VERSION = (0, 5, 0)


def _version(text):
    try:
        return tuple(int(p) for p in str(text).split("."))
    except ValueError:
        return (0,)


def complete(spec, uuids, libdxcore):
    devices = spec.get("devices") or []
    base = next((d for d in devices if d.get("name") == "all"), None)
    if base is None:
        raise SystemExit("cdi_wsl: the generated spec has no 'all' device: "
                         "is this WSL 2 (nvidia-ctk cdi generate --mode=wsl)?")
    names = {d.get("name") for d in devices}
    for index, uuid in enumerate(uuids):
        for name in (uuid, str(index)):
            if name not in names:
                devices.append({"name": name,
                                "containerEdits": json.loads(json.dumps(base["containerEdits"]))})
                names.add(name)
    spec["devices"] = devices
    edits = spec.setdefault("containerEdits", {})
    mounts = edits.setdefault("mounts", [])
    every = mounts + [m for d in devices
                      for m in (d.get("containerEdits") or {}).get("mounts") or []]
    if not any(os.path.basename(m.get("hostPath", "")) == "libdxcore.so" for m in every):
        mounts.append({"hostPath": libdxcore, "containerPath": libdxcore,
                       "options": ["ro", "nosuid", "nodev", "bind"]})
    if _version(spec.get("cdiVersion", "0")) < MIN_VERSION:
        spec["cdiVersion"] = ".".join(str(p) for p in MIN_VERSION)
    return spec


def main(argv):
    if len(argv) < 4:
        print(__doc__, file=sys.stderr)
        return 2
    generated, output, libdxcore, uuids = argv[0], argv[1], argv[2], argv[3:]
    with open(generated) as fh:
        spec = complete(json.load(fh), uuids, libdxcore)
    text = json.dumps(spec, indent=2, sort_keys=True) + "\n"
    try:
        with open(output) as fh:
            if fh.read() == text:
                print("unchanged")
                return 0
    except OSError:
        pass
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(output) or ".", prefix=".cdi-")
    with os.fdopen(fd, "w") as fh:
        fh.write(text)
    os.chmod(tmp, 0o644)
    os.replace(tmp, output)
    print("changed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
