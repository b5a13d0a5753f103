// Writes random raw blocks of each ggml block type and our dequantization of them, for
// quant_check.py to compare against the gguf Python package's independent numpy dequantizers.
// Usage: quant_dump OUT_DIR [N_BLOCKS]  ->  OUT_DIR/<type>.bin (raw blocks), <type>.f32 (floats).
// Also writes q8_0_src.f32 and q8_0_ours.bin: gaussian floats and our Q8_0 quantization of them;
// q5_src.f32, q5_0_ours.bin and q5_1_ours.bin: the same floats times 0.02 and our Q5_0 / Q5_1 ones.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/convert.h"
#include "kernels/cpu/dequantize.h"
#include "kernels/cpu/quantize.h"
#include "kernels/cpu/tensor_types.h"

using namespace sl::kernels;

namespace {

void write(const std::string& path, const void* data, size_t bytes) {
    std::ofstream f(path, std::ios::binary);
    f.write(static_cast<const char*>(data), static_cast<std::streamsize>(bytes));
    if (!f) {
        std::fprintf(stderr, "quant_dump: cannot write %s\n", path.c_str());
        std::exit(1);
    }
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: quant_dump OUT_DIR [N_BLOCKS]\n");
        return 2;
    }
    const std::string dir = argv[1];
    const int64_t nblocks = argc > 2 ? std::atoll(argv[2]) : 64;
    // SIGHTLINE_TEST_SEED as the other tests take it (CI pins it), else a fresh one; printed so
    // that a failure can be run again.
    uint64_t seed = std::random_device{}();
    if (const char* s = std::getenv("SIGHTLINE_TEST_SEED"); s && *s) seed = std::strtoull(s, nullptr, 10);
    std::fprintf(stderr, "quant_dump seed: SIGHTLINE_TEST_SEED=%llu\n", static_cast<unsigned long long>(seed));
    std::mt19937_64 g(seed);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    auto half = [&](float scale) { return f32_to_f16(u(g) * scale); };

    const TensorType types[] = {TensorType::Q4_0, TensorType::Q4_1, TensorType::Q5_0, TensorType::Q5_1,
                                TensorType::Q8_0, TensorType::Q2_K, TensorType::Q3_K, TensorType::Q4_K,
                                TensorType::Q5_K, TensorType::Q6_K, TensorType::IQ4_NL, TensorType::IQ4_XS};
    for (TensorType t : types) {
        const TensorTypeInfo info = tensor_type_info(t);
        std::vector<uint8_t> raw(static_cast<size_t>(nblocks) * info.type_size);
        for (auto& b : raw) b = static_cast<uint8_t>(g());
        for (int64_t i = 0; i < nblocks; ++i) {  // finite scales: random bytes could be NaN or inf
            uint8_t* blk = raw.data() + i * info.type_size;
            const size_t d_off = t == TensorType::Q6_K   ? offsetof(BlockQ6_K, d)
                                 : t == TensorType::Q2_K ? offsetof(BlockQ2_K, d)
                                 : t == TensorType::Q3_K ? offsetof(BlockQ3_K, d)
                                                         : 0;
            const uint16_t d = half(0.1f), m = half(0.1f);
            std::memcpy(blk + d_off, &d, 2);
            if (t == TensorType::Q4_1 || t == TensorType::Q5_1 || t == TensorType::Q4_K || t == TensorType::Q5_K)
                std::memcpy(blk + 2, &m, 2);
            if (t == TensorType::Q2_K) std::memcpy(blk + offsetof(BlockQ2_K, dmin), &m, 2);
        }
        const int64_t n = nblocks * info.block_size;
        std::vector<float> out(static_cast<size_t>(n));
        dequantize_row(t, raw.data(), out.data(), n);
        write(dir + "/" + info.name + ".bin", raw.data(), raw.size());
        write(dir + "/" + info.name + ".f32", out.data(), out.size() * sizeof(float));
    }

    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<float> src(static_cast<size_t>(nblocks) * 32);
    for (auto& x : src) x = nd(g);
    std::vector<BlockQ8_0> q(static_cast<size_t>(nblocks));
    quantize_row_q8_0(src.data(), q.data(), static_cast<int64_t>(src.size()));
    write(dir + "/q8_0_src.f32", src.data(), src.size() * sizeof(float));
    write(dir + "/q8_0_ours.bin", q.data(), q.size() * sizeof(BlockQ8_0));

    // The Q5 weight quantizers on the same floats (scaled to weight size).
    for (float& x : src) x *= 0.02f;
    std::vector<BlockQ5_0> q50(static_cast<size_t>(nblocks));
    std::vector<BlockQ5_1> q51(static_cast<size_t>(nblocks));
    quantize_row(TensorType::Q5_0, src.data(), q50.data(), static_cast<int64_t>(src.size()));
    quantize_row(TensorType::Q5_1, src.data(), q51.data(), static_cast<int64_t>(src.size()));
    write(dir + "/q5_src.f32", src.data(), src.size() * sizeof(float));
    write(dir + "/q5_0_ours.bin", q50.data(), q50.size() * sizeof(BlockQ5_0));
    write(dir + "/q5_1_ours.bin", q51.data(), q51.size() * sizeof(BlockQ5_1));
    return 0;
}
