# langrepr: every entry point a user needs. `make help` lists them.
# Each target sets up .venv (torch CPU wheel + `pip install -e .[dev]`) when it is missing.

PROFILE ?= full
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell cksum pyproject.toml | cut -d' ' -f1)
RUN := $(PY) -m langrepr.train
RENDER := $(PY) -m langrepr.tables $(if $(DRY),--dry)
# DRY=1: every table target runs its cells as dry runs at full size (conf/debug/dry.yaml: 2 steps, micro-batches of
# 2, outputs/dry/...) and renders <table>.dry.md; every cell marked dry, never a result
override ARGS += $(if $(DRY),debug=dry)
# PACK=N: N cells of a sweep at once on this machine (one GPU shared), each its own process, lock and record, through
# hydra-joblib-launcher (conf/hydra/launcher/joblib.yaml); a failed cell's line and exit 2 reach this console
override ARGS += $(if $(PACK),hydra/launcher=joblib hydra.launcher.n_jobs=$(PACK))

.DEFAULT_GOAL := help
.PHONY: help install test test-all lint smoke bench tables clean \
	ewe-table1 ewe-table2 ewe-table3 ewe-table4 ewe-table5 \
	tensorcoder-table1 tensorcoder-table2 tensorcoder-table3 \
	multihot-table1 multihot-table2 multihot-table4

help: ## list the targets
	@grep -hE '^[a-zA-Z0-9_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  \033[1m%-22s\033[0m %s\n", $$1, $$2}'
	@echo "  PROFILE=quick|full (default full = the paper's settings); DRY=1: a dry run of every cell at full size; PACK=N: N cells at once"

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[dev]'
	rm -f $(VENV)/.installed-* && touch $@

install: $(STAMP) ## create .venv and install langrepr with its dev tools

TEST_WORKERS ?= 2
test: $(STAMP) ## the test suite (CPU, offline; slow/gpu/network tests excluded; TEST_WORKERS=2 processes, 0 = one)
	$(PY) -m pytest -m "not slow and not gpu and not network" -q -n $(TEST_WORKERS) $(if $(filter-out 0,$(TEST_WORKERS)),--dist worksteal) \
	  --durations=30
# --durations: the 30 slowest tests close the log, where the suite's time (15 min on 2 cores is its budget) goes
# one intra-op thread per test process on shared cores (two workers with two torch threads each ran 5% slower here)
test: export OMP_NUM_THREADS ?= 1

test-all: $(STAMP) ## every test, slow ones included
	$(PY) -m pytest -q -n $(TEST_WORKERS)

lint: $(STAMP) ## ruff
	$(PY) -m ruff check src tests scripts

smoke: $(STAMP) ## one tiny end-to-end training run on synthetic patents (CPU, seconds)
	$(RUN) dataset=synthetic model=bert_ewe debug=smoke

bench: $(STAMP) ## benchmarks: ratios (median and spread over interleaved rounds) written to outputs/bench/
	$(PY) scripts/bench_ewe.py
	$(PY) scripts/bench_train_loop.py
	$(PY) scripts/bench_loader_wait.py
	$(PY) scripts/bench_tensorcoder.py
	$(PY) scripts/bench_leam.py
	$(PY) scripts/bench_multihot.py
	$(PY) scripts/bench_bit_cipher.py
	$(PY) scripts/bench_compile.py
	$(PY) scripts/bench_bf16.py

tables: $(STAMP) ## render every table from the runs already in outputs/ (no training)
	$(RENDER) all --profile $(PROFILE)
	$(PY) -m langrepr.grid --profile $(PROFILE)

.PHONY: report quick-all
report: $(STAMP) ## one results page from what has run: outputs/report/report.{md,html} (tables, curves, bench plots)
	$(PY) -m langrepr.report
quick-all: $(STAMP) ## every quick table, each one's wall time measured: outputs/quick/wall_times.json (TARGETS="a b" for a subset)
	$(PY) scripts/quick_all.py $(if $(TARGETS),--targets $(TARGETS))
plan: $(STAMP) ## cost plan per table: outputs/plan/<table>.md (GPU=h200 another GPU class, PACK=N cells per GPU)
	$(PY) -m langrepr.plan --profile $(PROFILE) $(if $(TABLE),--table $(TABLE)) $(if $(GPU),--gpu $(GPU)) $(if $(PACK),--pack $(PACK))

