// libFuzzer target for model loading past the GGUF parse (core/model/model_loader): the llama
// config (hyperparameters, rope scaling, MSA indexer keys), every tensor looked up by name with
// its shape and type checked, the tokenizer built from the metadata and the chat template. Any
// bytes either load or throw sl::FormatError (IoError cannot happen: the file is ours); anything
// else (a crash, a sanitizer report, another exception, a huge allocation) is a bug. When a file
// loads, every weight view the model holds must lie inside the file with whole rows.
//
// The input goes through load_model(path), as a user's file does: it is written to a temporary
// file (in /dev/shm when there is one) and mapped.
// Seeds: tests/fuzz/corpus/fuzz_model_load (tiny llama/qwen2 models, also with an MSA indexer, a
// tiny MiniMax-M3 (experts, shared expert, indexer) and a Mixtral-style llama,
// written by tests/fuzz/make_seeds.py through tests/reference/model/make_tiny_model.py).
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>

#include "core/model/model_loader.h"
#include "core/util/error.h"

namespace {

std::filesystem::path temp_path() {
    const std::filesystem::path dir =
        std::filesystem::is_directory("/dev/shm") ? "/dev/shm" : std::filesystem::temp_directory_path();
    return dir / ("sightline-fuzz-model-" + std::to_string(::getpid()) + ".gguf");
}

struct Bounds {
    const uint8_t* begin;
    const uint8_t* end;

    void check_bytes(const void* p, int64_t bytes) const {
        const auto* b = static_cast<const uint8_t*>(p);
        if (bytes < 0 || b < begin || b > end || bytes > end - b) __builtin_trap();
    }
    void check(const sl::TensorView& v) const {
        if (v.empty()) return;
        const auto info = sl::kernels::tensor_type_info(v.type);
        if (!info.computable || v.ne0 <= 0 || v.ne1 <= 0 || v.ne0 % info.block_size) __builtin_trap();
        check_bytes(v.data, v.ne1 * v.row_bytes());
    }
    void check(const float* p, int64_t n) const {
        if (p) check_bytes(p, n * int64_t{sizeof(float)});
    }
};

void check_loaded(const sl::LoadedModel& m) {
    const sl::LlamaConfig& c = m.model->config();
    const sl::LlamaWeights& w = m.model->weights();
    const auto bytes = m.file.bytes();
    const Bounds in{bytes.data(), bytes.data() + bytes.size()};
    const int64_t d = c.d_model, dq = int64_t{c.n_head} * c.head_dim,
                  dkv = int64_t{c.n_kv_head} * c.head_dim;
    if (static_cast<int64_t>(w.layers.size()) != c.n_layer) __builtin_trap();
    in.check(w.tok_embd);
    in.check(w.output);
    in.check(w.output_norm, d);
    if (w.tok_embd.ne0 != d || w.tok_embd.ne1 != c.n_vocab) __builtin_trap();
    for (const sl::LlamaLayer& L : w.layers) {
        for (const sl::TensorView* v : {&L.wq, &L.wk, &L.wv, &L.wo, &L.gate, &L.up, &L.down,
                                        &L.idx_wq, &L.idx_wk}) {
            in.check(*v);
        }
        if (L.wq.ne1 != dq || L.wk.ne1 != dkv || L.wv.ne1 != dkv || L.wo.ne0 != dq) __builtin_trap();
        in.check(L.attn_norm, d);
        in.check(L.ffn_norm, d);
        in.check(L.bq, dq);
        in.check(L.bk, dkv);
        in.check(L.bv, dkv);
        in.check(L.idx_q_norm, c.indexer.head_dim);
        in.check(L.idx_k_norm, c.indexer.head_dim);
        in.check(L.attn_q_norm, c.head_dim);
        in.check(L.attn_k_norm, c.head_dim);
        // Mixture of experts: the router, every expert's slice of the stacked tensors, the shared expert.
        in.check(L.ffn_gate_inp);
        in.check(L.exp_probs_b, c.moe.n_expert);
        for (const sl::TensorView* v : {&L.gate_shexp, &L.up_shexp, &L.down_shexp}) in.check(*v);
        if (L.is_moe()) {
            const auto E = static_cast<size_t>(c.moe.n_expert);
            if (L.ffn_gate_inp.ne1 != c.moe.n_expert || L.gate_exps.size() != E || L.up_exps.size() != E ||
                L.down_exps.size() != E || c.moe.n_expert_used < 1 || c.moe.n_expert_used > c.moe.n_expert)
                __builtin_trap();
            for (const auto* list : {&L.gate_exps, &L.up_exps, &L.down_exps})
                for (const sl::TensorView& v : *list) in.check(v);
        }
    }
    if (m.tokenizer->vocab_size() > c.n_vocab) __builtin_trap();
    volatile size_t sink = m.chat->stop_strings().size() + m.tokenizer->encode("Hello, world").size();
    (void)sink;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static const std::filesystem::path path = temp_path();
    {
        std::FILE* f = std::fopen(path.c_str(), "wb");
        if (!f) __builtin_trap();
        if (size && std::fwrite(data, 1, size, f) != size) __builtin_trap();
        std::fclose(f);
    }
    try {
        const std::unique_ptr<sl::LoadedModel> m = sl::load_model(path);
        check_loaded(*m);
    } catch (const sl::FormatError&) {
    }
    return 0;
}
