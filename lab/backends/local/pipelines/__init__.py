"""KFP pipeline runs on the local backend: Kubeflow's own local runner (kfp.local)."""
