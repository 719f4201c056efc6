"""The cluster backend's serving engine."""
