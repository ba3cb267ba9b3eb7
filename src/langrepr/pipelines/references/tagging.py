"""Non-gradient rows of the grid's tagging column (CoNLL-2003 NER, `stage: pipeline` cells), on the rows the nets see.

- `majority_tagger`: each word gets the tag it carried most often in training, an unseen word O (the multi-hot
  LM's `MajorityTagger`, on the word form): the column's floor.
- `token_logistic_regression`: the comparator, in the spirit of the classification columns' bag-of-words LR: a
  per-word scikit-learn `LogisticRegression` on sparse features of the word and its neighbours (identity,
  lower case, shape, prefix / suffix), no sequence model.

Both build the cell's datamodule from its config (same files, IOB2 tags, caps) and are scored by seqeval (entity
level, `langrepr.downstream_scores.tagging_scores`) under the model rows' metric names (`test/micro_f1`).
"""

from __future__ import annotations

import re
from typing import Any

from hydra.utils import instantiate
from omegaconf import DictConfig

from langrepr.downstream_scores import MajorityTagger, tagging_scores
from langrepr.errors import UserError


def _splits(datamodule: DictConfig) -> tuple[Any, list, list]:
    dm = instantiate(datamodule)
    train, test = dm.sentences("train"), dm.sentences("test")
    types = sorted({t[2:] for _, tags in train for t in tags if t != "O"})
    return types, train, test


def _scores(gold: list, predicted: list, types: list[str]) -> dict[str, float]:
    return {f"test/{k}": float(v) for k, v in tagging_scores(gold, predicted, types).items()}


def majority_tagger(datamodule: DictConfig, output_dir: str | None = None) -> dict[str, float]:
    """Entity F1 of the per-word majority tag (unseen words O) on the test sentences."""
    types, train, test = _splits(datamodule)
    tagger = MajorityTagger([[(w,) for w in words] for words, _ in train], [tags for _, tags in train])
    predicted = tagger([[(w,) for w in words] for words, _ in test])
    return _scores([tags for _, tags in test], predicted, types) | {"reference/seen_words": float(len(tagger.best))}


def word_shape(word: str) -> str:
    """Xxxx-style shape with runs collapsed: 'McDonald' -> 'XxXx', 'U.S.' -> 'X.X.', '1996' -> 'd'."""
    shape = re.sub(r"[A-Z]", "X", re.sub(r"[a-z]", "x", re.sub(r"[0-9]", "d", word)))
    return re.sub(r"(.)\1+", r"\1", shape)


def word_features(words: list[str], i: int, window: int = 1) -> dict[str, float]:
    """Sparse features of word i, for the per-word logistic regression comparator.

    Its identity, lower case, shape, 2-3 letter prefix / suffix, capitalisation, and the lower case and shape of
    the words within `window` (sentence edges as <s> / </s>).
    """
    w = words[i]
    feats = {f"w={w}": 1.0, f"lw={w.lower()}": 1.0, f"shape={word_shape(w)}": 1.0, f"p2={w[:2]}": 1.0,
             f"p3={w[:3]}": 1.0, f"s2={w[-2:]}": 1.0, f"s3={w[-3:]}": 1.0, "bias": 1.0}
    if w[:1].isupper():
        feats["title"] = 1.0
    if w.isupper():
        feats["upper"] = 1.0
    if any(c.isdigit() for c in w):
        feats["digit"] = 1.0
    for d in range(1, window + 1):
        for side, j in (("-", i - d), ("+", i + d)):
            n = words[j] if 0 <= j < len(words) else ("<s>" if j < 0 else "</s>")
            feats[f"{side}{d}lw={n.lower()}"] = 1.0
            feats[f"{side}{d}shape={word_shape(n)}"] = 1.0
    return feats


def token_logistic_regression(datamodule: DictConfig, output_dir: str | None = None, window: int = 1,
                              C: float = 1.0, max_iter: int = 1000, seed: int = 0) -> dict[str, float]:
    """A per-word logistic regression on `word_features`, fitted on the training sentences, scored on test."""
    from sklearn.feature_extraction import DictVectorizer
    from sklearn.linear_model import LogisticRegression

    if window < 0:
        raise UserError(f"pipeline.window must be >= 0, got {window}")
    types, train, test = _splits(datamodule)

    def rows(sentences: list) -> list[dict]:
        return [word_features(words, i, window) for words, _ in sentences for i in range(len(words))]

    vectorizer = DictVectorizer()
    x_train = vectorizer.fit_transform(rows(train))
    y_train = [t for _, tags in train for t in tags]
    model = LogisticRegression(C=C, max_iter=max_iter, random_state=seed).fit(x_train, y_train)
    flat = list(model.predict(vectorizer.transform(rows(test))))
    predicted, at = [], 0
    for words, _ in test:
        predicted.append(flat[at:at + len(words)])
        at += len(words)
    return _scores([tags for _, tags in test], predicted, types) | {"reference/features": float(x_train.shape[1])}
