"""Non-gradient rows of the LEAM tables (`stage: pipeline` cells), on exactly the rows the nets see.

- `majority_class`: always predict the most frequent training class (the floor of a quick table).
- `bow_logistic_regression`: the paper's bag-of-words baseline, scikit-learn `CountVectorizer`
  (or TF-IDF) + `LogisticRegression`, one-vs-rest for multi-label.
- `time_training_iterations` (Table 4): parameters and wall-clock seconds per 1,000 training
  iterations of a model, measured at a fixed batch and length on random ids.

Each builds the run's datamodule from its config (same split, caps and tokenizer) and returns flat metrics.
Multi-label rows are scored by `langrepr.metrics`, the code the model rows use (CAML's conventions).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import torch
from hydra.utils import instantiate
from omegaconf import DictConfig

from langrepr import metrics
from langrepr.errors import UserError


def _check_macro_f1(convention: str) -> None:
    """Before any data is read or a model fitted."""
    if convention not in metrics.MACRO_F1:
        raise UserError(f"pipeline.macro_f1={convention!r}: choose {' or '.join(metrics.MACRO_F1)}")


def _datamodule(datamodule: DictConfig, tokenizer: DictConfig) -> Any:
    dm = instantiate(datamodule, tokenizer=instantiate(tokenizer))
    dm.setup("fit")
    return dm


def majority_class(datamodule: DictConfig, tokenizer: DictConfig, output_dir: str | None = None) -> dict[str, float]:
    """Accuracy of predicting the training split's most frequent class on the test split."""
    dm = _datamodule(datamodule, tokenizer)
    _, train_labels = dm.texts_and_labels("train")
    _, test_labels = dm.texts_and_labels("test")
    if dm.multilabel:
        raise UserError("majority_class is a single-label reference row; use bow_logistic_regression for multi-label")
    top = int(np.bincount(train_labels).argmax())
    return {"test/test/acc": float(np.mean(np.asarray(test_labels) == top)), "reference/majority_label": top}


def bow_logistic_regression(datamodule: DictConfig, tokenizer: DictConfig, output_dir: str | None = None,
                            features: str = "count", ngram_max: int = 1, max_features: int | None = 50000,
                            C: float = 1.0, max_iter: int = 1000, seed: int = 0, threshold: float = 0.5,
                            macro_f1: str = "caml") -> dict[str, float]:
    """Bag-of-words (or TF-IDF) logistic regression fitted on train (val unused), scored on test.

    Multi-label: one-vs-rest, scored by `multilabel_scores` at `threshold` with the `macro_f1` convention.
    """
    from sklearn.feature_extraction.text import CountVectorizer, TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.multiclass import OneVsRestClassifier

    from langrepr.data.classification.vocab import split_words

    _check_macro_f1(macro_f1)
    dm = _datamodule(datamodule, tokenizer)
    train_x, train_y = dm.texts_and_labels("train")
    test_x, test_y = dm.texts_and_labels("test")
    if features not in ("count", "tfidf"):
        raise UserError(f"pipeline.features must be count or tfidf, got {features!r}")
    vectorizer_cls = CountVectorizer if features == "count" else TfidfVectorizer
    vectorizer = vectorizer_cls(tokenizer=split_words, lowercase=False, token_pattern=None,
                                ngram_range=(1, ngram_max), max_features=max_features)
    x_train, x_test = vectorizer.fit_transform(train_x), vectorizer.transform(test_x)
    model = LogisticRegression(C=C, max_iter=max_iter, random_state=seed)
    if dm.multilabel:
        y_train = np.zeros((len(train_y), dm.num_labels))
        for i, labs in enumerate(train_y):
            y_train[i, labs] = 1
        scores = OneVsRestClassifier(model).fit(x_train, y_train).predict_proba(x_test)
        return multilabel_scores(scores, test_y, dm.num_labels, threshold, macro_f1=macro_f1)
    model.fit(x_train, train_y)
    return {"test/test/acc": float(np.mean(model.predict(x_test) == np.asarray(test_y))),
            "reference/features": float(x_train.shape[1])}


