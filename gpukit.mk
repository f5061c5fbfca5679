# The GPU kit (docs/gpu-lease.md): every binary dev/gpu_checks.sh runs on a GPU machine, built
# here, stripped and packed into $(GPU_KIT)/kit.tar.xz (at most 52 MB), so that a short lease
# builds nothing; included by the Makefile.
#
#   make -j2 gpu-kit [LLMC_DIR=<llm.c: a tree or GitHub's tarball>] [LLMC_REV=<its commit>]
#                                                        the kit (about 17 minutes of CPU)
#   make gpu-kit-bins [LLMC_DIR=...]                     the same, staged in $(KIT_BUILD)/stage,
#                                                        not packed (what a GPU machine runs when
#                                                        the kit's libraries are not found there)
#   make gpu-lease-plan                                  the lease's commands and arithmetic
#
# The kit: for every stem of KIT_STEMS (every encoding and the DAPE combinations of the CUDA
# tests) the CPU reference writer (test_gpt2_<stem>, OpenBLAS linked statically) and the
# GPU-vs-CPU test in bf16 and fp32 (test_gpt2cu_<stem>[_fp32]); the trainers of KIT_BENCH and
# KIT_EVAL (GPT-Small) and of KIT_TASKS (the tasks' study) (train_gpt2cu_<stem>), and ./tasks; every encoding's dev attention kernels
# (attention_<pe>: dev/cuda/attention_bias.cu, or the encoding's own program by cuda.mk's
# attention_dev: CoPE's attention_cope.cu, complex_order's attention_complex.cu) and mma_check,
# all bf16; with LLMC_DIR, llm.c's train_gpt2cu (llmc_train_gpt2cu, dev/gpu_kit.sh llmc: its
# CUDA 13 fix applied to a copy). Built without MPI and NCCL, the CPU code for a portable x86-64
# level (KIT_MARCH): the GPU machine may have none of those libraries, nor OpenBLAS, nor this
# machine's AVX-512; the packing fails if a binary needs a library other than cuBLAS(Lt), NVML,
# libgomp and the C and C++ runtimes.
GPU_KIT ?= out/gpukit
KIT_BUILD := $(BUILD)/kit
KIT_STEMS := $(PE_LIST) $(DAPE_CUDA_TESTS)
# deliberately short: the GPT-Small trainers timed beside llm.c (two runs of about 7 s each),
# and the one GPT-Small evaluation at 1k, 4k and 16k tokens (the default encoding's)
KIT_BENCH := learned alibi cable kerple fire
KIT_EVAL := cable
# command 3's study of the algorithmic tasks (dev/tasks.sh on the CUDA trainer): DAPE V2's Table 6
# (RoPE, Transformer-XL's relative encoding, ALiBi, Kerple, FIRE, and DAPE with kernels 1 and 3
# on the last three), NoPE and CABLE; their trainers and the task generator (tasks)
KIT_TASKS := rope txl alibi kerple fire alibi_dapemlp kerple_dapemlp fire_dapemlp alibi_dape1x3 kerple_dape1x3 fire_dape1x3 nope cable
KIT_MARCH := x86-64-v3
# the CPU reference writers with OpenBLAS (7 s of CPU a stem, 41 s with the plain loops), linked
# statically: the GPU machine has no OpenBLAS, and the static copies cost the packed kit about
# 4 MB (xz -9 stores the 19 copies nearly once); without it (a GPU machine's own rebuild) the
# plain loops
KIT_OPENBLAS := $(OPENBLAS_OMP)/libopenblas.a
kit_flags := BUILD=$(KIT_BUILD) NO_MPI=1 MARCH=$(KIT_MARCH) $(if $(wildcard $(KIT_OPENBLAS)),LDLIBS="-lm $(KIT_OPENBLAS)",NO_BLAS=1)
kit_blas := $(if $(wildcard $(KIT_OPENBLAS)),openblas static ($(notdir $(realpath $(KIT_OPENBLAS)))),none)
LLMC_DIR ?=
LLMC_REV ?=

kit_trainers := $(KIT_BENCH) $(filter-out $(KIT_BENCH),$(KIT_EVAL)) $(filter-out $(KIT_BENCH) $(KIT_EVAL),$(KIT_TASKS))
kit_builds := $(foreach s,$(KIT_STEMS),$(KIT_BUILD)/test_gpt2_$(s) $(KIT_BUILD)/test_gpt2cu_$(s) $(KIT_BUILD)/test_gpt2cu_$(s)_fp32) \
              $(foreach pe,$(kit_trainers),$(KIT_BUILD)/train_gpt2cu_$(pe))
