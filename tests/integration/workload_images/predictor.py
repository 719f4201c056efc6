"""A custom KServe predictor, as a user bakes one into an image: the V1 protocol on port 8080
(GET /v1/models/NAME, POST /v1/models/NAME:predict), a linear model read from /mnt/models
(where KServe's storage initializer puts STORAGE_URI). Standard library only. It takes the
flags of KServe's own model servers (--model_name, --model_dir, --http_port), so a test can
also run it in place of a runtime's image that no registry here can serve."""

import argparse
import json
import os
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

parser = argparse.ArgumentParser()
parser.add_argument("--model_name", default="model")
parser.add_argument("--http_port", type=int, default=8080)
parser.add_argument("--model_dir", default="/mnt/models")
args = parser.parse_args()
with open(os.path.join(args.model_dir, "model.json")) as fh:
    model = json.load(fh)


class Handler(BaseHTTPRequestHandler):
    def _send(self, code, body):
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path == f"/v1/models/{args.model_name}":
            self._send(200, {"name": args.model_name, "ready": True})
        else:
            self._send(404, {"error": f"no model at {self.path}"})

    def do_POST(self):
        if self.path != f"/v1/models/{args.model_name}:predict":
            self._send(404, {"error": f"no model at {self.path}"})
            return
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        out = [sum(w * x for w, x in zip(model["weights"], row)) + model["bias"]
               for row in body["instances"]]
        self._send(200, {"predictions": out, "host": os.uname().nodename})

    def log_message(self, fmt, *a):
        print("request:", fmt % a, flush=True)


print(f"serving {args.model_name} on {args.http_port}", flush=True)
ThreadingHTTPServer(("0.0.0.0", args.http_port), Handler).serve_forever()
