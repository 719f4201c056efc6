"""The cluster backend's training engine."""
