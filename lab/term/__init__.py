"""Terminal output of the `kflab` command (rich; the web UI is lab/webui/): console.py (the
console, widths, escaping of user text), tables.py, progress.py (a run's events live, image
pulls), trials.py (Katib trials live), checks.py, steps.py, summaries.py."""
