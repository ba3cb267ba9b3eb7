"""Korean data for the multi-hot LM: morpheme analysis (kiwipiepy), corpora, token lists, multi-hot batches, KorQuAD."""
