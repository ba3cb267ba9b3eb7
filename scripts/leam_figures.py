"""LEAM's figures (Wang et al., ACL 2018), rendered from the run artefacts of the LEAM tables, never retrained.

- Fig. 2(a) `leam_fig2a_accuracy_vs_iterations.<profile>.png`: validation accuracy against training iterations,
  LEAM vs the baselines, from the Lightning CSV logs (`csv/metrics.csv`) of the Table 2 cells (mean over seeds,
  min-max band); the bag-of-words reference as a line (it has no iterations).
- Fig. 2(b) `leam_fig2b_accuracy_vs_labelled_fraction.<profile>.png` (and `.json`, the points): test accuracy
  against the share of labelled training rows, per model (mean +- std over seeds), from the `leam_figure2b` cells
  (`dataset.datamodule.label_fraction`) and, for 100%, Table 2's cells of the same models; the majority class dashed.
- Fig. 2(c) `leam_fig2c_accuracy_vs_window.<profile>.png`: LEAM's test accuracy against the window 2r+1, from the
  `metrics.json` of the Table 3 cells (mean +- std over seeds).
- Fig. 3 `leam_fig3_embeddings.<profile>.png`: (a) cosine of each class's mean document vector z (eq. 6) with
  every label embedding c_k; (b) t-SNE (scikit-learn) of the test documents' z and the label embeddings C, in
  the same space, from one finished LEAM run's best checkpoint.
- Fig. 4 `leam_fig4_attention.<profile>.html`: the attention beta (eq. 5) over the words of test documents,
  shaded; from the same run.

Every figure names its profile, seeds and the commits of the runs it reads. Written to `<outputs>/figures/`, where
`make report` picks the PNGs up.

    python scripts/leam_figures.py [--outputs outputs] [--profile quick] [--figures fig2a,fig2b,fig2c,fig3,fig4]
                                   [--run <a LEAM run dir for figs. 3-4>] [--docs 8]
"""

from __future__ import annotations

import argparse
import csv
import html
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
from hydra.utils import instantiate  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402

from langrepr.errors import UserError  # noqa: E402
from langrepr.models.leam import LEAM  # noqa: E402
from langrepr.utils import PROJECT_ROOT, write_json_atomic, write_text_atomic  # noqa: E402

FIGURES = ("fig2a", "fig2b", "fig2c", "fig3", "fig4")
LEAM_RUN = "dataset=ag_news,model=leam,seed=1"   # Table 2's LEAM cell that figs. 3-4 read by default
# Fig. 2(a) lines: model choice -> label (the Table 2 rows that train by iterations), drawn in this order
CURVES = {"leam": "LEAM (paper eqs.)", "leam_code": "LEAM (code variant)", "leam_linear": "LEAM-linear",
          "swem_avg": "SWEM-avg", "swem_max": "SWEM-max", "swem_concat": "SWEM-concat", "kim_cnn": "CNN (Kim 2014)",
          "bilstm": "BiLSTM"}


# ---------------------------------------------------------------- reading run artefacts

def finished_runs(root: Path) -> list[tuple[Path, dict]]:
    """(run dir, metrics.json) of every finished cell under root (a sweep folder)."""
    runs = []
    for record in sorted(root.glob("*/metrics.json")):
        meta = json.loads(record.read_text())
        if meta.get("status") == "finished":
            runs.append((record.parent, meta))
    if not runs:
        raise UserError(f"no finished runs under {root}: run its table first (e.g. `make {root.name.replace('_', '-')} "
                        "PROFILE=quick`) or pass --outputs")
    return runs


def stamp(metas: list[dict], profile: str) -> str:
    """The provenance line under each figure: profile, seeds, commits."""
    seeds = sorted({m.get("seed") for m in metas if m.get("seed") is not None})
    commits = sorted({str(m.get("commit")) for m in metas})
    return (f"profile {profile} · seed{'s' if len(seeds) > 1 else ''} {', '.join(map(str, seeds))} · "
            f"commit{'s' if len(commits) > 1 else ''} {', '.join(commits)}")