# one target per paper table: run the experiment's cells (finished cells are skipped), then render;
# ARGS adds Hydra overrides, e.g. ARGS="trainer=ddp trainer.devices=4" or ARGS="hydra/launcher=submitit_slurm"
define TABLE_RULE
$(1): $$(STAMP)
	$$(RUN) -m experiment=$(2) profile=$$(PROFILE) ckpt_path=auto $$(ARGS)
	$$(RENDER) $(2) --profile $$(PROFILE)
endef

ewe-table1: ## EWE Table 1: parameter counts of the six models (no data, no GPU, < 1 min)
ewe-table2: ## EWE Table 2: label statistics, raw vs First/Later relabeled
ewe-table3: ## EWE Table 3: six models, micro F1/P/R on 2015A/2015B
ewe-table4: ## EWE Table 4: BERT_EWE with / without focus embeddings
ewe-table5: ## EWE Table 5: BERT_EWE raw bytes / gradient v-gram / whitespace materials
tensorcoder-table1: ## TensorCoder Table 1: masked-LM valid loss + attention GFLOPs
tensorcoder-table2: ## TensorCoder Table 2: WMT16 En-De BLEU + FLOPs
tensorcoder-table3: ## TensorCoder Table 3: IWSLT16 En-De BLEU + FLOPs
$(foreach n,1 2 3,$(eval $(call TABLE_RULE,ewe-table$(n),ewe_table$(n))))
# Tables 4 and 5 read Table 3's cells (BERT_EWE is their focus / whitespace row; the reference rows; CANINE_ORIG
# for "raw bytes ≈ CANINE_ORIG"): a target runs the cells it renders (finished cells are skipped)
EWE_T3_READ = $(RUN) -m experiment=ewe_table3 profile=$(PROFILE) ckpt_path=auto \
	model=bert_ewe,canine_orig,patent_label_prior,patent_tfidf_probe,leam_patents $(ARGS)
ewe-table4 ewe-table5: $(STAMP)
	$(EWE_T3_READ)
	$(RUN) -m experiment=$(subst -,_,$@) profile=$(PROFILE) ckpt_path=auto $(ARGS)
	$(RENDER) $(subst -,_,$@) --profile $(PROFILE)
# TensorCoder's FLOPs claims are judged at the paper's own N and width (issue 35): count cells of each table's
# networks at conf/papers/tensorcoder/paper_size/<size>.yaml (no data, no training, seconds), under run_id
# tensorcoder_paper_size; each table target runs its own (finished cells are skipped)
TC_COUNT = $(RUN) -m profile=$(PROFILE) seed=1
TC_MLM = transformer_1head,tensorcoder_1conv,tensorized,transformer_8head,tensorcoder_8conv
TC_NMT = transformer_1head_nmt,tensorcoder_1conv_nmt,transformer_8head_nmt,tensorcoder_8conv_nmt
TC_COUNT_tensorcoder_table1 = $(TC_COUNT) experiment=tensorcoder_table1 +paper_size=ptb dataset=ptb model=$(TC_MLM) $(ARGS) \
	&& $(TC_COUNT) experiment=tensorcoder_table1 +paper_size=wikitext103 dataset=wikitext103 model=$(TC_MLM) $(ARGS)
TC_COUNT_tensorcoder_table2 = $(TC_COUNT) experiment=tensorcoder_table2 +paper_size=wmt16 dataset=wmt16 model=tensorized_nmt,$(TC_NMT) $(ARGS)
TC_COUNT_tensorcoder_table3 = $(TC_COUNT) experiment=tensorcoder_table3 +paper_size=iwslt16 dataset=iwslt16 model=$(TC_NMT) $(ARGS)
define TC_TABLE_RULE
$(1): $$(STAMP)
	$$(TC_COUNT_$(2))
	$$(RUN) -m experiment=$(2) profile=$$(PROFILE) ckpt_path=auto $$(ARGS)
	$$(RENDER) $(2) --profile $$(PROFILE)
endef
$(foreach n,1 2 3,$(eval $(call TC_TABLE_RULE,tensorcoder-table$(n),tensorcoder_table$(n))))
.PHONY: tensorcoder-paper-size
tensorcoder-paper-size: $(STAMP) ## TensorCoder: attention GFLOPs at the paper's N and width, every table's networks (count cells, seconds)
	$(TC_COUNT_tensorcoder_table1)
	$(TC_COUNT_tensorcoder_table2)
	$(TC_COUNT_tensorcoder_table3)
