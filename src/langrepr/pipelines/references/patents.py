"""Reference rows of the EWE patent tables, computed on the very split the models see.

Two `stage: pipeline` cells (conf/papers/ewe/model/patent_label_prior.yaml, patent_tfidf_probe.yaml): the label prior
(every document gets the training label frequencies as scores, so it predicts the train-frequent label set
at the task's threshold) and a TF-IDF + one-vs-rest logistic-regression probe (scikit-learn). They make a
quick table readable at a glance: is a model above chance, and how far from a simple probe. They are scored
by `langrepr.metrics`, the code that scores the model rows (`tasks/classification.py`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from hydra.utils import instantiate
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import precision_recall_fscore_support
from sklearn.multiclass import OneVsRestClassifier

from langrepr.data.patents.uspto import PatentDataModule
from langrepr.metrics import micro_auroc, predict


def multilabel_scores(y: np.ndarray, scores: np.ndarray, threshold: float) -> dict[str, float]:
    """Micro P/R/F1 at score > `threshold` and micro AUROC, as the model rows score them.

    The AUROC is one exact ROC over every (document, label) cell, no label dropped.
    """
    p, r, f1, _ = precision_recall_fscore_support(y, predict(scores, threshold).numpy(), average="micro",
                                                  zero_division=0)
    return {"f1": float(f1), "precision": float(p), "recall": float(r), "auroc": float(micro_auroc(scores, y))}


def _datamodule(datamodule: Any, tokenizer: Any) -> PatentDataModule:
    dm = instantiate(datamodule, tokenizer=instantiate(tokenizer))
    dm.prepare_data()
    dm.setup("fit")
    return dm


def _evaluate(dm: PatentDataModule, predict, threshold: float) -> dict[str, float]:
    out = {}
    for split in ["val", *dm.test_splits]:
        texts, y = dm.texts_and_labels(split)
        prefix = "val" if split == "val" else f"test/{split}"
        out.update({f"{prefix}/{k}": v for k, v in multilabel_scores(y, predict(texts), threshold).items()})
    return out


def label_prior(datamodule: Any, tokenizer: Any, output_dir: str, threshold: float = 0.3) -> dict[str, float]:
    """The label-prior row: scores = training label frequencies for every document."""
    dm = _datamodule(datamodule, tokenizer)
    _, y_train = dm.texts_and_labels("train")
    prior = y_train.mean(0)
    return _evaluate(dm, lambda texts: np.tile(prior, (len(texts), 1)), threshold)


def tfidf_probe(datamodule: Any, tokenizer: Any, output_dir: str, threshold: float = 0.3, C: float = 10.0,
                max_features: int = 50_000, ngram_max: int = 1, seed: int = 0) -> dict[str, float]:
    """The linear-probe row: TF-IDF features, one logistic regression per label.

    Labels that are constant in training (never or always present) score their training frequency.
    """
    dm = _datamodule(datamodule, tokenizer)
    texts, y_train = dm.texts_and_labels("train")
    vectorizer = TfidfVectorizer(max_features=max_features, ngram_range=(1, ngram_max), sublinear_tf=True)
    x_train = vectorizer.fit_transform(texts)
    seen = (y_train.sum(0) > 0) & (y_train.sum(0) < len(y_train))
    clf = OneVsRestClassifier(LogisticRegression(C=C, max_iter=1000, random_state=seed), n_jobs=1)
    clf.fit(x_train, y_train[:, seen])
    constant = y_train.mean(0)

    def predict(batch: list[str]) -> np.ndarray:
        scores = np.tile(constant, (len(batch), 1)).astype(np.float64)
        scores[:, seen] = clf.predict_proba(vectorizer.transform(batch))
        return scores

    return _evaluate(dm, predict, threshold)
