// the emulation builds fp32 only (-DENABLE_FP32): nothing of bf16 is needed
#pragma once
