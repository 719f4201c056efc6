"""Fetch KFP artifacts from the lab's object store (S3 API, AWS Signature Version 4).

KFP 2.16 writes artifacts under `minio://<bucket>/v2/artifacts/...` (its default pipeline
root) to the S3-compatible store of the install (SeaweedFS in kubeflow/manifests 26.03, Service
`seaweedfs`, port 8333), with the credentials of the `mlpipeline-minio-artifact` Secret.
kflab reads them through a port-forward and signs each GET with SigV4 (path-style URLs).
Only what KFP itself wrote is fetched: minio:// and s3:// URIs of one bucket.
"""

from __future__ import annotations

import datetime
import hashlib
import hmac
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from lab.errors import LabError

EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()
MAX_ARTIFACT = 256 * 1024 * 1024


def split_uri(uri: str) -> tuple[str, str]:
    """(bucket, key) of a minio:// or s3:// URI."""
    parts = urllib.parse.urlsplit(uri)
    if parts.scheme not in ("minio", "s3") or not parts.netloc or not parts.path.strip("/"):
        raise LabError(f"cannot fetch artifact {uri}: only minio:// and s3:// URIs")
    return parts.netloc, parts.path.lstrip("/")


def _hmac(key: bytes, msg: str) -> bytes:
    return hmac.new(key, msg.encode(), hashlib.sha256).digest()


def sigv4_headers(method: str, host: str, path: str, query: str, headers: dict[str, str],
                  access: str, secret: str, when: datetime.datetime, region: str = "us-east-1",
                  payload_hash: str = EMPTY_SHA256) -> dict[str, str]:
    """The headers of an S3 request signed with AWS Signature Version 4."""
    amz_date = when.strftime("%Y%m%dT%H%M%SZ")
    day = when.strftime("%Y%m%d")
    all_headers = {**{k.lower(): v.strip() for k, v in headers.items()}, "host": host,
                   "x-amz-content-sha256": payload_hash, "x-amz-date": amz_date}
    names = sorted(all_headers)
    canonical = "\n".join([method, urllib.parse.quote(path, safe="/~"), query,
                           "".join(f"{n}:{all_headers[n]}\n" for n in names),
                           ";".join(names), payload_hash])
    scope = f"{day}/{region}/s3/aws4_request"
    to_sign = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope,
                         hashlib.sha256(canonical.encode()).hexdigest()])
    key = _hmac(_hmac(_hmac(_hmac(f"AWS4{secret}".encode(), day), region), "s3"),
                "aws4_request")
    signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    out = {k: v for k, v in all_headers.items() if k != "host"}
    out["Authorization"] = (f"AWS4-HMAC-SHA256 Credential={access}/{scope}, "
                            f"SignedHeaders={';'.join(names)}, Signature={signature}")
    return out


def fetch(base_url: str, uri: str, dest: Path, access: str, secret: str) -> Path:
    """Download the object `uri` (path-style from `base_url`, a 127.0.0.1 forward) to `dest`."""
    if not base_url.startswith("http://127.0.0.1:"):
        raise LabError(f"refusing object store address {base_url}")
    bucket, key = split_uri(uri)
    host = base_url.removeprefix("http://")
    path = f"/{bucket}/{key}"
    headers = sigv4_headers("GET", host, path, "", {}, access, secret,
                            datetime.datetime.now(datetime.UTC))
    req = urllib.request.Request(base_url + urllib.parse.quote(path, safe="/~"),  # noqa: S310
                                 headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:  # noqa: S310 - loopback only
            data = resp.read(MAX_ARTIFACT + 1)
    except urllib.error.HTTPError as exc:
        raise LabError(f"object store: {exc.code} for {uri}") from None
    except (urllib.error.URLError, OSError) as exc:
        raise LabError(f"object store: no answer for {uri} ({exc})") from None
    if len(data) > MAX_ARTIFACT:
        raise LabError(f"artifact {uri} is larger than {MAX_ARTIFACT // 2**20} MiB; not fetched")
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.part")
    tmp.write_bytes(data)
    tmp.replace(dest)
    return dest