# dev/cuda/Makefile's binaries (attention_bias_<pe>, or the encoding's own program: cuda.mk's
# attention_dev), named attention_<pe> in the kit
kit_dev_bin = $(if $(filter attention_bias,$(call attention_dev,$(1))),attention_bias_$(1),$(call attention_dev,$(1)))
kit_dev := mma_check $(foreach pe,$(PE_LIST),$(call kit_dev_bin,$(pe)))
kit_dev_staged := dev/cuda/mma_check=mma_check $(foreach pe,$(PE_LIST),dev/cuda/$(call kit_dev_bin,$(pe))=attention_$(pe))
kit_lists = KIT_STEMS="$(KIT_STEMS)" KIT_PES="$(PE_LIST)" KIT_BENCH="$(KIT_BENCH)" KIT_EVAL="$(KIT_EVAL)" KIT_TASKS="$(KIT_TASKS)" KIT_BLAS="$(kit_blas)"

.PHONY: gpu-kit gpu-kit-bins gpu-lease-plan test-gpu-lease
# the task generator for the GPU machine: the kit's portable x86-64 level, no MPI (made by this
# make, not by the sub-make of kit_flags, whose BUILD is the kit's folder)
$(KIT_BUILD)/tasks: data/tasks.c llmc/utils.h llmc/rand.h llmc/dataloader.h llmc/tasks.h
	@mkdir -p $(KIT_BUILD)
	gcc -O3 -march=$(KIT_MARCH) -std=gnu11 -Wall -o $@ data/tasks.c -lm
$(KIT_BUILD)/llmc/llmc_train_gpt2cu: $(wildcard $(LLMC_DIR) $(LLMC_DIR)/Makefile $(LLMC_DIR)/train_gpt2.cu $(LLMC_DIR)/llmc/*)
	LLMC_REV="$(LLMC_REV)" bash dev/gpu_kit.sh llmc $(LLMC_DIR) $(KIT_BUILD)/llmc

gpu-kit-bins: $(if $(LLMC_DIR),$(KIT_BUILD)/llmc/llmc_train_gpt2cu) $(KIT_BUILD)/tasks
	$(if $(filter gpu-kit,$(MAKECMDGOALS)),@test -f $(KIT_OPENBLAS) || { echo "gpu-kit: no $(KIT_OPENBLAS) (apt-get install libopenblas-openmp-dev): the kit's CPU references would take 41 s of CPU a stem instead of 7" >&2; exit 1; })
	$(MAKE) $(kit_flags) $(kit_builds)
	$(MAKE) -C dev/cuda $(kit_dev)
	$(kit_lists) $(if $(LLMC_DIR),KIT_LLMC=$(KIT_BUILD)/llmc) bash dev/gpu_kit.sh stage $(KIT_BUILD)/stage $(kit_builds) $(KIT_BUILD)/tasks $(kit_dev_staged) \
	  $(if $(LLMC_DIR),$(KIT_BUILD)/llmc/llmc_train_gpt2cu)

gpu-kit: gpu-kit-bins
	bash dev/gpu_kit.sh pack $(KIT_BUILD)/stage $(GPU_KIT)

gpu-lease-plan:
	@GPU_KIT=$(GPU_KIT) $(kit_lists) bash dev/gpu_checks.sh plan

# CI (no GPU): the dry run of a lease (tests/gpu_lease.sh, 50 s of CPU): the commands'
# plan; a kit of make test's fp32 GPU-vs-CPU tests, stand-ins for the other programs and one CPU
# reference writer built as the kit builds it (OpenBLAS inside, run from the unpacked kit), packed
# and checked (libraries); gpu_kit.sh's refusals to delete what it did not make; both commands
# from it without a device (every run SKIPPED or not run); command 1 with a pretended GPU (a
# crash, a hang, a failed check, a refused and a working compute-sanitizer, the tables); the
# deadline (a run it cuts is left, not failed; minimum times), command 2's deadline from the
# lease's time left and its retry
test-gpu-lease: $(foreach s,$(KIT_STEMS),$(BUILD)/test_gpt2cu_$(s)_fp32) $(EMU)/train_gpt2cu_$(EMU_DEVICE_STEM)_fp32 $(BUILD)/test_gpt2_$(EMU_DEVICE_STEM) \
                $(EMU)/attention_kerple $(EMU)/attention_cope $(KIT_BUILD)/tasks
	$(MAKE) $(kit_flags) $(KIT_BUILD)/test_gpt2_$(EMU_DEVICE_STEM)
	$(kit_lists) bash tests/gpu_lease.sh $(BUILD) $(EMU_DEVICE_STEM) $(KIT_BUILD)/test_gpt2_$(EMU_DEVICE_STEM) $(KIT_BUILD)/tasks
