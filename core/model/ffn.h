// The feed-forward half of a decoder block: the dense gated FFN and the mixture of experts.
//
// Mixture of experts (llama.cpp's build_moe_ffn, as Mixtral, DeepSeek V3 and MiniMax-M3 use it):
//   scores = router(x)                         (n_expert), F32 router weights
//   p      = softmax(scores) | sigmoid(scores) (LlamaConfig::Moe::gating)
//   chosen = top n_expert_used of p + exp_probs_b (the bias steers the choice only; ties: lower id)
//   w      = p[chosen], / max(sum, 2^-14) when norm_weights, * weights_scale when not 0 or 1
//   out    = sum_j w_j * down_j(act(gate_j x) * up_j x)  + the shared expert's FFN of x, if any
// Tokens are grouped by expert so each expert's weights are read once per call (a prefill of
// many tokens multiplies one matrix by all the rows routed to it).
//
// Threading: the calling thread drives `pool` (linear() splits weight rows across it); the scratch
// belongs to the caller's session.
#pragma once

#include <cstdint>

#include "core/model/llama_model.h"

namespace sl {

class ThreadPool;

// out (n) = act(gate) * up with the model's gate activation (SiLU, GELU-tanh or swiglu_oai).
void ffn_activate(const LlamaConfig& c, float* out, const float* gate, const float* up, int64_t n);

// out (n, d_model) = down(act(gate x) * up x) for the n rows of xn (n, d_model); gate and up have
// `width` rows. Uses s.g, s.u, s.h and s.quant.
void dense_ffn(const LlamaConfig& c, const TensorView& gate, const TensorView& up, const TensorView& down,
               int64_t width, const float* xn, int n, float* out, ThreadPool& pool, ForwardScratch& s);

// out (n, d_model) = the mixture of experts of layer L (L.is_moe()) for the n rows of xn.
// Uses s.router, s.route_*, s.rows, s.xe..s.ye, and the dense_ffn scratch for the shared expert.
void moe_ffn(const LlamaConfig& c, const LlamaLayer& L, const float* xn, int n, float* out, ThreadPool& pool,
             ForwardScratch& s);

// The experts chosen for one token's router scores (n_expert), best first, and their weights
// (n_expert_used each); `p` is overwritten with the probabilities. Exposed for tests.
void route_token(const LlamaConfig::Moe& m, float* p, const float* bias, int32_t* experts, float* weights);

}  // namespace sl