# quick TensorCoder cells on shared CPUs: one intra-op thread (2 threads under contention: a translation step 9.2 s vs 0.72 s)
ifeq ($(PROFILE),quick)
tensorcoder-table1 tensorcoder-table2 tensorcoder-table3: export OMP_NUM_THREADS ?= 1
endif

.PHONY: leam-table2 leam-table3 leam-table4 leam-table5 leam-figure2b
leam-table2: ## LEAM Table 2: test accuracy of LEAM + baselines (quick: AG News only, local test-split cut)
leam-table3: ## LEAM Table 3 / Fig. 2c: LEAM accuracy against the window 2r+1
leam-table4: ## LEAM Table 4: parameters and time per 1,000 training iterations, ratios to LEAM
leam-table5: ## LEAM Table 5: MIMIC-III 50 codes multi-label (quick: synthetic-patents stand-in)
$(foreach n,2 3 4 5,$(eval $(call TABLE_RULE,leam-table$(n),leam_table$(n))))
# Fig. 2(b)'s 100% column is Table 2's cells: the target runs that subset first (finished cells are skipped)
leam-figure2b: $(STAMP) ## LEAM Fig. 2(b): accuracy against the share of labelled data (quick: AG News, the plot's fractions)
	$(RUN) -m experiment=leam_table2 profile=$(PROFILE) ckpt_path=auto model=majority_class,swem_avg,kim_cnn,leam,leam_glove $(ARGS)
	$(RUN) -m experiment=leam_figure2b profile=$(PROFILE) ckpt_path=auto $(ARGS)
	$(RENDER) leam_figure2b --profile $(PROFILE)
.PHONY: leam-nsmc
leam-nsmc: ## LEAM beyond its paper: accuracy on NSMC (Korean sentiment; quick: the multi-hot NSMC-style split)
$(eval $(call TABLE_RULE,leam-nsmc,leam_nsmc))
# quick LEAM cells on shared CPUs: one intra-op thread (2 threads under contention measured 6x slower per step)
ifeq ($(PROFILE),quick)
leam-table2 leam-table3 leam-table4 leam-table5 leam-nsmc leam-figure2b: export OMP_NUM_THREADS ?= 1
endif
.PHONY: leam-figures
leam-figures: $(STAMP) ## LEAM Figs. 2a, 2b, 2c, 3 (PNG) and 4 (HTML) into outputs/figures/ from the quick Table 2/3 runs (ARGS="--profile full")
	$(PY) scripts/leam_figures.py $(ARGS)
multihot-table1: ## Multi-hot LM Table 1: token-list sizes (kiwipiepy analysis, cached; needs LANGREPR_DATA_DIR for quick)
multihot-table2: ## Multi-hot LM Table 2: the three MLM losses (small model, BPE + syllable list)
multihot-table4: ## Multi-hot LM Table 4: KorQuAD answers divided / not divided by each token list
$(eval $(call TABLE_RULE,multihot-table1,multihot_table1))
# Multi-hot fine-tuning cells find their pretraining cell by config in multihot_pretrain's sweep: a target that
# renders fine-tuning cells runs the pretraining cells they start from first (finished cells are skipped)
MULTIHOT_PRETRAIN = $(RUN) -m experiment=multihot_pretrain profile=$(PROFILE) ckpt_path=auto
.PHONY: multihot-pretrain
multihot-pretrain: $(STAMP)
	$(MULTIHOT_PRETRAIN) $(ARGS)
	$(RENDER) multihot_pretrain --profile $(PROFILE)
# Table 2 quick: its cells are the pretraining; full: each fine-tunes on KorQuAD the small model pretrained with its loss
multihot-table2: $(STAMP)
ifeq ($(PROFILE),full)
	$(MULTIHOT_PRETRAIN) mlm.loss=sce,bce,mhsce pipeline.token_list=bpe_syllable model=multihot_small $(ARGS)
endif
	$(RUN) -m experiment=multihot_table2 profile=$(PROFILE) ckpt_path=auto $(ARGS)
	$(RENDER) multihot_table2 --profile $(PROFILE)
# Table 4's fine-tuned EM columns are Table 3's small-model KorQuAD cells: run that subset too (finished cells skipped)
multihot-table4: $(STAMP)
	$(MULTIHOT_PRETRAIN) model=multihot_small $(ARGS)
	$(RUN) -m experiment=multihot_table3 profile=$(PROFILE) downstream=korquad model=multihot_small ckpt_path=auto $(ARGS)
	$(RUN) -m experiment=multihot_table4 profile=$(PROFILE) ckpt_path=auto $(ARGS)
	$(RENDER) multihot_table4 --profile $(PROFILE)
