"""MOCK: stands for nvidia-ml-py NOT being installed (it is in kflab's `local` extra only).

Put first on the import path by tests/standins/nvml, `import pynvml` fails here exactly as
it does where the package is missing.
"""

raise ImportError("No module named 'pynvml' (mock: nvidia-ml-py not installed)")
