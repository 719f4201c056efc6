"""The cluster backend's tuning engine."""
