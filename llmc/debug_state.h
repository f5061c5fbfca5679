/*
The reference that holds the CUDA path equal to the CPU path: `./test_gpt2 debug-state
PREFIX` (CPU, fp32) writes PREFIX_model.bin (a checkpoint) and PREFIX_state.bin with a
batch, the logits, the loss and every parameter gradient of that batch, and the losses
of DEBUG_STEPS AdamW steps on it (DEBUG_TINY_STEPS for the tiny model that the CPU
emulation of the CUDA path runs); `./test_gpt2cu PREFIX` loads the same checkpoint on
the GPU, runs the same batch and steps, and compares value by value.

PREFIX_state.bin: int32 header[256] = {DEBUG_STATE_MAGIC, 1, B, T, steps, PE id, evaluation
variant (llmc/pe.h, 0: plain), its training length, ...} (num_params as uint64 at word 8,
the variant's static RoPE factor as a float at word 10, the key of the randomized positions'
draw as uint64 at word 12: their range and seed are the checkpoint's; word 15: 1 when given
positions follow; words 16-18: cape's augmentation, CapeAugment's bytes), then int32 inputs[B*T], int32 targets[B*T] (TARGET_UNSCORED where the
loss skips a position: the variant "mask"), float logits[B*T*Vp], float loss, float
grads[num_params], float step_losses[steps], and with word 15 int32 positions[B*T] (the
variant "pos": debug_positions).
*/
#ifndef LLMC_DEBUG_STATE_H
#define LLMC_DEBUG_STATE_H

#define DEBUG_STATE_MAGIC 20240327
#define DEBUG_STEPS 10
// the tiny model's (debug-state-tiny): every encoding and variant runs in the emulation in
// `make test`, where a step costs about a quarter of a second; 3 steps see two updates
#define DEBUG_TINY_STEPS 3
// the AdamW steps: learning rate, betas, eps, weight decay; gradients clipped at norm 1
#define DEBUG_LR 1e-3f
#define DEBUG_BETA1 0.9f
#define DEBUG_BETA2 0.95f
#define DEBUG_EPS 1e-8f
#define DEBUG_WD 0.1f
// the model and batch: GPT-2's vocabulary, 2 layers, head size 64, T = 64 (so that
// T5's logarithmic buckets and FIRE's threshold are both exercised)
#define DEBUG_LAYERS 2
#define DEBUG_HEADS 4
#define DEBUG_CHANNELS 256
#define DEBUG_B 4
#define DEBUG_T 64

// The given positions of the tests' variant "pos" (positions as data, llmc/pe.h): row 0
// shifted (t + 5), row 1 in two chunks as PoSE makes them (t, then t + 11 from the middle on),
// the others gapped (2t + b). Returns their range.
static int debug_positions(int* pos, int B, int T) {
    int span = 0;
    for (int b = 0; b < B; b++) {
        for (int t = 0; t < T; t++) {
            int p = b == 0 ? t + 5 : b == 1 ? t + (t >= T / 2 ? 11 : 0) : 2 * t + b;
            pos[b * T + t] = p;
            if (p >= span) { span = p + 1; }
        }
    }
    return span;
}

#endif // LLMC_DEBUG_STATE_H
