// MoELayer: the gated mixture-of-experts feed-forward block (Shazeer et al. 2017; Mixtral,
// Qwen-MoE, DeepSeek-V3 variants through the Router):
//   logits = x W_inp                       (router, ffn_gate_inp)
//   (experts, weights) = router(logits, x)  (k per token, capacity dropping optional)
//   y_t = sum_j w_tj * FFN_{e_tj}(x_t)  +  [sigmoid(w_sh . x_t)] * FFN_shared(x_t)
//     (llama4: sum_j FFN_{e_tj}(w_tj * x_t), MoEWeights::weight_inputs)
//   FFN_e(x) = W_down_e (silu(W_gate_e x) * (W_up_e x))      (SwiGLU; or W_down_e relu(W_up_e x)^2)
// (gpt-oss: a bias on the logits and on each expert's gate, up and down rows, and the clamped
// SwiGLU of MoEActivation::SwiGLUOai.)
// Tokens are grouped by expert (histogram, prefix sum, stable scatter in token order), so each
// routed expert's weights are read once per forward for all of its tokens, and only experts
// that received a token are read at all. The products are the kernels' matmul (kernels/cpu/ops.h,
// AVX2 where the CPU has it), so an expert runs at the speed of a dense layer of its size. Work
// is split over (expert, row chunk) items on the model's kernels::cpu::ThreadPool; every output
// element is one matmul dot product whose order depends only on the row length, so results are
// bitwise identical for any thread count, and a token's output does not depend on which other
// tokens share its batch (given the same routing).
//
// Weights are GGUF tensors as llama.cpp names them (any DType dequantize_row supports), each a
// kernels::MatrixView (a stacked tensor of GGUF ne {n_in, n_out, n_expert} is one view of
// n_out * n_expert rows, expert e owning rows [e * n_out, (e + 1) * n_out)):
//   ffn_gate_inp    ne {n_embd, n_expert}
//   ffn_gate_exps   ne {n_embd, n_ff, n_expert}     ffn_up_exps the same
//   ffn_down_exps   ne {n_ff, n_embd, n_expert}
//   ffn_gate_shexp  ne {n_embd, n_ff_sh}            ffn_up_shexp the same   (optional)
//   ffn_down_shexp  ne {n_ff_sh, n_embd}                                     (optional)
//   ffn_gate_inp_shexp ne {n_embd} (optional; Qwen-MoE's sigmoid gate of the shared expert)
#pragma once
#include <cmath>
#include <memory>
#include <vector>

#include "kernels/cpu/ops.h"
#include "moe/expert_stats.h"
#include "moe/router.h"

namespace specmoe::moe {

using kernels::MatrixView;

// The routed experts' activation: SwiGLU silu(g) * u, gpt-oss's clamped form (llama.cpp's
// swiglu_oai with alpha 1.702 and limit 7): g' = min(g, 7), u' = clamp(u, -7, 7),
// g' sigmoid(1.702 g') (u' + 1), or smallthinker's ReLU-gated GLU max(g, 0) * u (Shazeer 2020's
// ReGLU; llama.cpp's LLM_FFN_RELU with a gate), or nemotron_h_moe's ungated squared ReLU
// relu(u)^2 of the up projection alone (no gate tensor: llama.cpp's LLM_FFN_RELU_SQR).
enum class MoEActivation { SwiGLU, SwiGLUOai, ReGLU, ReluSqr };
inline float swiglu_oai(float g, float u) {
  constexpr float kAlpha = 1.702f, kLimit = 7.0f;
  const float x = g < kLimit ? g : kLimit;
  const float y = u < -kLimit ? -kLimit : (u > kLimit ? kLimit : u);
  return x / (1.0f + std::exp(-kAlpha * x)) * (y + 1.0f);
}

inline float swiglu_clamped(float g, float u, float limit) {
  const float x = g < limit ? g : limit;
  const float y = u < -limit ? -limit : (u > limit ? limit : u);
  return x / (1.0f + std::exp(-x)) * y;
}

struct MoEWeights {
  MatrixView gate_inp;        // (n_embd -> n_expert)
  MatrixView gate_exps;       // (n_embd -> n_expert * n_ff)
  MatrixView up_exps;         // (n_embd -> n_expert * n_ff)
  MatrixView down_exps;       // (n_ff -> n_expert * n_embd)
  MatrixView gate_shexp;      // (n_embd -> n_ff_sh)   (empty = no shared expert)
  MatrixView up_shexp;        // (n_embd -> n_ff_sh)
  MatrixView down_shexp;      // (n_ff_sh -> n_embd)
  MatrixView gate_inp_shexp;  // (n_embd -> 1)         (empty = shared expert always weight 1)
  // gpt-oss: biases of the router logits [n_expert] and of the routed experts' gate, up [n_expert *
  // n_ff] and down [n_expert * n_embd] rows (host floats; null = none), and the activation.
  const float* gate_inp_b = nullptr;
  const float* gate_exps_b = nullptr;
  const float* up_exps_b = nullptr;
  const float* down_exps_b = nullptr;
  MoEActivation act = MoEActivation::SwiGLU;
  // maple: SwiGLU with the gate clamped from above and the up row on both sides,
  // silu(min(g, L)) * clamp(u, -L, L) (llama.cpp's swiglu_clamp); 0 = none. Only with act SwiGLU.
  float swiglu_limit = 0.0f;
  // The shared expert's activation: SwiGLU, or ReluSqr (nemotron_h_moe: no gate_shexp).
  MoEActivation shared_act = MoEActivation::SwiGLU;
  // llama4: each routed expert reads its token's row times the routing weight, FFN_e(w_tj x_t),
  // and the outputs are summed unweighted (llama.cpp's weight_before_ffn), in place of
  // w_tj FFN_e(x_t). The shared expert is not weighted either way.
  bool weight_inputs = false;

