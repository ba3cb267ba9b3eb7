"""`python -m langrepr.tables`."""

from langrepr.tables import main

main()
