"""kflab ui: the local web UI and the KFP v2beta1 API it serves (loopback only)."""