  bool empty() const { return gate_inp.empty(); }
  int n_expert() const { return static_cast<int>(gate_inp.n_out); }
  // Widths from the gate tensors (the up ones where the experts are ungated).
  int64_t n_ff() const {
    return n_expert() > 0 ? (act == MoEActivation::ReluSqr ? up_exps : gate_exps).n_out / n_expert() : 0;
  }
  int64_t n_ff_shared() const { return (shared_act == MoEActivation::ReluSqr ? up_shexp : gate_shexp).n_out; }
  bool has_shared_expert() const { return n_ff_shared() > 0; }
  bool has_biases() const { return gate_inp_b || gate_exps_b || up_exps_b || down_exps_b; }
  // Weight bytes of one routed expert (gate + up + down slices), of the shared expert with its
  // gate, and of the router matrix.
  size_t expert_bytes() const;
  size_t shared_bytes() const;
  size_t router_bytes() const { return gate_inp.bytes(); }
};

class MoELayer {
 public:
  using ThreadPool = kernels::cpu::ThreadPool;

  // Sizes come from the weight shapes, which are checked against each other and the router
  // (throws Error(InvalidArgument) naming the tensor). pool: the pool forward(x, ...) runs on
  // (shared with the caller's other layers); nullptr runs on the calling thread.
  MoELayer(MoEWeights weights, std::unique_ptr<Router> router,
           std::shared_ptr<ThreadPool> pool = nullptr);

  // x: [T, n_embd] row-major; out: [T, n_embd], overwritten with the MoE output (the caller
  // adds the residual; a token whose every assignment was dropped gets 0 here unless a shared
  // expert is present). stats: when non-null, this forward is recorded into it.
  // router_x: the router's input [T, n_embd] when it is not x (smallthinker routes the layer's
  // input, before attention); null = x.
  // Not reentrant: one forward at a time per layer (scratch buffers are members).
  void forward(ThreadPool& pool, const float* x, int T, float* out, ExpertStats* stats = nullptr,
               const float* router_x = nullptr);
  // The same on the constructor's pool (or the calling thread).
  void forward(const float* x, int T, float* out, ExpertStats* stats = nullptr);

  int n_embd() const { return n_embd_; }
  int n_ff() const { return n_ff_; }
  int n_expert() const { return n_expert_; }
  int n_ff_shared() const { return n_ff_sh_; }
  bool has_shared_expert() const { return n_ff_sh_ > 0; }
  Router& router() { return *router_; }
  const Router& router() const { return *router_; }
  void set_pool(std::shared_ptr<ThreadPool> pool) { pool_ = std::move(pool); }

  // Weight bytes of one routed expert (gate + up + down slices), of the shared expert (with its
  // gate vector) and of the router matrix: what a forward reads is
  // router_bytes + U(T) * expert_bytes + shared_bytes.
  size_t expert_bytes() const { return expert_bytes_; }
  size_t shared_bytes() const { return shared_bytes_; }
  size_t router_bytes() const { return router_bytes_; }

  // The last forward's router logits [T, n_expert], routing and number of distinct routed
  // experts it ran, U(T).
  const std::vector<float>& last_logits() const { return logits_; }
  const Routing& last_routing() const { return routing_; }
  int last_distinct_experts() const { return last_distinct_; }

 private:
  struct Group;  // one FFN (routed expert or shared) and the tokens it runs on
  void compute_logits(ThreadPool& pool, const float* x, int T);
  void dispatch(const float* x, int T);
  void run_ffns(ThreadPool& pool, const float* x, int T);
  void combine(ThreadPool& pool, int T, float* out);

  MoEWeights w_;
  std::unique_ptr<Router> router_;
  std::shared_ptr<ThreadPool> pool_;
  std::unique_ptr<ThreadPool> serial_pool_;  // 1 thread: forward(x, ...) without a pool
  int n_embd_ = 0, n_ff_ = 0, n_expert_ = 0, n_ff_sh_ = 0;
  size_t expert_bytes_ = 0, shared_bytes_ = 0, router_bytes_ = 0;
  std::vector<float> gate_sh_w_;         // [n_embd] ffn_gate_inp_shexp as floats (empty: none)
  int last_distinct_ = 0;

  // Scratch of the last forward.
  std::vector<float> logits_;            // [T, n_expert]
  Routing routing_;
  std::vector<int64_t> offset_;          // [n_expert + 1] prefix sum of tokens per expert
  std::vector<int32_t> sorted_token_;    // [n_assign] token of each assignment, grouped by expert
  std::vector<float> xs_;                // [n_assign, n_embd] x of each assignment, sorted order
  std::vector<int64_t> slot_pos_;        // [T, k] position of (t, j) in the sorted order, -1 dropped
  std::vector<float> h_;                 // [n_assign, n_ff] silu(gate) * up, sorted order
  std::vector<float> y_;                 // [n_assign, n_embd] expert outputs, sorted order
  std::vector<float> h_sh_, y_sh_;       // [T, n_ff_sh], [T, n_embd]
  std::vector<float> gate_sh_;           // [T] shared-expert gate
};

}  // namespace specmoe::moe
