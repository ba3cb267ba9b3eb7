"""EWE's non-gradient cells: the label statistics of Table 2."""
