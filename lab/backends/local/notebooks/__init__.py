"""Kubeflow Notebooks on the local backend: a JupyterLab server per Notebook."""