def label_prior(datamodule: DictConfig, tokenizer: DictConfig, output_dir: str | None = None,
                threshold: float = 0.5, macro_f1: str = "caml") -> dict[str, float]:
    """Multi-label reference row: every test document scored with the training label frequencies.

    Reads labels through the datamodule's own loaders, so it works for any multi-label datamodule
    (MIMIC-III 50, the synthetic or real patents) and sees the rows the nets see.
    """
    _check_macro_f1(macro_f1)
    dm = _datamodule(datamodule, tokenizer)
    train = torch.cat([b["labels"] for b in dm.train_dataloader()]).float()
    prior = train.mean(0).numpy()
    out = {"reference/train_docs": float(len(train))}
    loaders = dm.test_dataloader()
    for name, loader in zip(getattr(dm, "test_splits", ["test"]), loaders if isinstance(loaders, list) else [loaders]):
        test = torch.cat([b["labels"] for b in loader]).numpy()
        labels = [np.flatnonzero(row).tolist() for row in test]
        out.update(multilabel_scores(np.tile(prior, (len(test), 1)), labels, test.shape[1], threshold, split=name,
                                     macro_f1=macro_f1))
    return out


def multilabel_scores(scores: np.ndarray, labels: list[list[int]], num_labels: int, threshold: float = 0.5,
                      k: int = 5, split: str = "test", macro_f1: str = "caml") -> dict[str, float]:
    """Table 5 metrics in CAML's conventions (Mullenbach et al. 2018), as the LEAM task scores its model rows.

    A label is predicted when its score is > `threshold`. Micro F1 and micro AUC pool every (document, label)
    cell, no label dropped; macro AUC averages the labels with both positive and negative test documents;
    macro F1 is `caml` (harmonic mean of macro P and macro R) or `per_label_mean` (mean of per-label F1).
    """
    _check_macro_f1(macro_f1)
    truth = np.zeros((len(labels), num_labels), dtype=bool)
    for i, labs in enumerate(labels):
        truth[i, labs] = True
    positives = truth.sum(0)
    if not ((positives > 0) & (positives < len(truth))).any():
        raise UserError("no label has both positive and negative test documents: macro AUC is undefined; "
                        "use more test rows")
    counts = metrics.label_counts(metrics.predict(scores, threshold), truth)
    top = np.argsort(-scores, axis=1)[:, :k]
    return {f"test/{split}/f1_macro": float(metrics.macro_f1(*counts, macro_f1)),
            f"test/{split}/f1": float(metrics.micro_f1(*counts)),
            f"test/{split}/auc_macro": float(metrics.macro_auroc(scores, truth)),
            f"test/{split}/auc_micro": float(metrics.micro_auroc(scores, truth)),
            f"test/{split}/p@{k}": float(np.take_along_axis(truth, top, axis=1).mean())}


def time_training_iterations(net: DictConfig, vocab_size: int, num_labels: int, batch_size: int, length: int,
                             iterations: int = 50, warmup: int = 5, threads: int | None = None,
                             output_dir: str | None = None, seed: int = 0, block_steps: int = 5) -> dict[str, float]:
    """Parameters and seconds per 1,000 Adam training steps (forward + backward + update), CPU or GPU.

    Random ids at full length (no padding) so every model does its full work. After `warmup` steps,
    `iterations` steps run in blocks of `block_steps`; the fastest block's time per step is scaled to 1,000. Absolute times depend on the machine,
    so Table 4 reports each model's time over LEAM's measured in the same sweep.
    """
    torch.manual_seed(seed)
    if threads:
        torch.set_num_threads(int(threads))
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = instantiate(net, vocab_size=vocab_size, num_labels=num_labels).to(device).train()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    ids = torch.randint(2, vocab_size, (batch_size, length), device=device)
    mask = torch.ones_like(ids)
    labels = torch.randint(0, num_labels, (batch_size,), device=device)

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(model(ids, mask), labels)
        if hasattr(model, "label_logits") and getattr(model, "label_penalty", 0):
            logits = model.label_logits()
            loss = loss + model.label_penalty * torch.nn.functional.cross_entropy(
                logits, torch.arange(num_labels, device=device))
        loss.backward()
        optimizer.step()

    def timed(n: int) -> float:
        if device == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(n):
            step()
        if device == "cuda":
            torch.cuda.synchronize()
        return (time.perf_counter() - start) / n

    for _ in range(warmup):
        step()
    # the fastest of several blocks: on a shared machine other load only ever adds time
    block = max(1, min(block_steps, iterations))
    per_step = min(timed(block) for _ in range(max(1, iterations // block)))
    seconds = per_step * iterations
    params = sum(p.numel() for p in model.parameters())
    counter = getattr(model, "embedding_parameters", None)
    embedding = int(counter()) if callable(counter) else 0
    return {"params/total": float(params), "params/non_embedding": float(params - embedding),
            "time/s_per_1000_iter": seconds / iterations * 1000.0, "time/iterations_timed": float(iterations),
            "time/cuda": float(device == "cuda")}
