# CUDA trainer and its GPU tests; included by the Makefile (uses PE, PE_LIST, pe_flag,
# BUILD, HEADERS from there).
#
#   make train_gpt2cu PE=<name> [PRECISION=BF16|FP32]   CUDA trainer (./train_gpt2cu)
#   make test_gpt2cu PE=<name> [PRECISION=...]          GPU-vs-CPU test (./test_gpt2cu)
#   make test-cuda-builds    every encoding's trainer (bf16) and test (fp32) compile
#   make test-cuda-run       every encoding's GPU-vs-CPU test (skips without a GPU)
#   make test-cuda-flags     MPI's and NCCL's flags with fake MPI wrappers (make cuda-flags
#                            prints them)
#   make test-cuda-resources the attention kernels' registers and local memory (ptxas) held
#                            to a budget; dev/cuda/resources_table.sh writes the full table
#   make test-cuda-emulate   the tensor-core attention of every encoding on the CPU
#                            (dev/cuda/emulate), and mutants that must fail
#   make emulate PE=<name> [DAPE=<variant>]   the whole CUDA path on the CPU: test_gpt2cu's
#                            comparison with the CPU path in fp32 and bf16, the attention
#                            kernels (minutes)
#   make emulate-tiny PE=<name> [DAPE=<variant>]   the comparison alone, fp32, tiny model
#                            (VARIANT=rp for both: under a draw of randomized positions;
#                            VARIANT=mask: two thirds of the targets unscored, answer-only data)
#
# Binaries: build/train_gpt2cu_<pe> (bf16) and build/train_gpt2cu_<pe>_fp32, the same for
# test_gpt2cu (<pe>: the Makefile's stem, with DAPE e.g. kerple_dape1x3). bf16 builds use
# fast math; fp32 builds, which are compared tightly with the CPU path, do not. Options:
# CUDA_ARCH (default: sm_90 machine code for H100/H200 and compute_90 PTX for newer GPUs),
# NVCC (e.g. a CUDA 12 nvcc for a driver older than CUDA 13's), NO_MPI=1, MPICC, NCCL_DIRS.