def val_curve(run: Path) -> list[tuple[int, float]]:
    """(step, val/acc) rows of a run's CSV log, in step order; [] when the run logged none."""
    log = run / "csv" / "metrics.csv"
    if not log.is_file():
        return []
    with log.open(newline="") as fh:
        points = [(int(row["step"]), float(row["val/acc"])) for row in csv.DictReader(fh) if row.get("val/acc")]
    return sorted(points)


# ---------------------------------------------------------------- Fig. 2(a), 2(c)

def fig2a(table2: Path, out: Path, profile: str) -> Path:
    """Validation accuracy against iterations for each model of Table 2 (mean over seeds, min-max band)."""
    runs = finished_runs(table2)
    by_model: dict[str, list[list[tuple[int, float]]]] = defaultdict(list)
    used, bow = [], []
    for run, meta in runs:
        model = meta.get("choices", {}).get("model")
        curve = val_curve(run)
        if model in CURVES and curve:
            by_model[model].append(curve)
            used.append(meta)
        elif model == "bow_lr" and "test/test/acc" in meta.get("metrics", {}):
            bow.append(100 * meta["metrics"]["test/test/acc"])
            used.append(meta)
    if not by_model:
        raise UserError(f"no run under {table2} logged val/acc in csv/metrics.csv: rerun the table with the csv logger")
    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    for model in (m for m in CURVES if m in by_model):
        curves = by_model[model]
        steps = sorted(set.intersection(*(set(s for s, _ in c) for c in curves)))  # steps every seed logged
        values = np.array([[dict(c)[s] * 100 for s in steps] for c in curves])
        style = {"lw": 2.8, "zorder": 5, "color": "black"} if model == "leam" else {"lw": 1.3}
        line, = ax.plot(steps, values.mean(0), marker="o", ms=3, label=f"{CURVES[model]} ({len(curves)} seeds)", **style)
        if len(curves) > 1:
            ax.fill_between(steps, values.min(0), values.max(0), color=line.get_color(), alpha=0.15)
    if bow:
        ax.axhline(statistics.fmean(bow), color="dimgray", ls="--", lw=1, label="bag-of-words LR (test, reference)")
    ax.set_xlabel("training iterations (optimiser steps)")
    ax.set_ylabel("validation accuracy (%)")
    ax.set_title("LEAM Fig. 2(a): accuracy against training iterations", fontsize=11)
    ax.legend(fontsize=7.5, loc="lower right")
    ax.grid(alpha=0.3)
    fig.text(0.01, -0.04, stamp(used, profile), fontsize=6.5, color="dimgray")
    return save(fig, out / f"leam_fig2a_accuracy_vs_iterations.{profile}.png")


# Fig. 2(b) lines: model choice -> label, drawn in this order (the rows of conf/experiment/leam_figure2b.yaml)
FRACTION_LINES = {"leam_glove": "LEAM + GloVe", "leam": "LEAM (random init)", "swem_avg": "SWEM-avg",
                  "kim_cnn": "CNN (Kim 2014)"}


