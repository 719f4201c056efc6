"""KServe InferenceServices on the local backend: KServe's own model server on 127.0.0.1."""
