# GPT-2 trainer for length-extrapolation research. The positional encoding is a
# compile-time switch:  make train_gpt2 PE=cable && ./train_gpt2
#
#   make train_gpt2 PE=<name>     CPU trainer (./train_gpt2)
#   make train_gpt2cu PE=<name>   CUDA trainer (./train_gpt2cu)
#   make test                     every test that runs without a GPU (what CI runs)
#   make test_gpt2cu PE=<name>    GPU-vs-CPU test binary (run it on a machine with a GPU)
#   make starter                  the built-in dataset (data/starter/)
#
# DAPE is a second switch on top of the bases nope, rope, alibi, kerple and fire
# (llmc/dape.h):  make train_gpt2 PE=kerple DAPE=1x3   (DAPE=mlp, 1x3, 1x5, 1x7; none
# by default), hidden width DAPE_D (default 32), DAPE_EDGE_EXACT=0 for rows independent
# of the sequence's end.
#
# Per-encoding binaries are built under build/ (build/train_gpt2_<pe>, with DAPE
# build/train_gpt2_<pe>_dape<variant>[_d<D>][_edge0]); the top-level binaries are copies
# of the one named by PE and DAPE. Options: NO_BLAS=1 (plain loops), NO_MPI=1, NO_OPENMP=1.

PE ?= learned
PE_LIST := learned sinusoidal rope nope alibi t5 kerple fire cable cable_nw cable_v1 kcable
ifeq ($(filter $(PE),$(PE_LIST)),)
$(error unknown PE '$(PE)'; valid names: $(PE_LIST))
endif
pe_flag = -DPE_$(shell echo $(1) | tr a-z A-Z)

# DAPE: the variant, its width and edge rule make the binary's name (the "stem" after
# train_gpt2_), and the stem makes the flags: kerple_dape1x3_d64_edge0 ->
# -DPE_KERPLE -DDAPE_KERNEL=3 -DDAPE_WIDTH=64 -DDAPE_EDGE_EXACT=0
DAPE ?=
DAPE_D ?= 32
DAPE_EDGE_EXACT ?= 1
DAPE_LIST := mlp 1x3 1x5 1x7
DAPE_BASES := nope rope alibi kerple fire
ifneq ($(DAPE),)
  ifeq ($(filter $(DAPE),$(DAPE_LIST)),)
    $(error unknown DAPE '$(DAPE)'; valid: $(DAPE_LIST))
  endif
  ifeq ($(filter $(PE),$(DAPE_BASES)),)
    $(error DAPE runs on the bases $(DAPE_BASES), not PE=$(PE))
  endif
  ifeq ($(shell echo '$(DAPE_D)' | grep -Ex '[1-9][0-9]{0,3}'),)
    $(error DAPE_D must be a width from 1 to 1024, not '$(DAPE_D)')
  endif
  ifeq ($(filter $(DAPE_EDGE_EXACT),0 1),)
    $(error DAPE_EDGE_EXACT must be 0 or 1)
  endif
endif
STEM := $(PE)$(if $(DAPE),_dape$(DAPE)$(if $(filter-out 32,$(DAPE_D)),_d$(DAPE_D))$(if $(filter 0,$(DAPE_EDGE_EXACT)),_edge0))
stem_words = $(subst _, ,$(1))
stem_dape = $(patsubst dape%,%,$(filter dape%,$(call stem_words,$(1))))
stem_pe = $(if $(call stem_dape,$(1)),$(firstword $(call stem_words,$(1))),$(1))
dape_kernel = $(if $(filter mlp,$(1)),1,$(patsubst 1x%,%,$(1)))
dape_flags = $(if $(call stem_dape,$(1)),-DDAPE_KERNEL=$(call dape_kernel,$(call stem_dape,$(1))) \
  $(patsubst d%,-DDAPE_WIDTH=%,$(filter-out dape%,$(filter d%,$(call stem_words,$(1))))) \
  $(if $(filter edge0,$(call stem_words,$(1))),-DDAPE_EDGE_EXACT=0))
stem_flags = $(call pe_flag,$(call stem_pe,$(1))) $(call dape_flags,$(1))

CC := gcc
CFLAGS := -O3 -march=native -std=gnu11 -Wall -Wextra -Wno-unused-function -fopenmp
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

HEADERS := $(wildcard llmc/*.h) Makefile
BUILD := build

.PHONY: all train_gpt2 test_gpt2 test clean test-cpu test-builds test-scripts test-fuzz test-experiment
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

train_gpt2: $(BUILD)/train_gpt2_$(STEM) | starter gpt2_tokenizer.bin
	cp $< $@

test_gpt2: $(BUILD)/test_gpt2_$(STEM)
	cp $< $@

# ---------------------------------------------------------------------------
# tests (no GPU needed)

test-builds: $(foreach pe,$(PE_LIST),$(BUILD)/train_gpt2_$(pe) $(BUILD)/test_gpt2_$(pe) $(BUILD)/gradcheck_$(pe))

test-cpu: test-builds
	@for pe in $(PE_LIST); do \
	  echo "=== $$pe: tests (fp32) ==="; $(BUILD)/test_gpt2_$$pe || exit 1; \
	  echo "=== $$pe: gradient checks (fp64) ==="; $(BUILD)/gradcheck_$$pe gradcheck || exit 1; \
	done

# the trainer as a program: bad input, exact resume and crash safety, multi-process runs
SCRIPT_PES := learned cable
test-scripts: $(foreach pe,$(SCRIPT_PES),$(BUILD)/train_gpt2_$(pe) $(BUILD)/test_gpt2_$(pe)) starter
	@for pe in $(SCRIPT_PES); do \
	  bash tests/cli.sh $$pe && bash tests/health.sh $$pe && bash tests/resume.sh $$pe && bash tests/mpi.sh $$pe || exit 1; \
	done

# fuzzing the readers of untrusted files (clang's libFuzzer, AddressSanitizer, UBSan)
FUZZ_CFLAGS := -g -O1 -fsanitize=fuzzer,address,undefined -Idev/no_openmp -Wno-unknown-pragmas
FUZZ_HARNESSES := checkpoint shard tokenizer_bin bpe
FUZZ_SECONDS ?= 25
$(BUILD)/fuzz_%: dev/fuzz/fuzz.c train_gpt2.c data/tokenizer.c $(HEADERS) | $(BUILD)
	clang $(FUZZ_CFLAGS) -DFUZZ_$(shell echo $* | tr a-z A-Z) -DPE_CABLE -o $@ dev/fuzz/fuzz.c -lm -lpcre2-8 -pthread

test-fuzz: $(foreach h,$(FUZZ_HARNESSES),$(BUILD)/fuzz_$(h)) vocab
	bash dev/fuzz/run.sh $(FUZZ_SECONDS) $(FUZZ_HARNESSES)

# the extrapolation experiment in its quick form: every expected row, finite numbers
test-experiment: starter
	bash dev/extrapolation.sh --quick $(BUILD)/extrapolation_quick

# the CUDA path: every encoding's trainer and GPU-vs-CPU test compile (nvcc needed, no
# GPU); the tests run where a GPU is present and skip with a message where none is
test: test-cpu test-data test-scripts test-fuzz test-experiment test-cuda-run

clean:
	rm -rf $(BUILD) train_gpt2 test_gpt2 train_gpt2cu test_gpt2cu

include cuda.mk
-include data/data.mk
