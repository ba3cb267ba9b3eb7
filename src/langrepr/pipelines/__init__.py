"""Non-gradient stages of a cell (`stage: pipeline`): Bit Cipher co-occurrence vectors, post-processing, probes."""
