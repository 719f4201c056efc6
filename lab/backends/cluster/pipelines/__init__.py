"""The cluster backend's pipelines engine."""