.PHONY: multihot-table3 multihot-table5
multihot-table3: $(STAMP) ## Multi-hot LM Table 3: KorQuAD / NER / SRL / NSMC by token list and size (quick: KLUE-NER stand-in, NSMC-style split)
	$(MULTIHOT_PRETRAIN) $(ARGS)
	$(RUN) -m experiment=multihot_table3 profile=$(PROFILE) ckpt_path=auto $(ARGS)
	$(RENDER) multihot_table3 --profile $(PROFILE)
# Table 5's cells are Table 3's small-model NER cells (same config): run that subset (finished cells skipped), render
multihot-table5: $(STAMP) ## Multi-hot LM Table 5: NER F1 for PER / LOC / ORG, small models
	$(MULTIHOT_PRETRAIN) model=multihot_small $(ARGS)
	$(RUN) -m experiment=multihot_table3 profile=$(PROFILE) downstream=ner model=multihot_small ckpt_path=auto $(ARGS)
	$(RENDER) multihot_table5 --profile $(PROFILE)
ifeq ($(PROFILE),quick)
multihot-pretrain multihot-table3 multihot-table5: export OMP_NUM_THREADS ?= 1
endif
.PHONY: bitcipher-table1 bitcipher-table2 bitcipher-table3 bitcipher-table4 bitcipher-table5 bitcipher-table6
# Bit Cipher tables share cells: references and the cipher row live in Table 1's sweep, the Sum/Cat centre
# (r = 4, largest data: Sum b = 200 in Table 3's, Cat b = 100 in Table 5's); a target runs every sweep it reads
# (finished cells are skipped)
BITCIPHER_RUN = $(RUN) -m profile=$(PROFILE) ckpt_path=auto
comma := ,
# Table 1's sweep also holds random vectors of every other dimension the bits tables build (quick 50-100, full
# 50-1600): the same-dimension floor of each row of Tables 3 and 5
BITCIPHER_RANDOM_DIMS = $(if $(filter quick,$(PROFILE)),50$(comma)100,50$(comma)100$(comma)400$(comma)800$(comma)1600)
BITCIPHER_REFS = $(BITCIPHER_RUN) experiment=bitcipher_table1 $(ARGS) \
	&& $(BITCIPHER_RUN) experiment=bitcipher_table1 bitcipher_vectors=random bitcipher_vectors.dim=$(BITCIPHER_RANDOM_DIMS) $(ARGS)
BITCIPHER_CENTRE = $(BITCIPHER_RUN) experiment=bitcipher_table3 bitcipher_vectors=sum bitcipher_vectors.bits=200 $(ARGS) \
	&& $(BITCIPHER_RUN) experiment=bitcipher_table5 bitcipher_vectors.bits=100 $(ARGS)
BITCIPHER_BITS = $(BITCIPHER_RUN) experiment=bitcipher_table3 $(ARGS) && $(BITCIPHER_RUN) experiment=bitcipher_table5 $(ARGS)
bitcipher-table1: $(STAMP) ## Bit Cipher Table 1: cipher / Sum / Cat vs word2vec, POS (GUM) + NER (CoNLL-2003) probes
	$(BITCIPHER_REFS)
	$(BITCIPHER_CENTRE)
	$(RENDER) bitcipher_table1 --profile $(PROFILE)
bitcipher-table2: $(STAMP) ## Bit Cipher Table 2: Sum and Cat across data size
	$(BITCIPHER_REFS)
	$(BITCIPHER_CENTRE)
	$(BITCIPHER_RUN) experiment=bitcipher_table2 $(ARGS)
	$(RENDER) bitcipher_table2 --profile $(PROFILE)
bitcipher-table4: $(STAMP) ## Bit Cipher Table 4: Sum and Cat across radius
	$(BITCIPHER_REFS)
	$(BITCIPHER_CENTRE)
	$(BITCIPHER_RUN) experiment=bitcipher_table4 $(ARGS)
	$(RENDER) bitcipher_table4 --profile $(PROFILE)
bitcipher-table3: $(STAMP) ## Bit Cipher Table 3: Sum (and Cat) across bits
	$(BITCIPHER_REFS)
	$(BITCIPHER_BITS)
	$(RENDER) bitcipher_table3 --profile $(PROFILE)
