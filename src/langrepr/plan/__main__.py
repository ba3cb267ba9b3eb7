"""`python -m langrepr.plan`."""

from langrepr.plan.cli import main

main()