NVCC ?= $(firstword $(shell command -v nvcc 2>/dev/null) $(wildcard /usr/local/cuda/bin/nvcc))
# the toolkit's root as nvcc itself reports it (nvcc on PATH may be a wrapper script elsewhere)
CUDA_HOME := $(if $(NVCC),$(abspath $(shell $(NVCC) --dryrun -x c++ -c /dev/null -o /dev/null 2>&1 | sed -n 's/^\#\$$ TOP=//p')))
PRECISION ?= BF16
ifeq ($(filter $(PRECISION),BF16 FP32),)
$(error unknown PRECISION '$(PRECISION)'; valid: BF16 FP32)
endif
CUDA_ARCH ?= -gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90
NVCC_FLAGS := -std=c++17 -O3 $(CUDA_ARCH) -Xcompiler -Wall,-Wextra,-Wno-unused-function,-Wno-unused-parameter
NVCC_LDLIBS := -lcublas -lcublasLt
CU_HEADERS := $(HEADERS) $(wildcard llmc/*.cuh)
CU_SUFFIX := $(if $(filter FP32,$(PRECISION)),_fp32,)

# the stem of a CUDA binary is <pe> (bf16) or <pe>_fp32
cu_pe = $(patsubst %_fp32,%,$(1))
# the dev program (dev/cuda/<program>.cu) that checks and times an encoding's attention
# kernels: attention_bias.cu, except for the encodings whose attention kernels are no bias of
# those kernels and have a check of their own (encoding:program). The emulation and the GPU
# kit both build from this (attention_bias.cu refuses to compile for these encodings)
ATTENTION_DEV_OWN := cope:attention_cope complex_order:attention_complex
attention_dev = $(or $(patsubst $(1):%,%,$(filter $(1):%,$(ATTENTION_DEV_OWN))),attention_bias)
cu_precision = $(if $(filter %_fp32,$(1)),-DENABLE_FP32,-DENABLE_BF16 --use_fast_math)

# multi-GPU: MPI (unless NO_MPI=1), its flags from the wrapper $(MPICC) through
# dev/cuda/mpi_flags.sh (OpenMPI's --showme, MPICH's -compile_info/-link_info; what nvcc does not
# take itself through -Xcompiler/-Xlinker); a wrapper that names no library: no MPI, and the
# build says so. NCCL on top of MPI where its header and its library are both found under one
# of NCCL_DIRS (default: the CUDA toolkit's and the system's).
NCCL_DIRS ?= $(CUDA_HOME) /usr
nccl_lib = $(firstword $(wildcard $(1)/lib64/libnccl.so $(1)/lib/libnccl.so $(1)/lib/*-linux-gnu/libnccl.so))
CU_MPI_FLAGS :=
CU_MPI_LIBS :=
CU_MPI_NOTE :=
ifneq ($(NO_MPI),1)
  ifneq ($(MPICC),)
    CU_MPI_LIBS := $(shell sh dev/cuda/mpi_flags.sh link $(MPICC))
    ifneq ($(CU_MPI_LIBS),)
      CU_MPI_FLAGS := -DUSE_MPI -DOMPI_SKIP_MPICXX -DMPICH_SKIP_MPICXX $(shell sh dev/cuda/mpi_flags.sh compile $(MPICC))
      CU_NCCL_DIR := $(firstword $(foreach d,$(NCCL_DIRS),$(if $(and $(wildcard $(d)/include/nccl.h),$(call nccl_lib,$(d))),$(d))))
      ifneq ($(CU_NCCL_DIR),)
        CU_MPI_FLAGS += -DUSE_NCCL $(if $(filter /usr,$(CU_NCCL_DIR)),,-I$(CU_NCCL_DIR)/include)
        CU_MPI_LIBS += -L$(patsubst %/,%,$(dir $(call nccl_lib,$(CU_NCCL_DIR)))) -lnccl
      endif
    else
      CU_MPI_NOTE := note: $(MPICC) names no MPI library (neither OpenMPI's --showme:libs nor MPICH's -link_info): the CUDA trainer is built without MPI
    endif
  endif
endif

.PHONY: cuda-flags test-cuda-flags train_gpt2cu test_gpt2cu test-cuda-builds test-cuda-run test-cuda-resources test-cuda-emulate test-cuda-emulate-builds emulate emulate-tiny nvcc-check
nvcc-check:
	@test -n "$(NVCC)" || { echo "nvcc not found: install the CUDA toolkit (or put nvcc on PATH) to build the CUDA path" >&2; exit 1; }

# the flags derived above (tests/mpi_flags.sh checks them with fake MPI wrappers)
cuda-flags:
	@echo "compile: $(strip $(CU_MPI_FLAGS))"
	@echo "link: $(strip $(CU_MPI_LIBS))"
	@echo "$(CU_MPI_NOTE)"

# CI: those flags for fake MPI wrappers of each style and fake NCCL installs
test-cuda-flags:
	bash tests/mpi_flags.sh

# the trainer; ptxas's report of every kernel's registers, local and shared memory goes to
# $@.ptxas (make test-cuda-resources reads it), everything else nvcc says to the terminal
$(BUILD)/train_gpt2cu_%: train_gpt2.cu $(CU_HEADERS) | $(BUILD) nvcc-check
	$(if $(CU_MPI_NOTE),@echo "$(CU_MPI_NOTE)" >&2)
	$(NVCC) $(NVCC_FLAGS) --resource-usage $(call cu_precision,$*) $(call stem_flags,$(call cu_pe,$*)) $(CU_MPI_FLAGS) \
	  -o $@ train_gpt2.cu $(NVCC_LDLIBS) $(CU_MPI_LIBS) > $@.ptxas.tmp 2>&1; \
	  status=$$?; grep -v -e '^ptxas info' -e '^    [0-9]* bytes stack frame' $@.ptxas.tmp >&2; \
	  if [ $$status -eq 0 ]; then mv $@.ptxas.tmp $@.ptxas; else rm -f $@.ptxas.tmp; exit $$status; fi

# the test runs on one GPU (no MPI); its CPU reference uses OpenMP
$(BUILD)/test_gpt2cu_%: test_gpt2.cu train_gpt2.cu $(CU_HEADERS) | $(BUILD) nvcc-check
	$(NVCC) $(NVCC_FLAGS) -Xcompiler -fopenmp $(call cu_precision,$*) $(call stem_flags,$(call cu_pe,$*)) -o $@ test_gpt2.cu $(NVCC_LDLIBS) -lgomp

train_gpt2cu: $(BUILD)/train_gpt2cu_$(STEM)$(CU_SUFFIX) | starter gpt2_tokenizer.bin gpt2_passkey.bin
	cp $< $@

test_gpt2cu: $(BUILD)/test_gpt2cu_$(STEM)$(CU_SUFFIX)
	cp $< $@

# CI (nvcc, no GPU): the trainers in bf16 and the tests in fp32, the builds the GPU-vs-CPU
# comparison is tight for (the bf16 tests differ from the fp32 ones by one define)
test-cuda-builds: $(foreach pe,$(PE_LIST),$(BUILD)/train_gpt2cu_$(pe) $(BUILD)/test_gpt2cu_$(pe)_fp32)

# every encoding: the CPU path writes the reference (llmc/debug_state.h), the CUDA path
# is compared with it; without a GPU each test prints its skip line and succeeds
# (gpu_vs_cpu: that comparison for the stems $(1); make test-dape uses it too)
gpu_vs_cpu = for s in $(1); do \
	  echo "=== $$s: GPU vs CPU (fp32) ==="; \
	  if $(BUILD)/test_gpt2cu_$${s}_fp32 device >/dev/null 2>&1; then \
	    $(BUILD)/test_gpt2_$$s debug-state $(BUILD)/ref_$$s || exit 1; \
	  fi; \
	  $(BUILD)/test_gpt2cu_$${s}_fp32 $(BUILD)/ref_$$s || exit 1; \
	done
test-cuda-run: test-cuda-builds $(foreach pe,$(PE_LIST),$(BUILD)/test_gpt2_$(pe))
	@$(call gpu_vs_cpu,$(PE_LIST))

# ---------------------------------------------------------------------------
# the CUDA path on the CPU (dev/cuda/emulate): the sources are copied with their kernel
# launches rewritten (prepare.py, once for every encoding) and compiled by g++ against
# stand-ins for the CUDA runtime, cuBLASLt and the tensor-core instructions. Binaries:
# build/emulate/<program>_<pe> (bf16) and <program>_<pe>_fp32.
EMU := $(BUILD)/emulate
EMU_SRC := $(EMU)/src
# every load and store of the kernels is checked: -fsanitize=kernel-address calls the
# emulation's hooks (dev/cuda/emulate/emu_kernel.h), no sanitizer runtime is linked
EMU_CHECK := -fsanitize=kernel-address --param asan-instrumentation-with-call-threshold=0 --param asan-stack=0 --param asan-globals=0 -DEMU_CHECK_ACCESS
EMU_COMPILE := g++ -std=c++20 -fopenmp -fno-strict-aliasing -x c++ -w -O2 $(EMU_CHECK)
EMU_CXX := $(EMU_COMPILE) -I$(EMU_SRC)/dev/cuda/emulate
# the emulation itself (and the host code) under AddressSanitizer and UBSan, instead
EMU_ASAN_CXX := g++ -std=c++20 -fopenmp -fno-strict-aliasing -x c++ -w -O1 -fno-omit-frame-pointer -fsanitize=address,undefined \
                -fno-sanitize-recover=undefined -I$(EMU_SRC)/dev/cuda/emulate
EMU_INPUTS := train_gpt2.cu test_gpt2.cu $(CU_HEADERS) $(wildcard dev/cuda/*.cu dev/cuda/emulate/*.h dev/cuda/emulate/*.cu dev/cuda/emulate/*.py)
emu_precision = $(if $(filter %_fp32,$(1)),-DENABLE_FP32,-DENABLE_BF16)
# the encoding whose attention check runs again under AddressSanitizer (kerple's PERow holds
# no pointer) and whose emulated attention_bias meets a machine without a usable GPU; the
# mutants planted in the kernels (dev/cuda/emulate/mutate.py) name their own encodings
EMU_MUTANT_PE := kerple
# the programs whose handling of a machine without a usable GPU is checked (the emulated
# test_gpt2cu is the one make test-dape builds)
EMU_DEVICE_STEM := kerple_dape1x3

$(EMU_SRC)/.prepared: $(EMU_INPUTS) | $(BUILD)
	rm -rf $(EMU_SRC) && python3 dev/cuda/emulate/prepare.py . $(EMU_SRC) && touch $@

$(EMU)/mma_check: $(EMU_SRC)/.prepared
	$(EMU_CXX) -o $@ $(EMU_SRC)/dev/cuda/mma_check.cu

$(EMU)/attention_%: $(EMU_SRC)/.prepared
	$(EMU_CXX) $(call emu_precision,$*) $(call stem_flags,$(call cu_pe,$*)) -o $@ $(EMU_SRC)/dev/cuda/$(call attention_dev,$(call cu_pe,$*)).cu

$(EMU)/asan_attention_%: $(EMU_SRC)/.prepared
	$(EMU_ASAN_CXX) $(call emu_precision,$*) $(call stem_flags,$(call cu_pe,$*)) -o $@ $(EMU_SRC)/dev/cuda/attention_bias.cu

$(EMU)/test_gpt2cu_%: $(EMU_SRC)/.prepared
	$(EMU_CXX) $(call emu_precision,$*) $(call stem_flags,$(call cu_pe,$*)) -o $@ $(EMU_SRC)/test_gpt2.cu

$(EMU)/train_gpt2cu_%: $(EMU_SRC)/.prepared
	$(EMU_CXX) $(call emu_precision,$*) $(call stem_flags,$(call cu_pe,$*)) -o $@ $(EMU_SRC)/train_gpt2.cu

$(EMU)/defects: $(EMU_SRC)/.prepared
	$(EMU_CXX) -DENABLE_BF16 -DPE_LEARNED -o $@ $(EMU_SRC)/dev/cuda/emulate/defects.cu

# the enums and types of the stand-ins against the real headers of the CUDA toolkit
$(EMU)/enums_real: dev/cuda/emulate/enums.cpp | $(BUILD) nvcc-check
	mkdir -p $(EMU) && g++ -I$(CUDA_HOME)/include -o $@ $<
$(EMU)/enums_emulated: dev/cuda/emulate/enums.cpp $(EMU_SRC)/.prepared
	g++ -std=c++20 -x c++ -I$(EMU_SRC)/dev/cuda/emulate -o $@ $<

# CI (nvcc, no GPU): ptxas's report of every encoding's bf16 trainer (the builds above, which
# also hold DAPE's kernels with the encoding's hooks) against dev/cuda/resources.py's budget: no
# local memory (stack frame, spills) in the tensor-core attention kernels at head sizes 32 and 64
# nor in DAPE's, registers x threads per block within an SM's 65,536; the threads and dynamic
# shared memory as the launchers ask for them, printed by the emulated dev/cuda/attention_bias
# (make test-cuda-emulate builds it); txl's, CoPE's and complex_order's own kernels too, their
# launches printed by their own checks (attention_bias for txl, dev/cuda/attention_cope.cu for
# CoPE, dev/cuda/attention_complex.cu for complex_order)
RESOURCE_PES := $(PE_LIST)
test-cuda-resources: $(foreach pe,$(RESOURCE_PES),$(BUILD)/train_gpt2cu_$(pe) $(EMU)/attention_$(pe))
	@for pe in $(RESOURCE_PES); do $(EMU)/attention_$$pe launches > $(BUILD)/launches_$$pe.txt || exit 1; done
	python3 dev/cuda/resources.py check $(foreach pe,$(RESOURCE_PES),$(BUILD)/launches_$(pe).txt $(BUILD)/train_gpt2cu_$(pe).ptxas)

# CI (no GPU): the instructions against the PTX ISA, then every encoding's tensor-core
# attention (dev/cuda/attention_bias check: forward and backward, T = 200, 1024, 77, 100,
# head sizes 64, 32, 128; T = 77 at randomized positions; CoPE's kernels: dev/cuda/attention_cope
# check; complex_order's: dev/cuda/attention_complex check) against the double-precision reference, one of them again under AddressSanitizer, the
# stand-ins' enums against the CUDA headers, the planted defects the emulation must report
# (dev/cuda/emulate/defects.sh), then the mutants; then the whole CUDA path against the CPU
# path (dev/cuda/emulate/trainers.sh) for every encoding and DAPE variant (EMU_TRAINER_STEMS),
# plain, at randomized positions where the encoding takes them, and with two thirds of the
# targets unscored (answer-only data), and a planted sign flip of each of the encoding's
# parameter gradients, which that comparison must catch
EMU_TRAINER_STEMS := $(PE_LIST) $(DAPE_TESTS)
# the stems run at randomized and given positions too: every encoding that takes them, and of
# DAPE's (one kernel template for every base; the CPU tests take all seven) kerple's 1x3 and
# FIRE's, whose bias reads the query's position as well (24 s more a stem in the emulation)
EMU_POS_STEMS := $(PE_RP_LIST) kerple_dape1x3 fire_dape1x3
# test_gpt2cu's attention check (long lengths, `attention K`: shape K) in the emulation, on the
# cases a GPU found failing that no other emulated check reached (stem:K): FIRE's threshold on
# a row, T = 1000 in fp32; the base attention of a DAPE build at T = 777 with randomized
# positions (its check had run the positions' reference against the indices' kernels); CoPE's
# positions near the embedding's kinks at T = 1024 in fp32 (the reference had summed them in
# double, not as the kernels do)
EMU_ATTENTION_CASES := fire_fp32:1 kerple_dape1x3_fp32:2 cope_fp32:0
test-cuda-emulate-builds: $(EMU)/mma_check $(foreach pe,$(PE_LIST),$(EMU)/attention_$(pe)) $(EMU)/asan_attention_$(EMU_MUTANT_PE) \
                          $(EMU)/enums_real $(EMU)/enums_emulated $(EMU)/defects $(EMU)/test_gpt2cu_$(EMU_DEVICE_STEM)_fp32 \
                          $(EMU)/train_gpt2cu_$(EMU_DEVICE_STEM)_fp32 $(foreach s,$(EMU_TRAINER_STEMS),$(EMU)/test_gpt2cu_$(s)_fp32) \
                          $(foreach c,$(EMU_ATTENTION_CASES),$(EMU)/test_gpt2cu_$(firstword $(subst :, ,$(c))))
test-cuda-emulate: test-cuda-emulate-builds $(foreach s,$(EMU_TRAINER_STEMS),$(BUILD)/test_gpt2_$(s))
	$(EMU)/mma_check
	@for pe in $(PE_LIST); do \
	  echo "=== $$pe: the bf16 build's attention in the emulation ==="; \
	  $(EMU)/attention_$$pe check || exit 1; \
	done
	@for c in $(EMU_ATTENTION_CASES); do \
	  echo "=== $${c%:*}: test_gpt2cu attention $${c#*:} in the emulation ==="; \
	  $(EMU)/test_gpt2cu_$${c%:*} attention $${c#*:} || exit 1; \
	done
	@echo "=== $(EMU_MUTANT_PE): the same under AddressSanitizer and UBSan ==="
	$(EMU)/asan_attention_$(EMU_MUTANT_PE) check
	@echo "=== the stand-ins' enums and types against $(CUDA_HOME)/include ==="
	@$(EMU)/enums_real > $(EMU)/enums_real.txt && $(EMU)/enums_emulated | diff $(EMU)/enums_real.txt - && echo "$$(wc -l < $(EMU)/enums_real.txt) values equal"
	@echo "=== planted defects: the emulation's reports ==="
	@bash dev/cuda/emulate/defects.sh $(EMU) $(EMU_DEVICE_STEM) $(EMU_MUTANT_PE)
	@bash dev/cuda/emulate/mutants.sh $(EMU) "$(EMU_COMPILE)"
	@echo "=== every encoding and DAPE variant: the CUDA path in the CPU emulation vs the CPU path (tiny model) ==="
	@bash dev/cuda/emulate/trainers.sh $(BUILD) $(EMU) "$(EMU_TRAINER_STEMS)" "$(EMU_POS_STEMS)"

# the whole CUDA path of one encoding (PE, and DAPE if given) on the CPU: the CPU path's
# debug state, test_gpt2cu's comparison with it in fp32 and in bf16 (logits, loss, every
# gradient, 10 AdamW steps), the attention kernels (fp32: versions 1 and 2; bf16: version 3;
# CoPE: dev/cuda/attention_cope.cu's versions 1 and 2, and its check)
emulate: $(EMU)/test_gpt2cu_$(STEM)_fp32 $(EMU)/test_gpt2cu_$(STEM) $(EMU)/attention_$(STEM)_fp32 $(EMU)/attention_$(STEM) $(BUILD)/test_gpt2_$(STEM)
	$(BUILD)/test_gpt2_$(STEM) debug-state $(BUILD)/ref_$(STEM) $(VARIANT)
	$(EMU)/test_gpt2cu_$(STEM)_fp32 reference $(BUILD)/ref_$(STEM)
	$(EMU)/test_gpt2cu_$(STEM) reference $(BUILD)/ref_$(STEM)
	$(EMU)/attention_$(STEM)_fp32 1 100 2 2 32
	$(EMU)/attention_$(STEM)_fp32 2 100 2 2 32
	$(EMU)/attention_$(STEM) check

# only test_gpt2cu's comparison (fp32), on a tiny model (test_gpt2 debug-state-tiny): seconds
emulate-tiny: $(EMU)/test_gpt2cu_$(STEM)_fp32 $(BUILD)/test_gpt2_$(STEM)
	$(BUILD)/test_gpt2_$(STEM) debug-state-tiny $(BUILD)/ref_tiny_$(STEM) $(VARIANT)
	$(EMU)/test_gpt2cu_$(STEM)_fp32 reference $(BUILD)/ref_tiny_$(STEM)