def fig2b(fig2b_runs: Path, table2: Path, out: Path, profile: str) -> Path:
    """Test accuracy against the labelled share of the training rows (log axis), mean +- std over seeds.

    Fractions from the `leam_figure2b` cells' `dataset.datamodule.label_fraction`; 100% from the Table 2 cells of the
    same models (the same budget). The points are written beside the PNG as JSON (what the figure shows).
    """
    acc: dict[str, dict[float, list[float]]] = defaultdict(lambda: defaultdict(list))
    used = []
    sources = [(fig2b_runs, None)] + ([(table2, 1.0)] if table2.is_dir() else [])
    for root, fixed in sources:
        for run, meta in finished_runs(root):
            model = meta.get("choices", {}).get("model")
            value = meta.get("metrics", {}).get("test/test/acc")
            if model not in (*FRACTION_LINES, "majority_class") or value is None:
                continue
            fraction = fixed
            if fraction is None:
                config = OmegaConf.load(run / "config_resolved.yaml") if (run / "config_resolved.yaml").is_file() else {}
                fraction = OmegaConf.select(config, "dataset.datamodule.label_fraction") if config else None
            if fraction is None:
                continue
            acc[model][float(fraction)].append(100 * value)
            used.append(meta)
    if not any(m in acc for m in FRACTION_LINES):
        raise UserError(f"no run under {fig2b_runs} has dataset.datamodule.label_fraction and test/test/acc: run "
                        "`make leam-figure2b` first")
    points = {}
    fig, ax = plt.subplots(figsize=(6.8, 4.4))
    for model in (m for m in FRACTION_LINES if m in acc):
        fractions = sorted(acc[model])
        means = [statistics.fmean(acc[model][f]) for f in fractions]
        stds = [statistics.stdev(acc[model][f]) if len(acc[model][f]) > 1 else 0.0 for f in fractions]
        style = {"lw": 2.6, "color": "black", "zorder": 5} if model == "leam_glove" else {"lw": 1.4}
        ax.errorbar([100 * f for f in fractions], means, yerr=stds, marker="o", ms=4, capsize=3,
                    label=FRACTION_LINES[model], **style)
        points[FRACTION_LINES[model]] = [{"fraction": f, "mean": round(m, 3), "std": round(s, 3), "n": len(acc[model][f])}
                                         for f, m, s in zip(fractions, means, stds)]
    if "majority_class" in acc:
        fractions = sorted(acc["majority_class"])
        ax.plot([100 * f for f in fractions], [statistics.fmean(acc["majority_class"][f]) for f in fractions],
                color="dimgray", ls="--", lw=1, label="majority class (floor)")
        points["Majority class"] = [{"fraction": f, "mean": round(statistics.fmean(acc["majority_class"][f]), 3),
                                     "n": len(acc["majority_class"][f])} for f in fractions]
    ax.set_xscale("log")
    ticks = sorted({f for m in acc.values() for f in m})
    ax.set_xticks([100 * f for f in ticks], [f"{100 * f:g}%" for f in ticks])
    ax.set_xlabel("labelled share of the training rows")
    ax.set_ylabel("test accuracy (%)")
    ax.set_title("LEAM Fig. 2(b): accuracy against the proportion of labelled data (error bars: std over seeds)",
                 fontsize=9)
    ax.legend(fontsize=7.5, loc="lower right")
    ax.grid(alpha=0.3)
    fig.text(0.01, -0.04, stamp(used, profile), fontsize=6.5, color="dimgray")
    path = save(fig, out / f"leam_fig2b_accuracy_vs_labelled_fraction.{profile}.png")
    write_json_atomic(path.with_suffix(".json"), {"profile": profile, "metric": "test accuracy (%)", "lines": points})
    return path


def fig2c(table3: Path, out: Path, profile: str) -> Path:
    """LEAM test accuracy against the window 2r+1 (mean +- std over seeds)."""
    runs = finished_runs(table3)
    by_window: dict[int, list[float]] = defaultdict(list)
    used = []
    for run, meta in runs:
        config = OmegaConf.load(run / "config_resolved.yaml") if (run / "config_resolved.yaml").is_file() else {}
        window = OmegaConf.select(config, "model.net.window") if config else None
        acc = meta.get("metrics", {}).get("test/test/acc")
        if window is not None and acc is not None:
            by_window[int(window)].append(100 * acc)
            used.append(meta)
    if not by_window:
        raise UserError(f"no run under {table3} has model.net.window and test/test/acc: run `make leam-table3` first")
    windows = sorted(by_window)
    means = [statistics.fmean(by_window[w]) for w in windows]
    stds = [statistics.stdev(by_window[w]) if len(by_window[w]) > 1 else 0.0 for w in windows]
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    ax.errorbar(windows, means, yerr=stds, marker="o", capsize=4, lw=2)
    for w, m in zip(windows, means):
        ax.annotate(f"{m:.1f} (n={len(by_window[w])})", (w, m), textcoords="offset points", xytext=(5, 5),
                    ha="left", fontsize=7)
    ax.set_xticks(windows, [f"{w}\n(r={(w - 1) // 2})" for w in windows])
    ax.set_xlabel("phrase window 2r+1")
    ax.set_ylabel("test accuracy (%)")
    ax.set_title("LEAM Fig. 2(c): accuracy against the window (error bars: std over seeds)", fontsize=10)
    ax.grid(alpha=0.3)
    fig.text(0.01, -0.04, stamp(used, profile), fontsize=6.5, color="dimgray")
    return save(fig, out / f"leam_fig2c_accuracy_vs_window.{profile}.png")


