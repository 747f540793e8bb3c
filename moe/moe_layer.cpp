#include "moe/moe_layer.h"

#include <algorithm>
#include <cmath>

#include "base/error.h"
#include "kernels/cpu/quant.h"

namespace specmoe::moe {

namespace {

// Checks a tensor's shape (n_in, n_out) and that its rows fit its block size; names the tensor's
// role on failure.
void check_view(const MatrixView& w, const char* role, int64_t n_in, int64_t n_out) {
  if (w.empty()) throw_error(ErrorKind::InvalidArgument, "moe layer: tensor '{}' is missing", role);
  if (w.n_in != n_in || w.n_out != n_out)
    throw_error(ErrorKind::InvalidArgument, "moe layer: tensor '{}' is ({} -> {}), expected ({} -> {})", role,
                w.n_in, w.n_out, n_in, n_out);
  if (!dtype_info(static_cast<uint32_t>(w.type)))
    throw_error(ErrorKind::Unsupported, "moe layer: tensor '{}' has unsupported type id {}", role,
                static_cast<uint32_t>(w.type));
  size_t want = 0;
  try {
    want = dtype_row_bytes(w.type, w.n_in);
  } catch (const Error& e) {
    throw_error(ErrorKind::InvalidArgument, "moe layer: tensor '{}': {}", role, e.what());
  }
  if (w.row_bytes != want)
    throw_error(ErrorKind::InvalidArgument, "moe layer: tensor '{}' has rows of {} bytes, expected {}", role,
                w.row_bytes, want);
}

// Rows of one weight matrix per work item: a multiple of matmul's grain (16), at most 128, and
// small enough that every thread gets about four items (load balance when only one or two
// experts are active). Larger items at decode time: each item's matmul call has a fixed cost
// (its setup, the activation quantization for the integer types), which 16-row items paid some
// 300 times per layer and token.
int64_t rows_per_item(int64_t rows, int n_threads) {
  const int64_t want = rows / (4 * static_cast<int64_t>(std::max(n_threads, 1)));
  return std::clamp<int64_t>(want / 16 * 16, 16, 128);
}

}  // namespace

size_t MoEWeights::expert_bytes() const {
  const int E = n_expert();
  return E > 0 ? (gate_exps.bytes() + up_exps.bytes() + down_exps.bytes()) / static_cast<size_t>(E) : 0;
}

size_t MoEWeights::shared_bytes() const {
  if (!has_shared_expert()) return 0;
  return gate_shexp.bytes() + up_shexp.bytes() + down_shexp.bytes() + gate_inp_shexp.bytes();
}

// One SwiGLU FFN applied to a list of tokens: a routed expert's slice of the stacked tensors
// or the shared expert.
struct MoELayer::Group {
  const MatrixView* gate;
  const MatrixView* up;
  const MatrixView* down;
  int64_t gate_up_row0;  // first row of this FFN in gate/up (expert * n_ff)
  int64_t down_row0;     // first row in down (expert * n_embd)
  int ff;                // hidden width
  const float* x;        // [n_tok, n_embd] the group's inputs, contiguous
  int64_t n_tok;
  float* h;              // [n_tok, ff]
  float* y;              // [n_tok, n_embd]
  const float* gate_b = nullptr;  // [ff] this expert's gate / up / down biases (gpt-oss; null: none)
  const float* up_b = nullptr;
  const float* down_b = nullptr;  // [n_embd]
  MoEActivation act = MoEActivation::SwiGLU;
  float limit = 0.0f;  // maple's clamped SwiGLU (MoEWeights::swiglu_limit); 0 = none
};

MoELayer::MoELayer(MoEWeights weights, std::unique_ptr<Router> router,
                   std::shared_ptr<ThreadPool> pool)
    : w_(std::move(weights)), router_(std::move(router)), pool_(std::move(pool)) {
  if (!router_) throw_error(ErrorKind::InvalidArgument, "moe layer: no router");
  if (w_.gate_inp.empty())
    throw_error(ErrorKind::InvalidArgument, "moe layer: router tensor 'ffn_gate_inp' is missing");
  n_embd_ = static_cast<int>(w_.gate_inp.n_in);
  n_expert_ = w_.n_expert();
  n_ff_ = static_cast<int>(w_.n_ff());
  if (n_embd_ < 1 || n_expert_ < 1 || n_ff_ < 1)
    throw_error(ErrorKind::InvalidArgument,
                "moe layer: sizes n_embd = {}, n_expert = {}, n_ff = {} must be >= 1", n_embd_,
                n_expert_, n_ff_);
  check_view(w_.gate_inp, "ffn_gate_inp", n_embd_, n_expert_);
  const bool gated = w_.act != MoEActivation::ReluSqr;  // nemotron_h_moe's experts have no gate
  if (gated)
    check_view(w_.gate_exps, "ffn_gate_exps", n_embd_, int64_t{n_ff_} * n_expert_);
  else if (!w_.gate_exps.empty() || w_.gate_exps_b)
    throw_error(ErrorKind::InvalidArgument, "moe layer: ungated (squared ReLU) experts with an ffn_gate_exps");
  if (w_.swiglu_limit != 0.0f && (w_.act != MoEActivation::SwiGLU || !(w_.swiglu_limit > 0.0f)))
    throw_error(ErrorKind::InvalidArgument, "moe layer: a SwiGLU clamp of {} (needs a positive limit and SwiGLU experts)",
                w_.swiglu_limit);
  check_view(w_.up_exps, "ffn_up_exps", n_embd_, int64_t{n_ff_} * n_expert_);
  check_view(w_.down_exps, "ffn_down_exps", n_ff_, int64_t{n_embd_} * n_expert_);
  if (router_->n_expert() != n_expert_)
    throw_error(ErrorKind::InvalidArgument,
                "moe layer: router has {} experts, ffn_gate_inp has {}", router_->n_expert(),
                n_expert_);
  if (router_->hidden_size() != 0 && router_->hidden_size() != n_embd_)
    throw_error(ErrorKind::InvalidArgument, "moe layer: {} router reads hidden size {}, n_embd = {}",
                router_->name(), router_->hidden_size(), n_embd_);
  const bool any_shared = !w_.gate_shexp.empty() || !w_.up_shexp.empty() ||
                          !w_.down_shexp.empty() || !w_.gate_inp_shexp.empty();
  if (any_shared) {
    n_ff_sh_ = static_cast<int>(w_.n_ff_shared());
    if (n_ff_sh_ < 1)
      throw_error(ErrorKind::InvalidArgument, "moe layer: shared expert width {} must be >= 1",
                  n_ff_sh_);
    if (w_.shared_act != MoEActivation::ReluSqr)
      check_view(w_.gate_shexp, "ffn_gate_shexp", n_embd_, n_ff_sh_);
    else if (!w_.gate_shexp.empty())
      throw_error(ErrorKind::InvalidArgument, "moe layer: an ungated (squared ReLU) shared expert with an ffn_gate_shexp");
    check_view(w_.up_shexp, "ffn_up_shexp", n_embd_, n_ff_sh_);
    check_view(w_.down_shexp, "ffn_down_shexp", n_ff_sh_, n_embd_);
    if (!w_.gate_inp_shexp.empty()) {
      check_view(w_.gate_inp_shexp, "ffn_gate_inp_shexp", n_embd_, 1);
      gate_sh_w_.resize(n_embd_);
      kernels::cpu::dequantize_row(w_.gate_inp_shexp.type, w_.gate_inp_shexp.data,
                                   gate_sh_w_.data(), n_embd_);
    }
  }
  router_bytes_ = w_.router_bytes();
  expert_bytes_ = w_.expert_bytes();
  shared_bytes_ = w_.shared_bytes();
}

void MoELayer::compute_logits(ThreadPool& pool, const float* x, int T) {
  // [T, E] = x [T, n_embd] . W_inp^T: the router matrix is read once for all T tokens.
  logits_.assign(static_cast<size_t>(T) * n_expert_, 0.0f);
  kernels::cpu::matmul(pool, x, T, w_.gate_inp, logits_.data());
  if (w_.gate_inp_b)
    for (int t = 0; t < T; ++t)
      for (int e = 0; e < n_expert_; ++e) logits_[static_cast<size_t>(t) * n_expert_ + e] += w_.gate_inp_b[e];
}

void MoELayer::dispatch(const float* x, int T) {
  // Histogram of kept assignments per expert, exclusive prefix sum, then a stable scatter in
  // (token, slot) order: an expert's tokens stay in token order. Each assignment's input row is
  // gathered so an expert's tokens form one contiguous [n_tok, n_embd] matmul input.
  const int k = routing_.k;
  offset_.assign(n_expert_ + 1, 0);
  for (int32_t e : routing_.expert)
    if (e >= 0) ++offset_[e + 1];
  last_distinct_ = 0;
  for (int e = 0; e < n_expert_; ++e) {
    last_distinct_ += offset_[e + 1] > 0;
    offset_[e + 1] += offset_[e];
  }
  const int64_t n_assign = offset_[n_expert_];
  sorted_token_.assign(n_assign, 0);
  xs_.resize(static_cast<size_t>(n_assign) * n_embd_);
  slot_pos_.assign(static_cast<size_t>(T) * k, -1);
  std::vector<int64_t> fill(offset_.begin(), offset_.end() - 1);
  for (int t = 0; t < T; ++t)
    for (int j = 0; j < k; ++j) {
      const int32_t e = routing_.expert_at(t, j);
      if (e < 0) continue;
      const int64_t pos = fill[e]++;
      sorted_token_[pos] = t;
      slot_pos_[static_cast<size_t>(t) * k + j] = pos;
      std::copy(x + static_cast<size_t>(t) * n_embd_, x + static_cast<size_t>(t + 1) * n_embd_,
                xs_.data() + pos * n_embd_);
      if (w_.weight_inputs) {  // llama4: the expert reads w * x
        const float w = routing_.weight_at(t, j);
        float* row = xs_.data() + pos * n_embd_;
        for (int i = 0; i < n_embd_; ++i) row[i] *= w;
      }
    }
}

void MoELayer::run_ffns(ThreadPool& pool, const float* x, int T) {
  namespace cpu = kernels::cpu;
  const int64_t n_assign = offset_[n_expert_];
  h_.resize(static_cast<size_t>(n_assign) * n_ff_);
  y_.resize(static_cast<size_t>(n_assign) * n_embd_);
  std::vector<Group> groups;
  for (int e = 0; e < n_expert_; ++e) {
    const int64_t n = offset_[e + 1] - offset_[e];
    if (n == 0) continue;  // untouched experts are never read
    const int64_t fe = static_cast<int64_t>(e) * n_ff_, de = static_cast<int64_t>(e) * n_embd_;
    groups.push_back({&w_.gate_exps, &w_.up_exps, &w_.down_exps, fe, de, n_ff_, xs_.data() + offset_[e] * n_embd_,
                      n, h_.data() + offset_[e] * n_ff_, y_.data() + offset_[e] * n_embd_,
                      w_.gate_exps_b ? w_.gate_exps_b + fe : nullptr, w_.up_exps_b ? w_.up_exps_b + fe : nullptr,
                      w_.down_exps_b ? w_.down_exps_b + de : nullptr, w_.act, w_.swiglu_limit});
  }
  if (n_ff_sh_ > 0 && T > 0) {
    h_sh_.resize(static_cast<size_t>(T) * n_ff_sh_);
    y_sh_.resize(static_cast<size_t>(T) * n_embd_);
    groups.push_back({&w_.gate_shexp, &w_.up_shexp, &w_.down_shexp, 0, 0, n_ff_sh_, x, T,
                      h_sh_.data(), y_sh_.data(), nullptr, nullptr, nullptr, w_.shared_act});
  }
  if (groups.empty()) return;

  // Work items: (group, chunk of rows_per_item rows); start[g] = first item of group g. One
  // parallel_for per phase for all experts (not one per expert), so the pool's fork/join cost
  // does not grow with U(T). Inside an item the kernels' matmul runs on the item's rows; a
  // matmul called from inside a pool job runs on the calling thread (ops.h), so it does not
  // fork again.
  int64_t ff_rows = 0;
  for (const Group& G : groups) ff_rows += G.ff;
  const int64_t up_rows = rows_per_item(ff_rows, pool.n_threads());
  const int64_t down_rows = rows_per_item(static_cast<int64_t>(groups.size()) * n_embd_, pool.n_threads());
  std::vector<int64_t> up_start(groups.size() + 1, 0), down_start(groups.size() + 1, 0);
  for (size_t g = 0; g < groups.size(); ++g) {
    up_start[g + 1] = up_start[g] + (groups[g].ff + up_rows - 1) / up_rows;
    down_start[g + 1] = down_start[g] + (n_embd_ + down_rows - 1) / down_rows;
  }
  auto find_group = [](const std::vector<int64_t>& start, int64_t item) {
    return static_cast<size_t>(std::upper_bound(start.begin(), start.end(), item) - start.begin() - 1);
  };

  // Phase 1: h = silu(x W_gate^T) * (x W_up^T) for rows [r0, r1) of the group's hidden layer.
  pool.parallel_for(up_start.back(), 1, [&](int64_t i0, int64_t i1) {
    thread_local std::vector<float> g, u;  // [n_tok, rows]
    for (int64_t item = i0; item < i1; ++item) {
      const size_t gi = find_group(up_start, item);
      const Group& G = groups[gi];
      const int64_t r0 = (item - up_start[gi]) * up_rows;
      const int64_t r1 = std::min<int64_t>(r0 + up_rows, G.ff);
      const int64_t nr = r1 - r0;
      g.resize(static_cast<size_t>(G.n_tok * nr));
      u.resize(g.size());
      if (G.act == MoEActivation::ReluSqr) {  // ungated: h = relu(x W_up^T)^2
        cpu::matmul(pool, G.x, G.n_tok, G.up->rows(G.gate_up_row0 + r0, nr), u.data());
        for (int64_t i = 0; i < G.n_tok; ++i)
          for (int64_t r = 0; r < nr; ++r) {
            const float v = u[i * nr + r] > 0.0f ? u[i * nr + r] : 0.0f;  // as relu_sqr_ref
            G.h[i * G.ff + r0 + r] = v * v;
          }
        continue;
      }
      // Gate and up share their input: one call, the activations quantized once for both.
      const cpu::MatrixView w[2] = {G.gate->rows(G.gate_up_row0 + r0, nr), G.up->rows(G.gate_up_row0 + r0, nr)};
      float* const y[2] = {g.data(), u.data()};
      cpu::matmul_multi(pool, G.x, G.n_tok, w, y);
      if (G.gate_b || G.up_b)
        for (int64_t i = 0; i < G.n_tok; ++i)
          for (int64_t r = 0; r < nr; ++r) {
            if (G.gate_b) g[i * nr + r] += G.gate_b[r0 + r];
            if (G.up_b) u[i * nr + r] += G.up_b[r0 + r];
          }
      if (G.act == MoEActivation::SwiGLUOai) {
        for (int64_t i = 0; i < G.n_tok; ++i)
          for (int64_t r = 0; r < nr; ++r) G.h[i * G.ff + r0 + r] = swiglu_oai(g[i * nr + r], u[i * nr + r]);
      } else if (G.limit > 0.0f) {
        for (int64_t i = 0; i < G.n_tok; ++i)
          for (int64_t r = 0; r < nr; ++r)
            G.h[i * G.ff + r0 + r] = swiglu_clamped(g[i * nr + r], u[i * nr + r], G.limit);
      } else if (G.act == MoEActivation::ReGLU) {
        for (int64_t i = 0; i < G.n_tok; ++i)
          for (int64_t r = 0; r < nr; ++r) G.h[i * G.ff + r0 + r] = std::max(g[i * nr + r], 0.0f) * u[i * nr + r];
      } else {
        for (int64_t i = 0; i < G.n_tok; ++i)
          for (int64_t r = 0; r < nr; ++r) G.h[i * G.ff + r0 + r] = cpu::silu(g[i * nr + r]) * u[i * nr + r];
      }
    }
  });

  // Phase 2: y = h W_down^T for output rows [o0, o1).
  pool.parallel_for(down_start.back(), 1, [&](int64_t i0, int64_t i1) {
    thread_local std::vector<float> d;  // [n_tok, rows]
    for (int64_t item = i0; item < i1; ++item) {
      const size_t gi = find_group(down_start, item);
      const Group& G = groups[gi];
      const int64_t o0 = (item - down_start[gi]) * down_rows;
      const int64_t o1 = std::min<int64_t>(o0 + down_rows, n_embd_);
      const int64_t no = o1 - o0;
      d.resize(static_cast<size_t>(G.n_tok * no));
      cpu::matmul(pool, G.h, G.n_tok, G.down->rows(G.down_row0 + o0, no), d.data());
      if (G.down_b)
        for (int64_t i = 0; i < G.n_tok; ++i)
          for (int64_t o = 0; o < no; ++o) d[i * no + o] += G.down_b[o0 + o];
      for (int64_t i = 0; i < G.n_tok; ++i)
        std::copy(d.data() + i * no, d.data() + (i + 1) * no, G.y + i * n_embd_ + o0);
    }
  });
}

void MoELayer::combine(ThreadPool& pool, int T, float* out) {
  // Per token, slots in rank order, then the shared expert: a fixed summation order.
  const int k = routing_.k;
  pool.parallel_for(T, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      float* o = out + t * n_embd_;
      std::fill(o, o + n_embd_, 0.0f);
      for (int j = 0; j < k; ++j) {
        const int64_t pos = slot_pos_[t * k + j];
        if (pos < 0) continue;
        const float w = w_.weight_inputs ? 1.0f : routing_.weight_at(static_cast<int>(t), j);
        const float* y = y_.data() + pos * n_embd_;
        for (int i = 0; i < n_embd_; ++i) o[i] += w * y[i];
      }
      if (n_ff_sh_ > 0) {
        const float gs = gate_sh_.empty() ? 1.0f : gate_sh_[t];
        const float* y = y_sh_.data() + t * n_embd_;
        for (int i = 0; i < n_embd_; ++i) o[i] += gs * y[i];
      }
    }
  });
}

