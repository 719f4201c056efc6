"""kflab: a lightweight local Kubeflow lab (installer and checked scenarios)."""

__version__ = "0.1.0"
