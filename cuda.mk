# CUDA trainer and its GPU tests; included by the Makefile (uses PE, PE_LIST, pe_flag,
# BUILD, HEADERS from there).
#
#   make train_gpt2cu PE=<name> [PRECISION=BF16|FP32]   CUDA trainer (./train_gpt2cu)
#   make test_gpt2cu PE=<name> [PRECISION=...]          GPU-vs-CPU test (./test_gpt2cu)
#   make test-cuda-builds    every encoding's trainer (bf16) and test (fp32) compile
#   make test-cuda-run       every encoding's GPU-vs-CPU test (skips without a GPU)
#   make test-cuda-emulate   the tensor-core attention of every encoding on the CPU
#                            (dev/cuda/emulate), and mutants that must fail
#   make emulate PE=<name> [DAPE=<variant>]   the whole CUDA path on the CPU: test_gpt2cu's
#                            comparison with the CPU path in fp32 and bf16, the attention
#                            kernels (minutes)
#   make emulate-tiny PE=<name> [DAPE=<variant>]   the comparison alone, fp32, tiny model
#
# Binaries: build/train_gpt2cu_<pe> (bf16) and build/train_gpt2cu_<pe>_fp32, the same for
# test_gpt2cu (<pe>: the Makefile's stem, with DAPE e.g. kerple_dape1x3). bf16 builds use
# fast math; fp32 builds, which are compared tightly with the CPU path, do not. Options:
# CUDA_ARCH (default sm_90: H100/H200), NO_MPI=1.

