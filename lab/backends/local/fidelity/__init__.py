"""The local backend's fidelity to upstream: the rules (rules.py) its handlers announce and
docs/fidelity.md shows, and the page itself (page.py), which adds the upstream examples'
sweep (scripts/fidelity_sweep.py)."""

from lab.backends.local.fidelity.rules import (
    ANNOTATION,
    BY_ID,
    DIFFERENT,
    KINDS,
    REFUSED,
    RULES,
    SAME,
    UPSTREAM,
    Rule,
    announce,
    text,
)

__all__ = ["ANNOTATION", "BY_ID", "DIFFERENT", "KINDS", "REFUSED", "RULES", "SAME", "UPSTREAM",
           "Rule", "announce", "text"]
