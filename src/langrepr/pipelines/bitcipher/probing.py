"""Bit Cipher §4 probes: POS (GUM UPOS) and NER (CoNLL-2003) from the word vector alone.

The probe (after Hewitt & Liang 2019, as the paper describes it): a 2-layer MLP, Linear(D, h) → LeakyReLU →
Dropout(0.5) → Linear(h, C) → LogSoftmax, trained with NLL on every training token; each token's only feature is
its (lower-cased) word's vector, OOV words get the artefact's OOV row. An epoch is one pass over the training
*tokens* in shuffled minibatches, as the paper trains it. (Grouping tokens into count-weighted (word, tag) pairs
gives the same full-batch loss, but its minibatches are dominated by whichever frequent word they hold: measured
on GUM with the same steps, it fitted 77% of training tokens against 89% for token minibatches, and left the
probe below the majority-per-word row on words it had seen.) The epoch with the best dev score (token accuracy
for POS, seqeval entity F1 for NER) is kept and scored on test: token accuracy, accuracy on words seen / unseen
in probe training, plus entity F1 for NER (seqeval's conlleval-compatible default mode, which reads
CoNLL-2003's IOB1 tags).

Why the majority row is hard to beat on all tokens: a prediction that depends on the word type alone can do no
better on a seen word than that word's most frequent training tag, which is exactly the majority row. A vector
probe can therefore beat that row only through unseen words (the `unseen_acc` column), where the majority row
falls back to the most frequent tag overall.

`probe_cell` is a `stage: pipeline` function: it names its vectors by config (`vectors:` spec, built once under
`vectors_root` by `ensure_vectors`) and returns flat metrics. ``vectors: {kind: majority}`` (or null) is the
majority-tag-per-word
reference row (train counts; unseen words get the most frequent tag), scored by the same code.
"""

from __future__ import annotations

import copy
import logging
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from langrepr.errors import UserError
from langrepr.pipelines.bitcipher.word_vectors import ensure_vectors, load_vectors
from langrepr.utils import write_json_atomic

log = logging.getLogger("langrepr.pipelines")
Sentences = list[tuple[list[str], list[str]]]
TASKS = ("pos", "ner")


def task_splits(task: str, data_dir: str | Path | None) -> dict[str, Sentences]:
    from langrepr.data.english.conll import conll2003_splits
    from langrepr.data.english.gum import gum_splits

    if task == "pos":
        return gum_splits(data_dir)
    if task == "ner":
        return conll2003_splits(data_dir)
    raise UserError(f"unknown probing task '{task}': choose one of {', '.join(TASKS)}")


DROPOUT_AT = ("hidden", "input", "both")
SCHEDULES = ("constant", "linear")


