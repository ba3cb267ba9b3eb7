#!/usr/bin/env bash
# Prepare what a GPU run carries (issue 32 item 4): the GPU image has torch, Lightning, transformers, joblib, ... but
# not hydra-core, omegaconf, antlr4 nor hydra-joblib-launcher, and the shared data folder does not travel. This
# copies those pure-Python packages from this venv's site-packages and the PTB text into a git-ignored folder
# (default gpu_carry/, about 11 MiB of the 64 MiB a run may carry), then prints the device command to use.
#   scripts/prepare_gpu_carry.sh [--dest DIR]      (LANGREPR_DATA_DIR: where data/ptb is read from)
set -euo pipefail
cd "$(dirname "$0")/.."
dest=gpu_carry
if [ "${1:-}" = "--dest" ]; then dest=${2:?--dest needs a folder}; fi
py=${PYTHON:-.venv/bin/python}
[ -x "$py" ] || py=python3
site=$("$py" -c "import omegaconf, pathlib; print(pathlib.Path(omegaconf.__file__).parents[1])" 2>/dev/null) \
  || { echo "error: $py cannot import omegaconf: run make install first (or set PYTHON=)" >&2; exit 2; }
data=${LANGREPR_DATA_DIR:-}
if [ -z "$data" ] || [ ! -f "$data/ptb/ptb.train.txt" ]; then
  echo "error: no PTB copy at \$LANGREPR_DATA_DIR/ptb (ptb.train.txt): set LANGREPR_DATA_DIR to the shared data folder" >&2
  exit 2
fi
for pkg in hydra omegaconf antlr4 hydra_plugins/hydra_joblib_launcher; do
  [ -d "$site/$pkg" ] || { echo "error: $pkg is not installed in $site: pip install -e . first" >&2; exit 2; }
done
tmp="$dest.tmp.$$"
rm -rf "$tmp"
mkdir -p "$tmp/site-packages/hydra_plugins" "$tmp/data/ptb"
for pkg in hydra omegaconf antlr4; do cp -r "$site/$pkg" "$tmp/site-packages/"; done
cp -r "$site/hydra_plugins/hydra_joblib_launcher" "$tmp/site-packages/hydra_plugins/"
cp "$data"/ptb/ptb.{train,valid,test}.txt "$tmp/data/ptb/"
[ -f "$data/ptb/SOURCE.md" ] && cp "$data/ptb/SOURCE.md" "$tmp/data/ptb/"
find "$tmp" -name __pycache__ -type d -prune -exec rm -rf {} +
rm -rf "$dest" && mv "$tmp" "$dest"      # whole or not at all: a half-copied carry never travels
size=$(du -sm "$dest" | cut -f1)
if [ "$size" -gt 60 ]; then echo "error: $dest is $size MiB, over what a run carries (64 MiB in all)" >&2; exit 2; fi
echo "prepared $dest/ ($size MiB): hydra, omegaconf, antlr4, hydra-joblib-launcher + data/ptb"
echo "device command (one call; the machine's \$OUT receives at most 8 files):"
echo "  run(command=\"bash scripts/gpu_ptb_column.sh\", carry=[\"$dest\"], timeout_s=600)"