NVCC ?= $(firstword $(shell command -v nvcc 2>/dev/null) $(wildcard /usr/local/cuda/bin/nvcc))
PRECISION ?= BF16
ifeq ($(filter $(PRECISION),BF16 FP32),)
$(error unknown PRECISION '$(PRECISION)'; valid: BF16 FP32)
endif
CUDA_ARCH ?= -gencode arch=compute_90,code=sm_90
NVCC_FLAGS := -std=c++17 -O3 $(CUDA_ARCH) -Xcompiler -Wall,-Wextra,-Wno-unused-function
NVCC_LDLIBS := -lcublas -lcublasLt
CU_HEADERS := $(HEADERS) $(wildcard llmc/*.cuh)
CU_SUFFIX := $(if $(filter FP32,$(PRECISION)),_fp32,)

# the stem of a CUDA binary is <pe> (bf16) or <pe>_fp32
cu_pe = $(patsubst %_fp32,%,$(1))
cu_precision = $(if $(filter %_fp32,$(1)),-DENABLE_FP32,-DENABLE_BF16 --use_fast_math)

# multi-GPU: MPI (unless NO_MPI=1), and NCCL on top of it when its header is there
CU_MPI_FLAGS :=
CU_MPI_LIBS :=
ifneq ($(NO_MPI),1)
  ifneq ($(MPICC),)
    CU_MPI_FLAGS := -DUSE_MPI -DOMPI_SKIP_MPICXX -DMPICH_SKIP_MPICXX $(shell $(MPICC) --showme:compile 2>/dev/null)
    CU_MPI_LIBS := $(shell $(MPICC) --showme:link 2>/dev/null)
    ifneq ($(wildcard $(dir $(NVCC))../include/nccl.h /usr/include/nccl.h),)
      CU_MPI_FLAGS += -DUSE_NCCL
      CU_MPI_LIBS += -lnccl
    endif
  endif
endif

.PHONY: train_gpt2cu test_gpt2cu test-cuda-builds test-cuda-run test-cuda-emulate emulate emulate-tiny nvcc-check
nvcc-check:
	@test -n "$(NVCC)" || { echo "nvcc not found: install the CUDA toolkit (or put nvcc on PATH) to build the CUDA path" >&2; exit 1; }

$(BUILD)/train_gpt2cu_%: train_gpt2.cu $(CU_HEADERS) | $(BUILD) nvcc-check
	$(NVCC) $(NVCC_FLAGS) $(call cu_precision,$*) $(call stem_flags,$(call cu_pe,$*)) $(CU_MPI_FLAGS) -o $@ train_gpt2.cu $(NVCC_LDLIBS) $(CU_MPI_LIBS)

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
# tensor-core instructions, with mutants planted in the kernels (and one in the emulation):
# a mutant's test must fail (a missing barrier or wait with the emulation's report);
# kerple's PERow holds no pointer. The same encoding's attention check runs under
# AddressSanitizer.
EMU_MUTANT_PE := kerple
# the programs whose handling of a machine without a usable GPU is checked (the emulated
# test_gpt2cu is the one make test-dape builds)
EMU_DEVICE_STEM := kerple_dape1x3
CUDA_INCLUDE = $(dir $(NVCC))../include

$(EMU_SRC)/.prepared: $(EMU_INPUTS) | $(BUILD)
	rm -rf $(EMU_SRC) && python3 dev/cuda/emulate/prepare.py . $(EMU_SRC) && touch $@

$(EMU)/mma_check: $(EMU_SRC)/.prepared
	$(EMU_CXX) -o $@ $(EMU_SRC)/dev/cuda/mma_check.cu

$(EMU)/attention_%: $(EMU_SRC)/.prepared
	$(EMU_CXX) $(call emu_precision,$*) $(call stem_flags,$(call cu_pe,$*)) -o $@ $(EMU_SRC)/dev/cuda/attention_bias.cu

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
	mkdir -p $(EMU) && g++ -I$(CUDA_INCLUDE) -o $@ $<
$(EMU)/enums_emulated: dev/cuda/emulate/enums.cpp $(EMU_SRC)/.prepared
	g++ -std=c++20 -x c++ -I$(EMU_SRC)/dev/cuda/emulate -o $@ $<

# CI (no GPU): the instructions against the PTX ISA, then every encoding's tensor-core
# attention (dev/cuda/attention_bias check: forward and backward, T = 200, 1024, 77, 100,
# head sizes 64, 32, 128) against the double-precision reference, one of them again under
# AddressSanitizer, the stand-ins' enums against the CUDA headers, the planted defects the
# emulation must report (dev/cuda/emulate/defects.sh), then the mutants
test-cuda-emulate: $(EMU)/mma_check $(foreach pe,$(PE_LIST),$(EMU)/attention_$(pe)) $(EMU)/asan_attention_$(EMU_MUTANT_PE) \
                   $(EMU)/enums_real $(EMU)/enums_emulated $(EMU)/defects $(EMU)/test_gpt2cu_$(EMU_DEVICE_STEM)_fp32 $(EMU)/train_gpt2cu_$(EMU_DEVICE_STEM)_fp32
	$(EMU)/mma_check
	@for pe in $(PE_LIST); do \
	  echo "=== $$pe: tensor-core attention (bf16) in the emulation ==="; \
	  $(EMU)/attention_$$pe check || exit 1; \
	done
	@echo "=== $(EMU_MUTANT_PE): the same under AddressSanitizer and UBSan ==="
	$(EMU)/asan_attention_$(EMU_MUTANT_PE) check
	@echo "=== the stand-ins' enums and types against $(CUDA_INCLUDE) ==="
	@$(EMU)/enums_real > $(EMU)/enums_real.txt && $(EMU)/enums_emulated | diff $(EMU)/enums_real.txt - && echo "$$(wc -l < $(EMU)/enums_real.txt) values equal"
	@echo "=== planted defects: the emulation's reports ==="
	@bash dev/cuda/emulate/defects.sh $(EMU) $(EMU_DEVICE_STEM) $(EMU_MUTANT_PE)
	@bash dev/cuda/emulate/mutants.sh $(EMU) $(EMU_MUTANT_PE) "$(EMU_COMPILE)"

# the whole CUDA path of one encoding (PE, and DAPE if given) on the CPU: the CPU path's
# debug state, test_gpt2cu's comparison with it in fp32 and in bf16 (logits, loss, every
# gradient, 10 AdamW steps), the attention kernels (fp32: versions 1 and 2; bf16: version 3)
emulate: $(EMU)/test_gpt2cu_$(STEM)_fp32 $(EMU)/test_gpt2cu_$(STEM) $(EMU)/attention_$(STEM)_fp32 $(EMU)/attention_$(STEM) $(BUILD)/test_gpt2_$(STEM)
	$(BUILD)/test_gpt2_$(STEM) debug-state $(BUILD)/ref_$(STEM)
	$(EMU)/test_gpt2cu_$(STEM)_fp32 reference $(BUILD)/ref_$(STEM)
	$(EMU)/test_gpt2cu_$(STEM) reference $(BUILD)/ref_$(STEM)
	$(EMU)/attention_$(STEM)_fp32 1 100 2 2 32
	$(EMU)/attention_$(STEM)_fp32 2 100 2 2 32
	$(EMU)/attention_$(STEM) check

# only test_gpt2cu's comparison (fp32), on a tiny model (test_gpt2 debug-state-tiny): seconds
emulate-tiny: $(EMU)/test_gpt2cu_$(STEM)_fp32 $(BUILD)/test_gpt2_$(STEM)
	$(BUILD)/test_gpt2_$(STEM) debug-state-tiny $(BUILD)/ref_tiny_$(STEM)
	$(EMU)/test_gpt2cu_$(STEM)_fp32 reference $(BUILD)/ref_tiny_$(STEM)