class ProbeMLP(nn.Module):
    """The paper's probe: 2 linear layers, LeakyReLU, dropout 0.5, LogSoftmax output.

    [inferred, configurable] `dropout_at`: the paper gives the rate, not the place. ``hidden`` (default: after
    the LeakyReLU, as in Hewitt & Liang's MLP probes), ``input`` (on the word vector) or ``both``.
    """

    def __init__(self, dim: int, hidden: int, num_labels: int, dropout: float = 0.5, negative_slope: float = 0.01,
                 dropout_at: str = "hidden"):
        super().__init__()
        if dropout_at not in DROPOUT_AT:
            raise UserError(f"unknown probe dropout_at '{dropout_at}': choose one of {', '.join(DROPOUT_AT)}")
        on_input, on_hidden = dropout_at in ("input", "both"), dropout_at in ("hidden", "both")
        self.net = nn.Sequential(*([nn.Dropout(dropout)] if on_input else []), nn.Linear(dim, hidden),
                                 nn.LeakyReLU(negative_slope), *([nn.Dropout(dropout)] if on_hidden else []),
                                 nn.Linear(hidden, num_labels), nn.LogSoftmax(dim=-1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


def score(task: str, gold: Sentences, predicted: list[list[str]], train_words: set[str]) -> dict[str, float | None]:
    """Token accuracy, accuracy on words seen / unseen in probe training, and seqeval entity F1 for NER.

    Unseen words are where only the vectors can help (on seen words a type-level probe's ceiling is memorising
    each word's majority tag). With no seen (unseen) word the accuracy on them is undefined: None, not NaN
    (a NaN result marks a cell as diverged).
    """
    flat_gold = [t for _, tags in gold for t in tags]
    flat_pred = [t for tags in predicted for t in tags]
    correct = np.array([a == b for a, b in zip(flat_gold, flat_pred)])
    unseen = np.array([w.lower() not in train_words for tokens, _ in gold for w in tokens])
    metrics = {"acc": 100.0 * float(correct.mean()),
               "seen_acc": 100.0 * float(correct[~unseen].mean()) if (~unseen).any() else None,
               "unseen_acc": 100.0 * float(correct[unseen].mean()) if unseen.any() else None}
    if task == "ner":
        from seqeval.metrics import f1_score

        metrics["f1"] = 100.0 * float(f1_score([tags for _, tags in gold], predicted))
    return metrics


def regroup(flat: list[str], like: Sentences) -> list[list[str]]:
    out, i = [], 0
    for tokens, _ in like:
        out.append(flat[i:i + len(tokens)])
        i += len(tokens)
    return out


def majority_probe(task: str, splits: dict[str, Sentences]) -> dict[str, float]:
    """Most frequent train tag of each lower-cased word; unseen words get the most frequent tag overall."""
    by_word: dict[str, Counter] = {}
    overall: Counter = Counter()
    for tokens, tags in splits["train"]:
        for w, t in zip(tokens, tags):
            by_word.setdefault(w.lower(), Counter())[t] += 1
            overall[t] += 1
    best = {w: c.most_common(1)[0][0] for w, c in by_word.items()}
    default = overall.most_common(1)[0][0]
    metrics = {}
    for split in ("dev", "test"):
        flat = [best.get(w.lower(), default) for tokens, _ in splits[split] for w in tokens]
        predicted = regroup(flat, splits[split])
        metrics.update({f"{split}_{k}": v for k, v in score(task, splits[split], predicted, set(by_word)).items()})
    return metrics


def mlp_probe(task: str, splits: dict[str, Sentences], words: list[str], vectors: np.ndarray, seed: int,
              hidden: int = 256, dropout: float = 0.5, epochs: int = 10, lr: float = 1e-3, batch_size: int = 256,
              negative_slope: float = 0.01, weight_decay: float = 0.0, dropout_at: str = "hidden",
              standardise: bool = False, patience: int | None = None, schedule: str = "constant"
              ) -> dict[str, float]:
    """Train the MLP on train tokens, keep the best-dev epoch, score dev and test.

    [inferred, configurable] `standardise`: scale each vector dimension to mean 0 / std 1 over the probe's
    training tokens (the statistics of the inputs it is trained on, applied to every split alike), a probe
    choice that puts every vector set on one input scale. `patience`: stop once the dev score has not improved
    for that many epochs (None: train every epoch); the best-dev epoch is kept either way. `schedule`:
    ``constant`` learning rate, or ``linear`` decay from `lr` to 0 over the planned steps.
    """
    if schedule not in SCHEDULES:
        raise UserError(f"unknown probe schedule '{schedule}': choose one of {', '.join(SCHEDULES)}")
    index = {w: i for i, w in enumerate(words)}
    oov = len(words)
    labels = sorted({t for split in splits.values() for _, tags in split for t in tags})
    label_id = {t: i for i, t in enumerate(labels)}
    table = torch.from_numpy(np.asarray(vectors, dtype=np.float32))

    def encode(split: Sentences) -> tuple[torch.Tensor, torch.Tensor]:
        ids = [index.get(w.lower(), oov) for tokens, _ in split for w in tokens]
        tags = [label_id[t] for _, tags in split for t in tags]
        return torch.tensor(ids), torch.tensor(tags)

    data = {name: encode(split) for name, split in splits.items()}
    if standardise:
        weight = torch.bincount(data["train"][0], minlength=len(table)).to(table.dtype)   # token counts per row
        weight = weight / weight.sum()
        mean = weight @ table
        std = (weight @ (table - mean) ** 2).sqrt()
        table = (table - mean) / torch.where(std > 0, std, torch.ones_like(std))
    train_words = {w.lower() for tokens, _ in splits["train"] for w in tokens}
    gen = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    model = ProbeMLP(table.shape[1], hidden, len(labels), dropout, negative_slope, dropout_at)
    optimiser = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=weight_decay)
    loss_fn = nn.NLLLoss()
    total_steps = epochs * -(-len(data["train"][0]) // batch_size)
    scheduler = (torch.optim.lr_scheduler.LambdaLR(optimiser, lambda step: max(0.0, 1.0 - step / total_steps))
                 if schedule == "linear" else None)

    def predict(name: str) -> list[list[str]]:
        ids = data[name][0]
        types, inverse = torch.unique(ids, return_inverse=True)   # a word's prediction depends on its type only
        model.eval()
        with torch.no_grad():
            flat = model(table[types]).argmax(-1)[inverse].tolist()
        return regroup([labels[i] for i in flat], splits[name])

    train_ids, train_tags = data["train"]
    selection = "f1" if task == "ner" else "acc"
    best_score, best_state, best_epoch = -1.0, None, 0
    for epoch in range(1, epochs + 1):
        model.train()
        order = torch.randperm(len(train_ids), generator=gen)     # one epoch = every training token once
        for start in range(0, len(order), batch_size):
            batch = order[start:start + batch_size]
            optimiser.zero_grad()
            loss = loss_fn(model(table[train_ids[batch]]), train_tags[batch])
            loss.backward()
            optimiser.step()
            if scheduler is not None:
                scheduler.step()
        dev = score(task, splits["dev"], predict("dev"), train_words)[selection]
        if dev > best_score:
            best_score, best_state, best_epoch = dev, copy.deepcopy(model.state_dict()), epoch
        elif patience is not None and epoch - best_epoch >= int(patience):
            break
    model.load_state_dict(best_state)
    metrics = {"best_epoch": float(best_epoch), "epochs_run": float(epoch)}
    for split in ("dev", "test"):
        metrics.update({f"{split}_{k}": v for k, v in score(task, splits[split], predict(split), train_words).items()})
    return metrics


def probe_cell(output_dir: str, vectors: dict[str, Any] | None, vectors_root: str, data_dir: str | None,
               seed: int, tasks: list[str] = ("pos", "ner"), probe: dict[str, Any] | None = None,
               vector_defaults: dict[str, Any] | None = None, threads: int = 1,
               max_train_sentences: int | None = None) -> dict[str, float]:
    """One table cell: (build or reuse) the vectors, probe every task, return `<task>/<split>_<metric>`.

    The vectors spec is `vector_defaults` (corpus, cache, shared options) updated by `vectors` (the row's own).
    """
    torch.set_num_threads(max(1, int(threads)))
    metrics: dict[str, float] = {}
    words = table = None
    if vectors is not None and dict(vectors).get("kind") == "majority":
        vectors = None
    if vectors is not None:
        spec = {**dict(vector_defaults or {}), **dict(vectors), "data_dir": data_dir}
        folder, built = ensure_vectors(vectors_root, spec)
        write_json_atomic(Path(output_dir) / "vectors.json", {"artefact": str(folder), **built})
        metrics.update({f"vectors/{k}": float(v) for k, v in built.items()})
        words, table = load_vectors(folder)
    for task in tasks:
        splits = task_splits(task, data_dir)
        if max_train_sentences:
            splits["train"] = splits["train"][:int(max_train_sentences)]
        if vectors is None:
            result = majority_probe(task, splits)
        else:
            result = mlp_probe(task, splits, words, table, int(seed), **dict(probe or {}))
        metrics.update({f"{task}/{k}": v for k, v in result.items()})
        log.info("%s: %s", task, result)
    return metrics
