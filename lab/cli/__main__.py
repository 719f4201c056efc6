"""`python -m lab.cli` runs the kflab command (tests and benches use it)."""

from lab.cli import main

main()