# ---------------------------------------------------------------- one LEAM run: Figs. 3 and 4

def load_leam(run: Path) -> tuple[LEAM, object, dict]:
    """The run's datamodule (set up), its LEAM with the best checkpoint's weights, and its metrics.json."""
    cfg_path, ckpt, record = run / "config_resolved.yaml", run / "checkpoints" / "best.ckpt", run / "metrics.json"
    if not cfg_path.is_file() or not ckpt.is_file():
        raise UserError(f"{run} is not a finished LEAM run (needs config_resolved.yaml and checkpoints/best.ckpt): "
                        "run `make leam-table2 PROFILE=quick` first or pass --run")
    cfg = OmegaConf.load(cfg_path)
    dm = instantiate(cfg.dataset.datamodule, tokenizer=instantiate(cfg.model.tokenizer))
    dm.setup("fit")
    state = {k.removeprefix("net."): v for k, v in torch.load(ckpt, map_location="cpu", weights_only=False)
             ["state_dict"].items() if k.startswith("net.")}
    if "label_embedding" not in state:
        raise UserError(f"{ckpt} holds no LEAM weights (no label embedding): pass --run a LEAM run")
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
    meta = json.loads(record.read_text()) if record.is_file() else {}
    return net.eval(), dm, meta


def fig3(net: LEAM, dm, meta: dict, out: Path, profile: str, max_docs: int = 2000) -> Path:
    """(a) cos(mean z of class k, c_j); (b) t-SNE of the test documents' z with the label embeddings C."""
    from sklearn.manifold import TSNE

    texts, labels = dm.texts_and_labels("test")
    texts, labels = texts[:max_docs], np.asarray(labels[:max_docs])
    enc = dm.tokenizer.encode(texts)
    with torch.no_grad():
        z = net.document_embedding(enc["input_ids"], enc["attention_mask"]).numpy()
    c = net.label_embedding.detach().numpy()
    names = [str(n) for n in (dm.class_names or range(dm.num_labels))]
    k = len(c)
    present = [j for j in range(k) if (labels == j).any()]
    centres = np.stack([z[labels == j].mean(0) for j in present])
    unit = lambda a: a / np.linalg.norm(a, axis=1, keepdims=True).clip(1e-12)  # noqa: E731
    cosine = unit(centres) @ unit(c).T
    points = TSNE(n_components=2, perplexity=min(30.0, (len(z) + k - 1) / 3), init="pca", random_state=0
                  ).fit_transform(np.concatenate([z, c]).astype(np.float64))
    fig, (ax_a, ax_b) = plt.subplots(1, 2, figsize=(11.5, 5.0), gridspec_kw={"width_ratios": [1, 1.35]})
    im = ax_a.imshow(cosine, cmap="viridis", vmin=-1, vmax=1)
    ax_a.set_xticks(range(k), names, rotation=45, ha="right", fontsize=8)
    ax_a.set_yticks(range(len(present)), [names[j] for j in present], fontsize=8)
    for (i, j), v in np.ndenumerate(cosine):
        ax_a.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=7, color="white" if v < 0.5 else "black")
    ax_a.set_xlabel("label embedding c_k")
    ax_a.set_ylabel("class mean of document vectors z")
    ax_a.set_title("(a) cosine similarity", fontsize=10)
    fig.colorbar(im, ax=ax_a, fraction=0.046)
    colours = plt.get_cmap("tab10" if k <= 10 else "tab20")
    for j in range(k):
        ax_b.scatter(*points[:len(z)][labels == j].T, s=5, alpha=0.45, color=colours(j % colours.N), label=names[j])
        ax_b.scatter(*points[len(z) + j], s=260, color=colours(j % colours.N), edgecolors="black", linewidths=2.0,
                     zorder=3)
    ax_b.legend(fontsize=7, markerscale=3, loc="best")
    ax_b.set_xticks([])
    ax_b.set_yticks([])
    ax_b.set_title(f"(b) t-SNE: {len(z)} test documents (dots), label embeddings (circled)", fontsize=10)
    fig.suptitle("LEAM Fig. 3: document and label embeddings in the joint space", fontsize=11)
    fig.text(0.01, -0.04, f"{stamp([meta], profile)} · {dm.data_info.get('split', '')}", fontsize=6.5, color="dimgray")
    return save(fig, out / f"leam_fig3_embeddings.{profile}.png")


