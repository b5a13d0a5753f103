// Tensor element types as GGUF files number them (ggml's numbering), their block layouts, and the
// sizes the GGUF reader needs to validate tensor extents. Layouts are bit-exact with ggml's.
#pragma once

#include <cstddef>
#include <cstdint>

namespace sl::kernels {

enum class TensorType : uint32_t {
    F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q8_1 = 9,
    Q2_K = 10, Q3_K = 11, Q4_K = 12, Q5_K = 13, Q6_K = 14, Q8_K = 15,
    IQ2_XXS = 16, IQ2_XS = 17, IQ3_XXS = 18, IQ1_S = 19, IQ4_NL = 20, IQ3_S = 21, IQ2_S = 22,
    IQ4_XS = 23, I8 = 24, I16 = 25, I32 = 26, I64 = 27, F64 = 28, IQ1_M = 29, BF16 = 30,
    TQ1_0 = 34, TQ2_0 = 35, MXFP4 = 39,
};

struct TensorTypeInfo {
    const char* name;      // "q4_1"; nullptr for numbers no ggml type has
    uint32_t block_size;   // elements per block (1 for plain types)
    uint32_t type_size;    // bytes per block
    bool computable;       // Sightline has dequantize + dot kernels for it
};

// Info for a raw type number from a file; name == nullptr when the number is unknown.
TensorTypeInfo tensor_type_info(uint32_t type);
inline TensorTypeInfo tensor_type_info(TensorType t) { return tensor_type_info(static_cast<uint32_t>(t)); }

constexpr int kQK4_0 = 32;
constexpr int kQK4_1 = 32;
constexpr int kQK5_0 = 32;
constexpr int kQK5_1 = 32;
constexpr int kQK8_0 = 32;
constexpr int kQK8_1 = 32;
constexpr int kQK_K = 256;
constexpr int kKScaleSize = 12;

// value = (q - 8) * d; qs[j] holds element j in its low nibble and j + 16 in its high nibble.
struct BlockQ4_0 {
    uint16_t d;  // f16
    uint8_t qs[kQK4_0 / 2];
};
// value = q * d + m; nibble layout as BlockQ4_0.
struct BlockQ4_1 {
    uint16_t d;  // f16
    uint16_t m;  // f16
    uint8_t qs[kQK4_1 / 2];
};
// 5-bit q: low 4 bits as BlockQ4_0's nibbles, bit 4 of element j is bit j of the little-endian
// uint32 in qh. value = (q - 16) * d.
struct BlockQ5_0 {
    uint16_t d;  // f16
    uint8_t qh[4];
    uint8_t qs[kQK5_0 / 2];
};
// value = q * d + m; 5-bit layout as BlockQ5_0.
struct BlockQ5_1 {
    uint16_t d;  // f16
    uint16_t m;  // f16
    uint8_t qh[4];
    uint8_t qs[kQK5_1 / 2];
};
// value = q * d.
struct BlockQ8_0 {
    uint16_t d;  // f16
    int8_t qs[kQK8_0];
};
// Activations for Q4_1/Q5_1-style dots: value = q * d; s = d * sum(q).
struct BlockQ8_1 {
    uint16_t d;  // f16
    uint16_t s;  // f16
    int8_t qs[kQK8_1];
};
// 16 sub-blocks of 16; scales[j] holds sub-block j's 4-bit scale (low nibble) and 4-bit min (high);
// value = d * sc * q - dmin * m, q 2 bits. qs[32 * h + l] holds element 128 * h + 32 * s + l
// (s = 0..3) in bits 2s..2s+1 for l < 32.
struct BlockQ2_K {
    uint8_t scales[kQK_K / 16];
    uint8_t qs[kQK_K / 4];
    uint16_t d;     // f16, super-block scale for the quantized scales
    uint16_t dmin;  // f16, super-block scale for the quantized mins
};
// 16 sub-blocks of 16; value = d * (sc - 32) * (q - 4 * !high), q's low 2 bits in qs (as Q2_K),
// its high bit in hmask (bit s of hmask[l] for element 32 * s + l; s = 0..7). The 6-bit scales are
// packed in 12 bytes: low 4 bits in scales[0..7] (nibbles), high 2 bits in scales[8..11].
struct BlockQ3_K {
    uint8_t hmask[kQK_K / 8];
    uint8_t qs[kQK_K / 4];
    uint8_t scales[12];
    uint16_t d;  // f16
};
// 8 sub-blocks of 32; 6-bit scales and mins packed in `scales`; value = d * sc * q - dmin * m.
struct BlockQ4_K {
    uint16_t d;     // f16, super-block scale for the quantized scales
    uint16_t dmin;  // f16, super-block scale for the quantized mins
    uint8_t scales[kKScaleSize];
    uint8_t qs[kQK_K / 2];
};
// 16 sub-blocks of 16; value = d * scale * (q - 32), q 6 bits from ql (low 4) and qh (high 2).
struct BlockQ6_K {
    uint8_t ql[kQK_K / 2];
    uint8_t qh[kQK_K / 4];
    int8_t scales[kQK_K / 16];
    uint16_t d;  // f16
};
// As BlockQ4_K, with a fifth bit: q = nibble + 16 * (bit (2 * (j / 64) + (j % 64 >= 32)) of qh[j % 32]).
struct BlockQ5_K {
    uint16_t d;     // f16
    uint16_t dmin;  // f16
    uint8_t scales[kKScaleSize];
    uint8_t qh[kQK_K / 8];
    uint8_t qs[kQK_K / 2];
};
// The 16 non-uniform levels of IQ4_NL / IQ4_XS (ggml's kvalues_iq4nl).
inline constexpr int8_t kIq4nlValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
// value = d * kIq4nlValues[nibble]; nibble layout as BlockQ4_0.
struct BlockIQ4_NL {
    uint16_t d;  // f16
    uint8_t qs[16];
};
// 8 sub-blocks of 32; value = d * (ls - 32) * kIq4nlValues[nibble], ls 6 bits: low 4 in the nibble
// ib % 2 of scales_l[ib / 2], high 2 at bits 2 * ib of scales_h. Sub-block ib's nibbles as a
// BlockQ4_0's in qs[16 * ib .. 16 * ib + 16).
struct BlockIQ4_XS {
    uint16_t d;  // f16
    uint16_t scales_h;
    uint8_t scales_l[kQK_K / 64];
    uint8_t qs[kQK_K / 2];
};
// Activations for K-quant dots: value = q * d; bsums = sums of groups of 16 q.
struct BlockQ8_K {
    float d;
    int8_t qs[kQK_K];
    int16_t bsums[kQK_K / 16];
};

static_assert(sizeof(BlockQ4_0) == 18);
static_assert(sizeof(BlockQ4_1) == 20);
static_assert(sizeof(BlockQ5_0) == 22);
static_assert(sizeof(BlockQ5_1) == 24);
static_assert(offsetof(BlockQ5_0, qs) == 6);
static_assert(offsetof(BlockQ5_1, qh) == 4 && offsetof(BlockQ5_1, qs) == 8);
static_assert(sizeof(BlockQ8_0) == 34);
static_assert(sizeof(BlockQ8_1) == 36);
static_assert(sizeof(BlockQ2_K) == 84);
static_assert(sizeof(BlockQ3_K) == 110);
static_assert(sizeof(BlockQ4_K) == 144);
static_assert(sizeof(BlockQ5_K) == 176);
static_assert(sizeof(BlockQ6_K) == 210);
static_assert(sizeof(BlockQ8_K) == 292);
static_assert(sizeof(BlockIQ4_NL) == 18);
static_assert(sizeof(BlockIQ4_XS) == 136);

}  // namespace sl::kernels
