"""The plan as Markdown: one page per table and `all.md`."""

from __future__ import annotations

import json

from langrepr.plan.facts import DATASET_DOWNLOAD, GIB, downloads, size_of
from langrepr.plan.table import unique_stages

# ---------------------------------------------------------------- rendering

def _hours(h: float | None, digits: int = 2) -> str:
    """GPU-hours for a table cell: 'unknown', '<0.01' below the printed precision, else fixed decimals."""
    if h is None:
        return "unknown"
    floor = 10 ** -digits
    return f"<{floor:g}" if 0 < h < floor else f"{h:,.{digits}f}"


def _gb(n: float) -> str:
    return f"{n / GIB:.1f}"


def _num(n: float | None, unit: str = "") -> str:
    if n is None:
        return "unknown"
    for div, suffix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(n) >= div:
            return f"{n / div:.3g}{suffix}{unit}"
    return f"{n:.3g}{unit}"


def _bound(s: dict) -> str:
    """Which term priced the stage: FLOP time at the utilisation, or the measured per-step floor (ms per step)."""
    if s.get("bound") is None:
        return "unknown"
    ms = f"{s['step_s'] * 1e3:.3g} GPU-ms/step"
    if s["bound"] == "FLOPs":
        return f"FLOPs ({ms})"
    return f"floor ({ms}; {s['floor_note']})"


METHOD = """- FLOPs: `torch.utils.flop_counter.FlopCounterMode` over one forward + backward of the real network built from
  the cell's config, on random inputs of the real shapes at batch 1 (SDPA through its math backend so that its
  matmuls are visible), scaled linearly to the cell's batch. Matmul-like ops only, 2 FLOPs per multiply-add;
  elementwise ops, the optimiser update and data loading are not counted. LSTM layers (no counter formula for
  the fused RNN kernels) are counted by hand: 2 x gates x (input + hidden) x hidden per token and direction,
  backward twice that.
- GPU time per optimiser step: the larger of FLOP time (FLOPs per step / (peak x utilisation)) and the measured
  per-step floor of that kind of cell (masked_lm, hf_classifier, causal_lm, ...: the fp16 step time a GPU check
  measured for it, `docs/gpu/gpu_check_*.json` from `scripts/gpu_check.py`; kernel launches, memory-bound ops and
  the optimiser bind a small cell, not its FLOPs). Validation and test batches pay the same per-batch floor
  (the check times no forward-only batch: an upper bound for them) or their forward FLOPs, whichever is larger.
  Each stage says which term bound it. Peak = dense fp16/bf16 tensor-core TFLOP/s of the GPU class; utilisation
  = `--utilisation`, else the highest fp16 MFU measured on that GPU (what a FLOP-bound cell sustains; that cell
  sets no floor of its kind), else 35%.
  A GPU class with no check borrows utilisation and floors from the measured GPU nearest in peak, and says so; a
  kind no check measured borrows a kind of the same layers or the smallest floor (a lower bound).
- Packing (`--pack N`): N cells sharing one GPU each step slower by the slowdown measured with that many cells
  side by side (`docs/gpu/packed_*.json`, linear between 1 and the measured count), and the GPU time of each is
  divided by N.
- Memory (AMP, `torch.autocast` fp16 + GradScaler, AdamW/Adam): fp32 master weights 4 B/param + the fp16 copies
  autocast caches 2 B/param + fp32 gradients 4 B/param + optimiser moments 8 B/param + activations. Activations =
  the tensors saved for backward (`torch.autograd.graph.saved_tensors_hooks`, parameters excluded, each storage
  once; SDPA as the GPU's fused kernels save it: q, k, v, output, log-sum-exp) at batch 1 on CPU in fp32, floating-point ones halved (autocast runs matmuls in fp16; LayerNorm and
  softmax keep fp32 there, so this is the low end), times the batch. Temporaries of the backward pass and the
  CUDA context are covered by a 1 GiB reserve. Fits when the sum is within the card's memory less that reserve.
- Accumulation: the fewest steps k (k divides the batch) whose micro-batch batch/k fits."""


