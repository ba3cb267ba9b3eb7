#!/usr/bin/env bash
# TensorCoder Table 1's PTB column at the full profile in one GPU call (issue 32 item 4): 5 models x 3 seeds x
# 20,000 steps plus the unigram reference row, all cells packed on the one GPU (hydra/launcher=joblib), then the
# table rendered and everything a later session needs tarred into $OUT (at most 8 files come back):
#   gpu_check_<gpu>.json    scripts/gpu_check.py first (GPU_CHECK=0 skips it), in GPU_CHECK_S seconds (200)
#   ptb_column_runs.tar.gz  every cell folder (metrics.json, config, CSV curves; no checkpoints)
#   tensorcoder_table1.*    the rendered table (partial when cells did not finish)
#   column.log              what ran, for how long, how far each cell got; train.log the sweep's console
# Prepared here by scripts/prepare_gpu_carry.sh (pure-Python deps + PTB into gpu_carry/); on the device:
#   run(command="bash scripts/gpu_ptb_column.sh", carry=["gpu_carry"], timeout_s=600)
# Training stops at the TOTAL_S budget (default 540 s, under the 600 s a call may run); cells resume with
# ckpt_path=auto where their checkpoints still are. --tiny: the same path on CPU at 2 steps, 2 models, 1 seed
# (tests/tensorcoder/test_gpu_column.py).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
tiny=0
case "${1:-}" in --tiny) tiny=1 ;; "") ;; *) echo "error: unknown argument '$1' (the only one is --tiny)" >&2; exit 2 ;; esac
carry=${GPU_CARRY:-gpu_carry}
if [ ! -d "$carry/site-packages/hydra" ] || [ ! -f "$carry/data/ptb/ptb.train.txt" ]; then
  echo "error: no prepared carry at $carry/ (hydra + data/ptb): run scripts/prepare_gpu_carry.sh here first" >&2
  exit 2
fi
carry=$(cd "$carry" && pwd)
export PYTHONPATH="$PWD/src:$carry/site-packages${PYTHONPATH:+:$PYTHONPATH}"
export LANGREPR_DATA_DIR="$carry/data" HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 WANDB_MODE=offline
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}       # 18 cell processes on 16 cores: no intra-op thread pools each
py=${PYTHON:-python}
out=${OUT:-outputs/gpu_ptb_column}
mkdir -p "$out"
out=$(cd "$out" && pwd)
total=${TOTAL_S:-540}
log="$out/column.log"
say() { echo "[$(date -u +%H:%M:%S) +${SECONDS}s] $*" | tee -a "$log"; }

if [ "$tiny" = 1 ]; then
  root="$out/work"
  pack=${PACK:-2}
  cells=(model=transformer_1head,tensorcoder_1conv seeds=1 trainer.accelerator=cpu trainer.precision=32-true
         trainer.max_epochs=1 trainer.max_steps=2 trainer.limit_train_batches=2 trainer.limit_val_batches=2
         trainer.limit_test_batches=2 trainer.val_check_interval=1.0 dataset.datamodule.max_eval_samples=8)
  check=(--device cpu --small)
  gpu_check=${GPU_CHECK:-0}
else
  root=${RUN_ROOT:-outputs}
  pack=${PACK:-18}                                  # 6 rows x 3 seeds: every PTB cell at once
  cells=()
  check=(--max-seconds 2 --budget-s $(( ${GPU_CHECK_S:-200} - 40 )))
  gpu_check=${GPU_CHECK:-1}
fi
switches=()
if grep -qE '^compile:' conf/train.yaml; then switches+=("compile=${COMPILE:-reduce-overhead}"); fi
[ "$tiny" = 1 ] && switches=()                      # CUDA graphs mean nothing on CPU
say "commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown); $("$py" -c 'import torch; print("torch", torch.__version__, "cuda", torch.cuda.is_available() and torch.cuda.get_device_name())' 2>&1)"

if [ "$gpu_check" = 1 ]; then
  say "gpu_check (at most ${GPU_CHECK_S:-200} s)"
  timeout -k 10 "${GPU_CHECK_S:-200}" "$py" scripts/gpu_check.py --out "$out" "${check[@]}" >>"$log" 2>&1 \
    || say "gpu_check stopped: exit $?"
fi

left=$(( total - SECONDS - 45 ))                    # 45 s kept for the render and the tar
if [ "$left" -lt 30 ]; then left=30; fi
args=(-m experiment=tensorcoder_table1 profile=full dataset=ptb ckpt_path=auto "paths.output_root=$root"
      hydra/launcher=joblib "hydra.launcher.n_jobs=$pack" "${switches[@]}" "${cells[@]}")
say "training for at most ${left} s: python -m langrepr.train ${args[*]}"
began=$SECONDS
timeout -k 15 "$left" "$py" -m langrepr.train "${args[@]}" >"$out/train.log" 2>&1
status=$?
case $status in
  0) say "sweep finished in $(( SECONDS - began )) s" ;;
  124|137) say "sweep stopped at the budget after $(( SECONDS - began )) s (cells resume with ckpt_path=auto)" ;;
  *) say "sweep exited $status after $(( SECONDS - began )) s:"; grep '^error:' "$out/train.log" | tee -a "$log" ;;
esac

sweep="$root/full/tensorcoder_table1"
"$py" - "$sweep" >>"$log" 2>&1 <<'PY'
"""How far each cell got: its status, and the last step in its CSV log."""
import csv, json, sys
from pathlib import Path

for cell in sorted(p for p in Path(sys.argv[1]).glob("*") if p.is_dir() and "dataset=ptb" in p.name):
    record = cell / "metrics.json"
    status = json.loads(record.read_text()).get("status") if record.exists() else "no record"
    steps = [int(r["step"]) for f in cell.glob("csv/**/metrics.csv") for r in csv.DictReader(f.open()) if r.get("step")]
    print(f"  {cell.name}: {status}, last logged step {max(steps) if steps else 0}")
PY
say "render"
"$py" -m langrepr.tables tensorcoder_table1 --profile full --outputs "$root" >>"$log" 2>&1 || say "render exited $?"
cp "$root"/tables/tensorcoder_table1*.md "$root"/tables/tensorcoder_table1*.json "$out"/ 2>/dev/null
if [ -d "$sweep" ]; then
  tar -czf "$out/ptb_column_runs.tar.gz" --exclude=checkpoints --exclude='*.ckpt' -C "$root" full/tensorcoder_table1
fi
say "done: $(cd "$out" && ls | grep -v '^work$' | tr '\n' ' ')"
[ "$status" = 0 ] || [ "$status" = 124 ] || [ "$status" = 137 ] || exit "$status"
