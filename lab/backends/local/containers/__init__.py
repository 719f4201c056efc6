"""Workloads whose image kflab does not run as a local process: containers of that image,
through Podman or Docker (engine, images, spec, choice, workload, probe, cleanup)."""