void MoELayer::forward(const float* x, int T, float* out, ExpertStats* stats) {
  if (pool_) return forward(*pool_, x, T, out, stats);
  if (!serial_pool_) serial_pool_ = std::make_unique<ThreadPool>(1);
  forward(*serial_pool_, x, T, out, stats);
}

void MoELayer::forward(ThreadPool& pool, const float* x, int T, float* out, ExpertStats* stats,
                       const float* router_x) {
  if (T < 0) throw_error(ErrorKind::InvalidArgument, "moe layer: T = {} < 0", T);
  if (T > 0 && (!x || !out))
    throw_error(ErrorKind::InvalidArgument, "moe layer: null input or output");
  const float* rx = router_x != nullptr ? router_x : x;
  compute_logits(pool, rx, T);
  router_->route(logits_.data(), rx, T, routing_);
  dispatch(x, T);
  gate_sh_.clear();
  if (!gate_sh_w_.empty() && T > 0) {
    // Qwen-MoE: the shared expert's output is scaled by sigmoid(w_sh . x_t).
    gate_sh_.resize(T);
    for (int t = 0; t < T; ++t) {
      const float z = kernels::cpu::dot_f32(x + static_cast<size_t>(t) * n_embd_, gate_sh_w_.data(), n_embd_);
      gate_sh_[t] = 1.0f / (1.0f + std::exp(-z));
    }
  }
  run_ffns(pool, x, T);
  combine(pool, T, out);
  if (stats) stats->record_forward(routing_, expert_bytes_);
}

}  // namespace specmoe::moe
