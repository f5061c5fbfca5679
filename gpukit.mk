# The GPU kit (docs/gpu-lease.md): every binary dev/gpu_checks.sh runs on a GPU machine, built
# here, stripped and packed into $(GPU_KIT)/kit.tar.xz (at most 40 MB), so that a short lease
# builds nothing; included by the Makefile.
#
#   make gpu-kit [LLMC_DIR=<a tree of karpathy/llm.c>]   the kit (about 17 minutes of CPU)
#   make gpu-kit-bins [LLMC_DIR=...]                     the same, staged in $(KIT_BUILD)/stage,
#                                                        not packed (what a GPU machine runs when
#                                                        the kit's libraries are not found there)
#
# The kit: for every stem of KIT_STEMS (every encoding and the DAPE combinations of the CUDA
# tests) the CPU reference writer (test_gpt2_<stem>) and the GPU-vs-CPU test in bf16 and fp32
# (test_gpt2cu_<stem>[_fp32]); the GPT-Small trainers of KIT_BENCH (train_gpt2cu_<pe>); every
# encoding's dev attention kernels (attention_<pe>: dev/cuda/attention_bias.cu, CoPE's
# dev/cuda/attention_cope.cu) and mma_check, all bf16; with LLMC_DIR, llm.c's train_gpt2cu
# (llmc_train_gpt2cu, dev/gpu_kit.sh llmc: its CUDA 13 fix applied to a copy). Built without
# MPI, NCCL and OpenBLAS, the CPU code for a portable x86-64 level (KIT_MARCH): the GPU machine
# may have none of those libraries nor this machine's AVX-512; the packing fails if a binary
# needs a library other than cuBLAS(Lt), libgomp and the C and C++ runtimes.
GPU_KIT ?= out/gpukit
KIT_BUILD := $(BUILD)/kit
KIT_STEMS := $(PE_LIST) $(DAPE_CUDA_TESTS)
KIT_BENCH := learned alibi cable kerple fire
KIT_MARCH := x86-64-v3
LLMC_DIR ?=

kit_builds := $(foreach s,$(KIT_STEMS),$(KIT_BUILD)/test_gpt2_$(s) $(KIT_BUILD)/test_gpt2cu_$(s) $(KIT_BUILD)/test_gpt2cu_$(s)_fp32) \
              $(foreach pe,$(KIT_BENCH),$(KIT_BUILD)/train_gpt2cu_$(pe))
# dev/cuda/Makefile's binaries, named attention_<pe> in the kit (CoPE's attention is its own)
kit_dev := mma_check $(foreach pe,$(PE_LIST),$(if $(filter cope,$(pe)),attention_cope,attention_bias_$(pe)))
kit_lists = KIT_STEMS="$(KIT_STEMS)" KIT_PES="$(PE_LIST)" KIT_BENCH="$(KIT_BENCH)"

.PHONY: gpu-kit gpu-kit-bins test-gpu-lease
$(KIT_BUILD)/llmc/llmc_train_gpt2cu: $(wildcard $(LLMC_DIR)/Makefile $(LLMC_DIR)/train_gpt2.cu $(LLMC_DIR)/llmc/*)
	bash dev/gpu_kit.sh llmc $(LLMC_DIR) $(KIT_BUILD)/llmc

gpu-kit-bins: $(if $(LLMC_DIR),$(KIT_BUILD)/llmc/llmc_train_gpt2cu)
	$(MAKE) BUILD=$(KIT_BUILD) NO_MPI=1 NO_BLAS=1 MARCH=$(KIT_MARCH) $(kit_builds)
	$(MAKE) -C dev/cuda $(kit_dev)
	$(kit_lists) $(if $(LLMC_DIR),KIT_LLMC=$(KIT_BUILD)/llmc) bash dev/gpu_kit.sh stage $(KIT_BUILD)/stage $(kit_builds) $(foreach b,$(kit_dev),dev/cuda/$(b)=$(subst attention_bias_,attention_,$(b))) \
	  $(if $(LLMC_DIR),$(KIT_BUILD)/llmc/llmc_train_gpt2cu)

gpu-kit: gpu-kit-bins
	bash dev/gpu_kit.sh pack $(KIT_BUILD)/stage $(GPU_KIT)

# CI (no GPU): the dry run of a lease (tests/gpu_lease.sh, about 50 s of CPU): the commands' plan;
# a kit of make test's fp32 GPU-vs-CPU tests and stand-ins for the other programs, packed and
# checked (libraries); both commands from it without a device (every run SKIPPED or not run);
# command 1 with a pretended GPU (a crash, a hang, a failed check; the emulated trainer on a
# tiny model for the tables); command 1 against a short deadline and command 2's retry
test-gpu-lease: $(foreach s,$(KIT_STEMS),$(BUILD)/test_gpt2cu_$(s)_fp32) $(EMU)/train_gpt2cu_$(EMU_DEVICE_STEM)_fp32 $(BUILD)/test_gpt2_$(EMU_DEVICE_STEM) \
                $(EMU)/attention_kerple $(EMU)/attention_cope
	$(kit_lists) bash tests/gpu_lease.sh $(BUILD) $(EMU_DEVICE_STEM)
