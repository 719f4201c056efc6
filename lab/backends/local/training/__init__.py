"""PyTorchJobs on the local backend: replicas as local processes with the operator's env."""
