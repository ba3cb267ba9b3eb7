"""The multi-hot LM paper's non-gradient cells and what its fine-tuning tasks share with them.

Token-list sizes (Table 1), the KorQuAD answer split (Table 4), and the scores and reference predictors that
model rows and reference rows use alike (one definition each).
"""
