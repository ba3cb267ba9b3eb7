"""`python -m langrepr.report`."""

from langrepr.report import main

main()
