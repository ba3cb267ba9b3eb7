"""Reference rows computed by the same pipeline as model rows: priors, majority, bag-of-words, unigram, copy-source."""
