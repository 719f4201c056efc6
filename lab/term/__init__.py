"""Terminal output (rich): tables, live progress, summaries; the web UI is lab/webui/."""
