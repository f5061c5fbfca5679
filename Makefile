# GPT-2 trainer for length-extrapolation research. The positional encoding is a
# compile-time switch (default cable; PE=learned is llm.c's model):  make train_gpt2 && ./train_gpt2
#
#   make train_gpt2 PE=<name>     CPU trainer (./train_gpt2)
#   make train_gpt2cu PE=<name>   CUDA trainer (./train_gpt2cu)
#   make test                     every test that runs without a GPU (what CI runs)
#   make test_gpt2cu PE=<name>    GPU-vs-CPU test binary (run it on a machine with a GPU)
#   make starter                  the built-in dataset (data/starter/)
#
# DAPE is a second switch on top of the bases nope, rope, alibi, kerple and fire
# (pe/dape.h):  make train_gpt2 PE=kerple DAPE=1x3   (DAPE=mlp, 1x3, 1x5, 1x7; none
# by default), hidden width DAPE_D (default 32), DAPE_EDGE_EXACT=0 for rows independent
# of the sequence's end.
#
# Per-encoding binaries are built under build/ (build/train_gpt2_<pe>, with DAPE
# build/train_gpt2_<pe>_dape<variant>[_d<D>][_edge0]); the top-level binaries are copies
# of the one named by PE and DAPE. Options: NO_BLAS=1 (plain loops), NO_MPI=1, NO_OPENMP=1,
# MARCH (the CPU code's -march, default native).

