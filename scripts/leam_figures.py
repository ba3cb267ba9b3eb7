"""LEAM Fig. 4 from a finished run: the attention beta over the words of test documents, as an HTML page.

Reads one LEAM run folder (its `config_resolved.yaml` for the data, its best checkpoint for the weights),
rebuilds the same test split, and shades every word by beta_l / max_l beta_l (eq. 5), with the true and
predicted class beside each document. The net's shape is read from the checkpoint itself, so a run made
with older argument names still loads. Writes outputs/tables/leam_fig4_attention.quick.html (self-contained), beside the tables.

    python scripts/leam_figures.py [--run outputs/quick/leam_table2/dataset=ag_news,model=leam,seed=1] [--docs 8]
"""

from __future__ import annotations

import argparse
import html
from pathlib import Path

import torch
from hydra.utils import instantiate
from omegaconf import OmegaConf

from langrepr.errors import UserError
from langrepr.models.leam import LEAM
from langrepr.utils import PROJECT_ROOT, write_text_atomic

DEFAULT_RUN = "outputs/quick/leam_table2/dataset=ag_news,model=leam,seed=1"


def load_leam(run: Path) -> tuple[LEAM, object]:
    """The run's datamodule (set up) and its LEAM with the best checkpoint's weights."""
    cfg_path, ckpt = run / "config_resolved.yaml", run / "checkpoints" / "best.ckpt"
    if not cfg_path.is_file() or not ckpt.is_file():
        raise UserError(f"{run} is not a finished LEAM run (needs config_resolved.yaml and checkpoints/best.ckpt): "
                        "run `make leam-table2 PROFILE=quick` first or pass --run")
    cfg = OmegaConf.load(cfg_path)
    dm = instantiate(cfg.dataset.datamodule, tokenizer=instantiate(cfg.model.tokenizer))
    dm.setup("fit")
    state = {k.removeprefix("net."): v for k, v in torch.load(ckpt, map_location="cpu", weights_only=False)
             ["state_dict"].items() if k.startswith("net.")}
    if "phrase_weight" in state:
        weight = state["phrase_weight"]
        conv, window = ("depthwise" if weight.dim() == 1 else "full"), weight.shape[-1]
    else:
        conv, window = "none", 1
    head_linears = sorted(k for k in state if k.startswith("head.") and k.endswith(".weight"))
    net = LEAM(vocab_size=state["embedding.weight"].shape[0], num_labels=state["label_embedding"].shape[0],
               hidden_size=state["embedding.weight"].shape[1], window=window, conv=conv,
               num_layers=len(head_linears), intermediate_size=state[head_linears[0]].shape[0])
    net.load_state_dict(state)
    return net.eval(), dm


def page(net: LEAM, dm, docs: int) -> str:
    texts, labels = dm.texts_and_labels("test")
    names = list(dm.class_names or range(dm.num_labels))
    vocab = dm.tokenizer.vocab
    enc = dm.tokenizer.encode(texts[:docs])
    with torch.no_grad():
        beta, _ = net.attention(enc["input_ids"], enc["attention_mask"])
        pred = net(enc["input_ids"], enc["attention_mask"]).argmax(-1)
    rows = []
    for i in range(min(docs, len(texts))):
        n = int(enc["attention_mask"][i].sum())
        weights = beta[i, :n] / beta[i, :n].max()
        words = "".join(f'<span style="background: rgba(255, 190, 0, {float(w):.2f})">{html.escape(vocab[int(t)])}</span> '
                        for t, w in zip(enc["input_ids"][i, :n], weights))
        rows.append(f"<p><b>true: {html.escape(str(names[labels[i]]))} · predicted: "
                    f"{html.escape(str(names[int(pred[i])]))}</b><br>{words}</p>")
    return ("<!doctype html><meta charset='utf-8'><title>LEAM attention</title>"
            "<h1>LEAM attention &beta; over the words of test documents (paper Fig. 4)</h1>"
            f"<p>{html.escape(dm.data_info.get('split', ''))}. Shade = &beta;<sub>l</sub> / max &beta; "
            "(darker = more weight); [UNK] = a word outside the training vocabulary.</p>" + "".join(rows))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", default=DEFAULT_RUN)
    parser.add_argument("--docs", type=int, default=8)
    parser.add_argument("--out", default="outputs/tables/leam_fig4_attention.quick.html")
    args = parser.parse_args()
    try:
        net, dm = load_leam(PROJECT_ROOT / args.run)
        write_text_atomic(PROJECT_ROOT / args.out, page(net, dm, args.docs))
    except UserError as err:
        raise SystemExit(f"error: {err}") from None
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
