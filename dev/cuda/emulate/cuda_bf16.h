// a stand-in for cuda_bf16.h (the CPU emulation, cuda_runtime.h): bf16 as its 16 bits, with
// the conversions rounding to nearest even as the hardware does (cvt.rn.bf16.f32). Always
// inlined: into kernels (whose accesses are checked) and into the emulation's own code alike
#pragma once
#include <cstdint>
#include <cstring>
#define EMU_INLINE inline __attribute__((always_inline))

static EMU_INLINE uint16_t emu_float_to_bf16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u) { return (uint16_t)((x >> 16) | 0x40u); } // NaN stays a (quiet) NaN
    x += 0x7fffu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}
// from double: through float, except where float's rounding landed exactly on a tie of bf16
static EMU_INLINE uint16_t emu_double_to_bf16(double d) {
    float f = (float)d;
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0xffffu) == 0x8000u && (double)f != d) { // not a real tie: round toward d
        bool up = (d > (double)f) == (f > 0.0f);
        return (uint16_t)((x >> 16) + (up ? 1u : 0u));
    }
    return emu_float_to_bf16(f);
}

struct __nv_bfloat16 {
    uint16_t x;
    __nv_bfloat16() = default;
    EMU_INLINE __nv_bfloat16(float f) : x(emu_float_to_bf16(f)) {}
    EMU_INLINE __nv_bfloat16(double d) : x(emu_double_to_bf16(d)) {}
    EMU_INLINE __nv_bfloat16(int i) : x(emu_double_to_bf16((double)i)) {}
    EMU_INLINE operator float() const { uint32_t u = (uint32_t)x << 16; float f; memcpy(&f, &u, 4); return f; }
};
struct __nv_bfloat162 { __nv_bfloat16 x, y; };
static EMU_INLINE __nv_bfloat16 __float2bfloat16(float f) { return __nv_bfloat16(f); }
static EMU_INLINE float __bfloat162float(__nv_bfloat16 h) { return (float)h; }
static EMU_INLINE __nv_bfloat162 __floats2bfloat162_rn(float a, float b) { return {__nv_bfloat16(a), __nv_bfloat16(b)}; }
