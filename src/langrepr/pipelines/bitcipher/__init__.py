"""Bit Cipher's non-gradient cells: co-occurrence vectors, the cipher, GloVe/word2vec baselines and the probes."""
