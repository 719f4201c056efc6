"""Thin Kubernetes layer shared by both backends: kinds, manifests, conditions."""