def fig4(net: LEAM, dm, meta: dict, out: Path, profile: str, docs: int = 8) -> Path:
    """The attention beta over the words of the first test documents as a self-contained HTML page."""
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
    page = ("<!doctype html><meta charset='utf-8'><title>LEAM attention</title>"
            "<h1>LEAM attention &beta; over the words of test documents (paper Fig. 4)</h1>"
            f"<p>{html.escape(dm.data_info.get('split', ''))}. {html.escape(stamp([meta], profile))}. "
            "Shade = &beta;<sub>l</sub> / max &beta; (darker = more weight); [UNK] = a word outside the training "
            "vocabulary.</p>" + "".join(rows))
    path = out / f"leam_fig4_attention.{profile}.html"
    write_text_atomic(path, page)
    return path


def save(fig, path: Path) -> Path:
    """Write a PNG atomically (a half-written figure never replaces a good one)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    fig.savefig(tmp, dpi=130, bbox_inches="tight", format="png")
    plt.close(fig)
    tmp.replace(path)
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--outputs", default="outputs", help="the outputs folder holding <profile>/leam_table*/ runs")
    parser.add_argument("--profile", default="quick", choices=("quick", "full"))
    parser.add_argument("--figures", default=",".join(FIGURES), help=f"comma list of {', '.join(FIGURES)}")
    parser.add_argument("--run", default=None, help=f"the LEAM run for figs. 3-4 (default <outputs>/<profile>/"
                                                     f"leam_table2/{LEAM_RUN})")
    parser.add_argument("--docs", type=int, default=8, help="test documents on the Fig. 4 page")
    parser.add_argument("--out-dir", default=None, help="where figures go (default <outputs>/figures)")
    args = parser.parse_args(argv)
    wanted = [f.strip() for f in args.figures.split(",") if f.strip()]
    unknown = sorted(set(wanted) - set(FIGURES))
    if unknown:
        print(f"error: unknown figure(s) {', '.join(unknown)}: choose from {', '.join(FIGURES)}", file=sys.stderr)
        return 2
    outputs = Path(args.outputs) if Path(args.outputs).is_absolute() else PROJECT_ROOT / args.outputs
    out = Path(args.out_dir) if args.out_dir else outputs / "figures"
    runs = outputs / args.profile
    run = Path(args.run) if args.run else runs / "leam_table2" / LEAM_RUN
    failed, leam = 0, None
    for name in wanted:
        try:
            if name == "fig2a":
                path = fig2a(runs / "leam_table2", out, args.profile)
            elif name == "fig2b":
                path = fig2b(runs / "leam_figure2b", runs / "leam_table2", out, args.profile)
            elif name == "fig2c":
                path = fig2c(runs / "leam_table3", out, args.profile)
            else:
                leam = leam or load_leam(run)
                path = (fig3 if name == "fig3" else fig4)(*leam, out, args.profile,
                                                          **({"docs": args.docs} if name == "fig4" else {}))
            print(f"wrote {path}")
        except UserError as err:
            print(f"error: {name}: {err}", file=sys.stderr)
            failed += 1
    return 2 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