def render_table(plan: dict) -> str:
    a, t = plan["assumption"], plan["totals"]
    gb = a["memory_gib"]
    more = f", plus {t['stages_unknown']} stage(s) of unknown length" if t["stages_unknown"] else ""
    lines = [f"# Cost plan: {plan['table']} (profile {plan['profile']})", "",
             f"Throughput: {a['text']}.", "",
             f"**Total: {_hours(t['gpu_hours'], 1)} GPU-hours** over {t['stages']} gradient stage(s) "
             f"(shared pretrainings once){more}; "
             f"{t['cpu_cells']} CPU cell(s); {t['error_cells']} cell(s) that do not compose. Peak memory "
             f"{_gb(t['peak_bytes'])} GiB.", "",
             f"| cell | stage | params | training data | FLOPs/step | steps | GPU-h | bound by | "
             f"peak GiB (fp16 AMP) | fits {gb:g} GB | fits with |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    if not t["stages"]:
        lines = lines[:-2] + ["No gradient cell: nothing in this table needs a GPU."]
    for c in plan["cells"]:
        for s in c["stages"]:
            fit = "yes" if s["fits"] else "no"
            hours = _hours(s["gpu_hours"])
            how = ("" if s["fits"] else "no micro-batch fits" if not s["accumulation"]
                   else f"{s['batch_setting']}={s['micro_batch']}, accumulate {s['accumulation']} (the pipeline has "
                        "no accumulation setting)" if s["precision"].startswith("32 (the")
                   else f"{s['batch_setting']}={s['micro_batch']} trainer.accumulate_grad_batches={s['accumulation']}")
            lines.append(f"| {c['cell']} | {s['name']} | {s['params'] / 1e6:.1f}M | {s['examples']} | "
                         f"{_num(s['flops_per_step'])} (batch {s['batch']}) | {s['steps_note']} | "
                         f"{hours} | {_bound(s)} | "
                         f"{_gb(s['memory']['total'])} | {fit} | {how} |")
    if t["not_fitting"]:
        lines += ["", f"Does not fit {gb:g} GB at the paper's batch: " + "; ".join(t["not_fitting"]) + "."]
    cpu = [c for c in plan["cells"] if c.get("cpu")]
    if cpu:
        lines += ["", "## CPU cells (no GPU time)", "", "| cell | what it does |", "|---|---|"]
        lines += [f"| {c['cell']} | {c['cpu']} |" for c in cpu]
    lines += ["", "## Stage details", ""]
    for c in plan["cells"]:
        for s in c["stages"]:
            m = s["memory"]
            lines.append(f"- {c['cell']} / {s['name']}: {s['kind']} {json.dumps(s['shape'], default=str)}; "
                         f"{s['optimizer']}, precision {s['precision']}; evaluation {s['eval_note'] or 'not counted'} "
                         f"({_num(s['eval_flops'], 'FLOP')}); memory weights {_gb(m['weights_fp32'])} + fp16 copy "
                         f"{_gb(m['weights_fp16_copy'])} + grads {_gb(m['gradients'])} + optimiser {_gb(m['optimizer'])} "
                         f"+ activations {_gb(m['activations'])} GiB ({_num(s['act_fp16_per_example'], 'B')} per example "
                         f"in fp16, {_num(s['act_fp32_per_example'], 'B')} in fp32)"
                         + "".join(f"; {n}" for n in s["notes"]))
    if plan["downloads"]:
        lines += ["", "## Data to download", "", "| data | size | licence | gated |", "|---|---|---|---|"]
        for key in plan["downloads"]:
            d = downloads()[key]
            lines.append(f"| {d['what']} | {d['size']} | {d['licence']} | {d['gated']} |")
    sizes = sorted({DATASET_DOWNLOAD.get(c["dataset"], c["dataset"]): size_of(c["dataset"])
                    for c in plan["cells"] if c["stages"] and c.get("dataset") and size_of(c["dataset"])}.items())
    if sizes:
        lines += ["", "## Training-set sizes used", ""]
        lines += [f"- {k}: " + (f"{s['train']:,} {s['unit']}" if s.get("train") else "unknown")
                  + f" ({s['source']}; {s['file']})" for k, s in sizes]
    if plan["findings"]:
        lines += ["", "## Findings", ""] + [f"- {f}" for f in plan["findings"]]
    lines += ["", "## Method", "", METHOD, ""]
    return "\n".join(lines)


def render_all(plans: list[dict]) -> str:
    seen, total, unknown = set(), 0.0, 0
    by_paper: dict[str, float] = {}
    lines = ["# Cost plan: every table", "", "| table | GPU-hours | gradient stages | CPU cells | peak GiB | "
             "does not fit at the paper's batch | does not compose |", "|---|---|---|---|---|---|---|"]
    for plan in plans:
        t = plan["totals"]
        lines.append(f"| [{plan['table']}]({plan['table']}.md) | {_hours(t['gpu_hours'], 1)}"
                     + (f" (+{t['stages_unknown']} unknown)" if t["stages_unknown"] else "")
                     + f" | {t['stages']} | {t['cpu_cells']} | {_gb(t['peak_bytes'])} | {len(t['not_fitting'])} | "
                     f"{t['error_cells']} |")
        paper = plan["table"].split("_", 1)[0]
        for _, s in unique_stages(plan["cells"], seen):
            if s["gpu_hours"] is None:
                unknown += 1
            else:
                total += s["gpu_hours"]
                by_paper[paper] = by_paper.get(paper, 0.0) + s["gpu_hours"]
    lines += ["", "Per paper (each stage once, whichever tables share it): "
              + "; ".join(f"{p} {_hours(h, 1)} GPU-hours" for p, h in sorted(by_paper.items())), "",
              f"**All papers: {total - by_paper.get('grid', 0.0):,.1f} GPU-hours**"
              + (f" (with the cross-paper grid: {total:,.1f})" if "grid" in by_paper else "")
              + (f", plus {unknown} stage(s) of unknown length" if unknown else "")
              + ". A table's total counts the cells of its own sweep; where its `make` target also runs another "
                "sweep (EWE 4-5 read Table 3; multi-hot 2-5 fine-tune multihot_pretrain's cells and 4-5 read Table 3; "
                "Bit Cipher reads Tables 1/3/5) those cells are counted in that sweep's row.", ""]
    if plans:
        lines += [f"Projected for **{plans[0]['assumption']['label']}** (`--gpu {plans[0]['assumption']['gpu']}`"
                  + (f", `--pack {plans[0]['assumption']['pack']}`" if plans[0]['assumption']['pack'] > 1 else "")
                  + f"). Throughput: {plans[0]['assumption']['text']}.", ""]
    findings = [f"{p['table']}: {f}" for p in plans for f in p["findings"]]
    if findings:
        lines += ["## Findings", ""] + [f"- {f}" for f in findings] + [""]
    return "\n".join(lines)
