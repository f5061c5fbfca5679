# CUDA trainer and its GPU tests; included by the Makefile (uses PE, PE_LIST, pe_flag,
# BUILD, HEADERS from there).
#
#   make train_gpt2cu PE=<name> [PRECISION=BF16|FP32]   CUDA trainer (./train_gpt2cu)
#   make test_gpt2cu PE=<name> [PRECISION=...]          GPU-vs-CPU test (./test_gpt2cu)
#   make test-cuda-builds    every encoding's trainer (bf16) and test (fp32) compile
#   make test-cuda-run       every encoding's GPU-vs-CPU test (skips without a GPU)
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

.PHONY: train_gpt2cu test_gpt2cu test-cuda-builds test-cuda-run nvcc-check
nvcc-check:
	@test -n "$(NVCC)" || { echo "nvcc not found: install the CUDA toolkit (or put nvcc on PATH) to build the CUDA path" >&2; exit 1; }

$(BUILD)/train_gpt2cu_%: train_gpt2.cu $(CU_HEADERS) | $(BUILD) nvcc-check
	$(NVCC) $(NVCC_FLAGS) $(call cu_precision,$*) $(call stem_flags,$(call cu_pe,$*)) $(CU_MPI_FLAGS) -o $@ train_gpt2.cu $(NVCC_LDLIBS) $(CU_MPI_LIBS)

# the test runs on one GPU (no MPI); its CPU reference uses OpenMP
$(BUILD)/test_gpt2cu_%: test_gpt2.cu train_gpt2.cu $(CU_HEADERS) | $(BUILD) nvcc-check
	$(NVCC) $(NVCC_FLAGS) -Xcompiler -fopenmp $(call cu_precision,$*) $(call stem_flags,$(call cu_pe,$*)) -o $@ test_gpt2.cu $(NVCC_LDLIBS) -lgomp

train_gpt2cu: $(BUILD)/train_gpt2cu_$(STEM)$(CU_SUFFIX) | starter gpt2_tokenizer.bin
	cp $< $@

test_gpt2cu: $(BUILD)/test_gpt2cu_$(STEM)$(CU_SUFFIX)
	cp $< $@

# CI (nvcc, no GPU): the trainers in bf16 and the tests in fp32, the builds the GPU-vs-CPU
# comparison is tight for (the bf16 tests differ from the fp32 ones by one define)
test-cuda-builds: $(foreach pe,$(PE_LIST),$(BUILD)/train_gpt2cu_$(pe) $(BUILD)/test_gpt2cu_$(pe)_fp32)

# every encoding: the CPU path writes the reference (llmc/debug_state.h), the CUDA path
# is compared with it; without a GPU each test prints its skip line and succeeds
test-cuda-run: test-cuda-builds $(foreach pe,$(PE_LIST),$(BUILD)/test_gpt2_$(pe))
	@for pe in $(PE_LIST); do \
	  echo "=== $$pe: GPU vs CPU (fp32) ==="; \
	  if $(BUILD)/test_gpt2cu_$${pe}_fp32 device >/dev/null 2>&1; then \
	    $(BUILD)/test_gpt2_$$pe debug-state $(BUILD)/ref_$$pe || exit 1; \
	  fi; \
	  $(BUILD)/test_gpt2cu_$${pe}_fp32 $(BUILD)/ref_$$pe || exit 1; \
	done