# the default is CABLE, the method at the centre of this project; PE=learned is llm.c's model
PE ?= cable
open_paren := (
# the registry's names (llmc/pe_list.h: the lines X(id, NAME, name, file, kind, rp, dape, rev)),
# and the bases of DAPE among them (dape = 1)
pe_registry = $(shell sed -n 's/^ *X[$(open_paren)] *[0-9]*, *[A-Z0-9_]*, *\([a-z0-9_]*\), *[a-z0-9_]*, *[A-Z]*, *[01], *\([01]\),.*/\1 \2/p' llmc/pe_list.h)
PE_LIST := $(strip $(foreach e,$(pe_registry),$(if $(filter-out 0 1,$(e)),$(e))))
ifeq ($(PE_LIST),)
$(error no encodings read from llmc/pe_list.h)
endif
# the encodings that take randomized positions (rp = 1)
PE_RP_LIST := $(shell sed -n 's/^ *X[$(open_paren)] *[0-9]*, *[A-Z0-9_]*, *\([a-z0-9_]*\), *[a-z0-9_]*, *[A-Z]*, *1,.*/\1/p' llmc/pe_list.h)
pe_flag = -DPE_$(shell echo $(1) | tr a-z A-Z)

include dape.mk

CC := gcc
MARCH ?= native
# -fno-math-errno: libm calls need not set errno (never read), so that loops with sqrt vectorize
CFLAGS := -O3 -march=$(MARCH) -fno-math-errno -std=gnu11 -Wall -Wextra -Wno-unused-function -Wno-unused-parameter -fopenmp
LDLIBS := -lm
ifeq ($(NO_OPENMP),1)
  CFLAGS := $(filter-out -fopenmp,$(CFLAGS)) -Wno-unknown-pragmas -Idev/no_openmp
endif

# OpenBLAS for the matmuls, unless NO_BLAS=1. Debian's OpenMP build of OpenBLAS
# (libopenblas-openmp-dev) runs on the trainer's own OpenMP threads; the default pthread
# build brings a second pool of threads that fights OpenMP's for the cores (measured:
# 1.6 s against 2.5 s a step for GPT-2 124M at B=4, T=64 on 2 cores).
OPENBLAS_OMP := /usr/lib/x86_64-linux-gnu/openblas-openmp
ifneq ($(NO_BLAS),1)
  ifneq ($(wildcard $(OPENBLAS_OMP)/libopenblas.so),)
    CFLAGS += -DUSE_BLAS -I/usr/include/x86_64-linux-gnu/openblas-openmp
    LDLIBS += -L$(OPENBLAS_OMP) -Wl,-rpath,$(OPENBLAS_OMP) -lopenblas
  else ifneq ($(wildcard /usr/include/x86_64-linux-gnu/cblas.h /usr/include/cblas.h /usr/include/openblas/cblas.h),)
    $(info using the pthread build of OpenBLAS; apt-get install libopenblas-openmp-dev is faster)
    CFLAGS += -DUSE_BLAS $(shell pkg-config --cflags openblas 2>/dev/null)
    LDLIBS += -lopenblas
  else
    $(info OpenBLAS not found: building the plain-loop matmuls (apt-get install libopenblas-openmp-dev))
  endif
endif

# MPI for multi-process training (Debian: libopenmpi-dev openmpi-bin), unless NO_MPI=1
MPICC := $(shell command -v mpicc 2>/dev/null)
ifneq ($(NO_MPI),1)
  ifneq ($(MPICC),)
    CC := $(MPICC)
    CFLAGS += -DUSE_MPI
  endif
endif

HEADERS := $(wildcard llmc/*.h pe/*.h) Makefile dape.mk
BUILD := build

.PHONY: all train_gpt2 test_gpt2 test clean pe-list pe-rp-list test-registry test-cpu test-checkpoints record-fixture test-builds test-scripts test-fuzz test-experiment \
        test-python test-dape test-dape-builds test-evals test-sanitize test-tasks
all: train_gpt2

$(BUILD):
	mkdir -p $(BUILD)

# ---------------------------------------------------------------------------
# CPU trainer and tests, one binary per encoding

$(BUILD)/train_gpt2_%: train_gpt2.c $(HEADERS) | $(BUILD)
	$(CC) $(CFLAGS) $(call stem_flags,$*) -o $@ train_gpt2.c $(LDLIBS)

$(BUILD)/test_gpt2_%: test_gpt2.c train_gpt2.c $(HEADERS) | $(BUILD)
	$(CC) $(CFLAGS) $(call stem_flags,$*) -o $@ test_gpt2.c $(LDLIBS)

# the same tests in double precision: the finite-difference gradient checks run here
$(BUILD)/gradcheck_%: test_gpt2.c train_gpt2.c $(HEADERS) | $(BUILD)
	$(CC) $(CFLAGS) $(call stem_flags,$*) -DREAL_DOUBLE -o $@ test_gpt2.c $(LDLIBS)

train_gpt2: $(BUILD)/train_gpt2_$(STEM) | starter gpt2_tokenizer.bin gpt2_passkey.bin
	cp $< $@

test_gpt2: $(BUILD)/test_gpt2_$(STEM)
	cp $< $@

# ---------------------------------------------------------------------------
# tests (no GPU needed)

test-builds: $(foreach pe,$(PE_LIST),$(BUILD)/train_gpt2_$(pe) $(BUILD)/test_gpt2_$(pe) $(BUILD)/gradcheck_$(pe))

# the CPU tests (fp32), the algorithmic tasks' scoring against greedy decoding and the
# gradient checks (fp64) of the binaries of the stems $(1)
cpu_tests = for s in $(1); do \
	  echo "=== $$s: tests (fp32) ==="; $(BUILD)/test_gpt2_$$s || exit 1; \
	  echo "=== $$s: -A against greedy decoding ==="; $(BUILD)/test_gpt2_$$s tasks || exit 1; \
	  echo "=== $$s: gradient checks (fp64) ==="; $(BUILD)/gradcheck_$$s gradcheck || exit 1; \
	done

test-cpu: test-builds gpt2_tokenizer.bin
	@$(call cpu_tests,$(PE_LIST))

# DAPE (pe/dape.h): every variant and every base at least once, the CPU tests and the
# fp64 gradient checks (with both edge rules); the CUDA trainer (bf16) and GPU test (fp32)
# compile for two of them and run where a GPU is present; the CUDA path of each runs in the
# CPU emulation against the CPU path (cuda.mk: test-cuda-emulate)
DAPE_TESTS := kerple_dapemlp kerple_dape1x3 kerple_dape1x5 kerple_dape1x7 nope_dape1x3 rope_dape1x3 alibi_dape1x3 fire_dape1x3
# the stems that take positions (given or drawn): the encodings of PE_RP_LIST, and DAPE on them
POS_STEMS := $(PE_RP_LIST) $(foreach s,$(DAPE_TESTS),$(if $(filter $(firstword $(subst _dape, ,$(s))),$(PE_RP_LIST)),$(s)))
DAPE_CUDA_TESTS := kerple_dape1x3 nope_dapemlp
test-dape-builds: $(foreach s,$(DAPE_TESTS),$(BUILD)/train_gpt2_$(s) $(BUILD)/test_gpt2_$(s) $(BUILD)/gradcheck_$(s)) \
                  $(foreach s,$(DAPE_CUDA_TESTS),$(BUILD)/train_gpt2cu_$(s) $(BUILD)/test_gpt2cu_$(s)_fp32 $(BUILD)/test_gpt2_$(s))
test-dape: test-dape-builds
	@$(call cpu_tests,$(DAPE_TESTS))
	@$(call gpu_vs_cpu,$(DAPE_CUDA_TESTS))

# the trainer as a program: bad input, exact resume and crash safety, multi-process runs (the
# resume of a run with every evaluation flag needs the tokenizer and the passkey texts); rope's
# frequency table (-rb, -rt, -rr): its flags, fine-tuning, resume and evaluation (tests/rope_table.sh)
SCRIPT_PES := learned cable
test-scripts: $(foreach pe,$(SCRIPT_PES),$(BUILD)/train_gpt2_$(pe) $(BUILD)/test_gpt2_$(pe)) $(BUILD)/train_gpt2_rope \
              starter tokenizer gpt2_passkey.bin
	@for pe in $(SCRIPT_PES); do \
	  bash tests/cli.sh $$pe && bash tests/health.sh $$pe && bash tests/resume.sh $$pe && bash tests/mpi.sh $$pe || exit 1; \
	done
	@bash tests/rope_table.sh

# the evaluation suite (tests/evals.sh): HellaSwag's scoring and files, the passkey prompts,
# scoring and grid, a model trained on the passkey template that retrieves the key, the
# HellaSwag fixture through data/hellaswag.sh, test sets, last-N windows, the context-use gap,
# and the same evaluations by the CUDA trainer run on the CPU (cuda.mk: the emulation)
test-evals: $(foreach pe,learned cable,$(BUILD)/train_gpt2_$(pe) $(BUILD)/test_gpt2_$(pe) $(BUILD)/emulate/train_gpt2cu_$(pe)_fp32) \
            tokenizer gpt2_passkey.bin
	bash tests/evals.sh

# the algorithmic tasks and answer-only training (tests/tasks.sh): the masked loss's fp64
# gradient check, -A against greedy decoding with DAPE_1x3's other edge rule (every other
# build's runs with its CPU tests), data/tasks.c's files and baselines, masked shards in the
# trainer, the loss of a split batch, a tiny model trained on copy, the CUDA trainer in the
# CPU emulation
test-tasks: tasks starter $(foreach b,train_gpt2 test_gpt2 gradcheck,$(BUILD)/$(b)_learned) $(BUILD)/emulate/train_gpt2cu_learned_fp32 \
            $(BUILD)/test_gpt2_kerple_dape1x3_edge0
	$(BUILD)/gradcheck_learned gradcheck masked
	$(BUILD)/test_gpt2_kerple_dape1x3_edge0 tasks
	bash tests/tasks.sh

# fuzzing the readers of untrusted files (clang's libFuzzer, AddressSanitizer, UBSan)
FUZZ_CFLAGS := -g -O1 -fsanitize=fuzzer,address,undefined -Idev/no_openmp -Wno-unknown-pragmas
FUZZ_HARNESSES := checkpoint shard tokenizer_bin bpe
FUZZ_SECONDS ?= 25
$(BUILD)/fuzz_%: dev/fuzz/fuzz.c train_gpt2.c data/tokenizer.c $(HEADERS) | $(BUILD)
	clang $(FUZZ_CFLAGS) -DFUZZ_$(shell echo $* | tr a-z A-Z) -DPE_CABLE -o $@ dev/fuzz/fuzz.c -lm -lpcre2-8 -pthread

test-fuzz: $(foreach h,$(FUZZ_HARNESSES),$(BUILD)/fuzz_$(h)) vocab
	bash dev/fuzz/run.sh $(FUZZ_SECONDS) $(FUZZ_HARNESSES)

# the checkpoints of tests/checkpoints/ give the numbers recorded when they were written, bit
# for bit (tests/checkpoints.sh): tests/checkpoint_loss.c for every stem, without OpenBLAS and
# for x86-64-v3, so that every machine computes the same bits
CHECKPOINT_STEMS := $(PE_LIST) $(DAPE_TESTS)
$(BUILD)/checkpoint_loss_%: tests/checkpoint_loss.c train_gpt2.c $(HEADERS) | $(BUILD)
	gcc -O3 -march=x86-64-v3 -fno-math-errno -std=gnu11 -Wall -Wno-unused-function -Wno-unused-parameter -fopenmp -I. $(call stem_flags,$*) -o $@ tests/checkpoint_loss.c -lm

test-checkpoints: $(foreach s,$(CHECKPOINT_STEMS),$(BUILD)/checkpoint_loss_$(s))
	bash tests/checkpoints.sh $(BUILD) check "$(CHECKPOINT_STEMS)" "$(POS_STEMS)"

# a new encoding's fixtures (make record-fixture PE=<name> [DAPE=<variant>]): written into
# tests/checkpoints/ and their numbers appended to losses.txt (a stem that has one is refused)
record-fixture: $(BUILD)/checkpoint_loss_$(STEM)
	bash tests/checkpoints.sh $(BUILD) record $(STEM)

# AddressSanitizer and UBSan on the CPU trainer (learned; plain loops, no OpenMP, no MPI),
# the tokenizer and ./tasks run as programs (tests/sanitize.sh): training, resume, every
# evaluation suite, the tokenizer's and ./tasks' commands; any report fails
SAN_CFLAGS := -g -O1 -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all -std=gnu11 -Wall -Wextra -Wno-unused-parameter \
              -Wno-unused-function
$(BUILD)/asan_train_gpt2_learned: train_gpt2.c $(HEADERS) | $(BUILD)
	clang $(SAN_CFLAGS) -Idev/no_openmp -Wno-unknown-pragmas -DPE_LEARNED -o $@ train_gpt2.c -lm
$(BUILD)/asan_tokenizer: data/tokenizer.c llmc/utils.h | $(BUILD)
	clang $(SAN_CFLAGS) -pthread -o $@ data/tokenizer.c -lpcre2-8
$(BUILD)/asan_tasks: data/tasks.c llmc/utils.h llmc/rand.h llmc/dataloader.h llmc/tasks.h | $(BUILD)
	clang $(SAN_CFLAGS) -o $@ data/tasks.c -lm
test-sanitize: $(BUILD)/asan_train_gpt2_learned $(BUILD)/asan_tokenizer $(BUILD)/asan_tasks $(BUILD)/test_gpt2_learned gpt2_tokenizer.bin gpt2_passkey.bin
	bash tests/sanitize.sh

# the extrapolation experiment in its quick form: every expected row, finite numbers
test-experiment: starter
	bash dev/extrapolation.sh --quick $(BUILD)/extrapolation_quick

# what must agree with the registry of encodings and cannot be generated from it
# (tests/registry.py): the encodings' files, python/model.py's names, the README's table
test-registry:
	@PY=python3; $$PY -c "import torch" 2> /dev/null || PY=/usr/bin/python3; $$PY tests/registry.py

# the PyTorch model (python/model.py) and the exporter against the fp64 C trainer, every
# encoding: logits, loss and every gradient (PyTorch: Debian's python3-torch, installed for
# /usr/bin/python3; without it the test says so in one line and passes)
test-python: $(foreach pe,$(PE_LIST),$(BUILD)/gradcheck_$(pe))
	@PY=python3; $$PY -c "import torch" 2> /dev/null || PY=/usr/bin/python3; $$PY python/test_model.py $(BUILD)

# the CUDA path: every encoding's trainer and GPU-vs-CPU test compile (nvcc needed, no
# GPU); the tests run where a GPU is present and skip with a message where none is; the
# tensor-core attention of every encoding runs on the CPU in the emulation (cuda.mk). The
# builds of the longest lists come first, TEST_JOBS at a time (CI's 2 cores), then every
# test, one after another.
TEST_JOBS ?= 2
TESTS := test-registry test-cpu test-checkpoints test-data test-scripts test-evals test-sanitize test-fuzz test-experiment test-python \
         test-cuda-flags test-cuda-run test-cuda-resources test-cuda-emulate test-dape test-tasks test-gpu-lease
test:
	$(MAKE) -j$(TEST_JOBS) test-builds test-dape-builds test-cuda-builds test-cuda-emulate-builds $(foreach s,$(CHECKPOINT_STEMS),$(BUILD)/checkpoint_loss_$(s))
	$(MAKE) $(TESTS)

# the encodings, one line (scripts take the list from here: dev/tasks.sh), and those that take
# randomized positions
pe-list:
	@echo $(PE_LIST)
pe-rp-list:
	@echo $(PE_RP_LIST)

clean:
	rm -rf $(BUILD) train_gpt2 test_gpt2 train_gpt2cu test_gpt2cu

include cuda.mk
include gpukit.mk
-include data/data.mk