bitcipher-table5: $(STAMP) ## Bit Cipher Table 5 [inferred reading]: Cat vs same-dimension Sum across bits
	$(BITCIPHER_REFS)
	$(BITCIPHER_BITS)
	$(RENDER) bitcipher_table5 --profile $(PROFILE)
bitcipher-table6: $(STAMP) ## Bit Cipher Tables 6-7: cipher-only across data size, POS + NER probes
	$(BITCIPHER_REFS)
	$(BITCIPHER_RUN) experiment=bitcipher_table6 $(ARGS)
	$(RENDER) bitcipher_table6 --profile $(PROFILE)
ifeq ($(PROFILE),quick)
bitcipher-table1 bitcipher-table2 bitcipher-table3 bitcipher-table4 bitcipher-table5 bitcipher-table6: export OMP_NUM_THREADS ?= 1
endif
.PHONY: bitcipher-figure4
bitcipher-figure4: $(STAMP) ## Bit Cipher Figure 4: LM perplexity, cipher warm start vs cold (quick: PTB); table + PNG in outputs/figures/
	$(RUN) -m experiment=bitcipher_figure4 profile=$(PROFILE) $(if $(filter quick,$(PROFILE)),dataset=ptb_causal) ckpt_path=auto $(ARGS)
	$(RENDER) bitcipher_figure4 --profile $(PROFILE)
	$(PY) scripts/bitcipher_figure4.py --profile $(PROFILE)
ifeq ($(PROFILE),quick)
bitcipher-figure4: export OMP_NUM_THREADS ?= 1
endif

# The grid (issue 24, beyond the papers): the five papers' inputs x encoders over tasks. Per encoder (cheapest first,
# so a partial run has every task for them): one sweep over patents + AG News, one over NSMC (multi-hot groups
# compose with Korean text only); then the reference rows (deterministic: one seed) and the render
# (outputs/tables/grid.<profile>.{md,json}, outputs/figures/grid.<profile>.png). GRID_SEEDS=1 runs one seed.
GRID_RUN = $(RUN) -m experiment=grid profile=$(PROFILE) ckpt_path=auto
GRID_INPUTS = wordpiece,ewe,bytes,words,bitcipher_sum,word2vec
GRID_ENCODERS = swem leam tensorcoder bert
GRID_TAGGERS = tensorcoder bert     # the encoders that keep one state per position: the only ones on CoNLL-2003 NER
GRID_PATENTS = $(if $(filter quick,$(PROFILE)),synthetic,uspto)
GRID_SEEDS ?=
GRID_OUTPUTS ?= outputs
GRID_SEED = $(if $(GRID_SEEDS),seed=$(GRID_SEEDS))
.PHONY: grid
grid: $(STAMP) ## The grid (beyond the papers): inputs x encoders over patents / AG News / NSMC / CoNLL-2003 NER, floor + comparator rows, heat map
	$(GRID_RUN) grid_task=$(GRID_PATENTS) input=none encoder=none model=patent_label_prior,patent_tfidf_probe seed=1 $(ARGS)
	$(GRID_RUN) grid_task=ag_news,nsmc_text input=none encoder=none model=majority_class,bow_lr seed=1 $(ARGS)
	$(GRID_RUN) grid_task=conll2003 input=none encoder=none model=majority_tagger,token_lr seed=1 $(ARGS)
	set -e; for enc in $(GRID_ENCODERS); do $(GRID_RUN) encoder=$$enc grid_task=$(GRID_PATENTS),ag_news input=$(GRID_INPUTS) $(GRID_SEED) $(ARGS); $(GRID_RUN) encoder=$$enc grid_task=nsmc_text input=$(GRID_INPUTS),multihot $(GRID_SEED) $(ARGS); done
	set -e; for enc in $(filter $(GRID_TAGGERS),$(GRID_ENCODERS)); do $(GRID_RUN) encoder=$$enc grid_task=conll2003 input=$(GRID_INPUTS) $(GRID_SEED) $(ARGS); done
	$(PY) -m langrepr.grid --profile $(PROFILE) --outputs $(GRID_OUTPUTS)
ifeq ($(PROFILE),quick)
grid: export OMP_NUM_THREADS ?= 1
endif

# a mistyped target (make ewe-table9) is one line naming it, not make's "No rule to make target"
.DEFAULT:
	$(error unknown target '$@': run `make help` to list the targets)

clean: ## remove smoke outputs and caches (keeps finished runs and rendered tables)
	rm -rf outputs/smoke outputs/cache .pytest_cache .ruff_cache
