"""Kubeflow Notebooks on a cluster (the Notebook controller)."""
