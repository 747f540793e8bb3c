#include "moe/moe_layer.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "kernels/cpu/quant.h"

namespace specmoe::moe {

namespace {

// Float dot product with 8 independent partial sums in a fixed order: vectorisable without
// -ffast-math, and the same result on every call for the same inputs.
float dot(const float* a, const float* b, int n) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int i = 0;
  for (; i + 8 <= n; i += 8)
    for (int l = 0; l < 8; ++l) acc[l] += a[i + l] * b[i + l];
  for (int l = 0; i < n; ++i, ++l) acc[l] += a[i] * b[i];
  return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

float silu(float v) { return v / (1.0f + std::exp(-v)); }

// Checks a tensor's shape and that its rows fit its block size; names the tensor on failure.
void check_view(const WeightView& w, const char* role, std::array<int64_t, 3> want) {
  const std::string name = w.name.empty() ? std::string(role) : w.name;
  if (w.empty()) throw_error(ErrorKind::InvalidArgument, "moe layer: tensor '{}' is missing", name);
  if (w.ne != want)
    throw_error(ErrorKind::InvalidArgument,
                "moe layer: tensor '{}' has ne {{{}, {}, {}}}, expected {{{}, {}, {}}}", name,
                w.ne[0], w.ne[1], w.ne[2], want[0], want[1], want[2]);
  if (!dtype_info(static_cast<uint32_t>(w.type)))
    throw_error(ErrorKind::Unsupported, "moe layer: tensor '{}' has unsupported type id {}", name,
                static_cast<uint32_t>(w.type));
  try {
    (void)w.row_bytes();
  } catch (const Error& e) {
    throw_error(ErrorKind::InvalidArgument, "moe layer: tensor '{}': {}", name, e.what());
  }
}

constexpr int64_t kRowsPerItem = 16;  // rows of one weight matrix per work item

}  // namespace

// One SwiGLU FFN applied to a list of tokens: a routed expert's slice of the stacked tensors
// or the shared expert.
struct MoELayer::Group {
  const WeightView* gate;
  const WeightView* up;
  const WeightView* down;
  int64_t gate_up_row0;  // first row of this FFN in gate/up (expert * n_ff)
  int64_t down_row0;     // first row in down (expert * n_embd)
  int ff;                // hidden width
  const int32_t* tokens;  // [n_tok] token indices
  int64_t n_tok;
  float* h;               // [n_tok, ff]
  float* y;               // [n_tok, n_embd]
};

MoELayer::MoELayer(MoEWeights weights, std::unique_ptr<Router> router,
                   std::shared_ptr<ThreadPool> pool)
    : w_(std::move(weights)), router_(std::move(router)), pool_(std::move(pool)) {
  if (!router_) throw_error(ErrorKind::InvalidArgument, "moe layer: no router");
  if (w_.gate_inp.empty())
    throw_error(ErrorKind::InvalidArgument, "moe layer: router tensor 'ffn_gate_inp' is missing");
  n_embd_ = static_cast<int>(w_.gate_inp.ne[0]);
  n_expert_ = static_cast<int>(w_.gate_inp.ne[1]);
  n_ff_ = static_cast<int>(w_.gate_exps.ne[1]);
  if (n_embd_ < 1 || n_expert_ < 1 || n_ff_ < 1)
    throw_error(ErrorKind::InvalidArgument,
                "moe layer: sizes n_embd = {}, n_expert = {}, n_ff = {} must be >= 1", n_embd_,
                n_expert_, n_ff_);
  check_view(w_.gate_inp, "ffn_gate_inp", {n_embd_, n_expert_, 1});
  check_view(w_.gate_exps, "ffn_gate_exps", {n_embd_, n_ff_, n_expert_});
  check_view(w_.up_exps, "ffn_up_exps", {n_embd_, n_ff_, n_expert_});
  check_view(w_.down_exps, "ffn_down_exps", {n_ff_, n_embd_, n_expert_});
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
    n_ff_sh_ = static_cast<int>(w_.gate_shexp.ne[1]);
    if (n_ff_sh_ < 1)
      throw_error(ErrorKind::InvalidArgument, "moe layer: shared expert width {} must be >= 1",
                  n_ff_sh_);
    check_view(w_.gate_shexp, "ffn_gate_shexp", {n_embd_, n_ff_sh_, 1});
    check_view(w_.up_shexp, "ffn_up_shexp", {n_embd_, n_ff_sh_, 1});
    check_view(w_.down_shexp, "ffn_down_shexp", {n_ff_sh_, n_embd_, 1});
    if (!w_.gate_inp_shexp.empty()) check_view(w_.gate_inp_shexp, "ffn_gate_inp_shexp", {n_embd_, 1, 1});
  }
  router_bytes_ = w_.gate_inp.nbytes();
  expert_bytes_ = (w_.gate_exps.nbytes() + w_.up_exps.nbytes() + w_.down_exps.nbytes()) / n_expert_;
  if (n_ff_sh_ > 0)
    shared_bytes_ = w_.gate_shexp.nbytes() + w_.up_shexp.nbytes() + w_.down_shexp.nbytes() +
                    (w_.gate_inp_shexp.empty() ? 0 : w_.gate_inp_shexp.nbytes());
}

void MoELayer::run_items(int64_t n, const std::function<void(int64_t, int)>& fn) {
  const int workers = pool_ ? pool_->size() : 1;
  const size_t width = 2 * static_cast<size_t>(std::max({n_embd_, n_ff_, n_ff_sh_}));
  if (row_scratch_.size() < static_cast<size_t>(workers)) row_scratch_.resize(workers);
  for (auto& s : row_scratch_) s.resize(width);
  if (pool_) {
    pool_->run(n, fn);
  } else {
    for (int64_t i = 0; i < n; ++i) fn(i, 0);
  }
}

void MoELayer::compute_logits(const float* x, int T) {
  // [T, E] = x [T, n_embd] . W_inp^T; each router row is dequantized once for all T tokens.
  logits_.assign(static_cast<size_t>(T) * n_expert_, 0.0f);
  const size_t rb = w_.gate_inp.row_bytes();
  const auto* base = static_cast<const uint8_t*>(w_.gate_inp.data);
  run_items(n_expert_, [&](int64_t e, int worker) {
    float* row = row_scratch_[worker].data();
    kernels::cpu::dequantize_row(w_.gate_inp.type, base + e * rb, row, n_embd_);
    for (int t = 0; t < T; ++t)
      logits_[static_cast<size_t>(t) * n_expert_ + e] =
          dot(x + static_cast<size_t>(t) * n_embd_, row, n_embd_);
  });
}

void MoELayer::dispatch(int T) {
  // Histogram of kept assignments per expert, exclusive prefix sum, then a stable scatter in
  // (token, slot) order: an expert's tokens stay in token order.
  const int k = routing_.k;
  offset_.assign(n_expert_ + 1, 0);
  for (int32_t e : routing_.expert)
    if (e >= 0) ++offset_[e + 1];
  for (int e = 0; e < n_expert_; ++e) offset_[e + 1] += offset_[e];
  const int64_t n_assign = offset_[n_expert_];
  sorted_token_.assign(n_assign, 0);
  slot_pos_.assign(static_cast<size_t>(T) * k, -1);
  std::vector<int64_t> fill(offset_.begin(), offset_.end() - 1);
  for (int t = 0; t < T; ++t)
    for (int j = 0; j < k; ++j) {
      const int32_t e = routing_.expert_at(t, j);
      if (e < 0) continue;
      const int64_t pos = fill[e]++;
      sorted_token_[pos] = t;
      slot_pos_[static_cast<size_t>(t) * k + j] = pos;
    }
}

void MoELayer::run_ffns(const float* x, int T) {
  const int64_t n_assign = offset_[n_expert_];
  h_.assign(static_cast<size_t>(n_assign) * n_ff_, 0.0f);
  y_.assign(static_cast<size_t>(n_assign) * n_embd_, 0.0f);
  std::vector<Group> groups;
  for (int e = 0; e < n_expert_; ++e) {
    const int64_t n = offset_[e + 1] - offset_[e];
    if (n == 0) continue;  // untouched experts are never read
    groups.push_back({&w_.gate_exps, &w_.up_exps, &w_.down_exps, static_cast<int64_t>(e) * n_ff_,
                      static_cast<int64_t>(e) * n_embd_, n_ff_, sorted_token_.data() + offset_[e],
                      n, h_.data() + offset_[e] * n_ff_, y_.data() + offset_[e] * n_embd_});
  }
  if (n_ff_sh_ > 0 && T > 0) {
    h_sh_.assign(static_cast<size_t>(T) * n_ff_sh_, 0.0f);
    y_sh_.assign(static_cast<size_t>(T) * n_embd_, 0.0f);
    all_tokens_.resize(T);
    for (int t = 0; t < T; ++t) all_tokens_[t] = t;
    groups.push_back({&w_.gate_shexp, &w_.up_shexp, &w_.down_shexp, 0, 0, n_ff_sh_,
                      all_tokens_.data(), T, h_sh_.data(), y_sh_.data()});
  }

  // Work items: (group, chunk of kRowsPerItem rows). item_start[g] = first item of group g.
  auto chunks = [](int64_t rows) { return (rows + kRowsPerItem - 1) / kRowsPerItem; };
  std::vector<int64_t> up_start(groups.size() + 1, 0), down_start(groups.size() + 1, 0);
  for (size_t g = 0; g < groups.size(); ++g) {
    up_start[g + 1] = up_start[g] + chunks(groups[g].ff);
    down_start[g + 1] = down_start[g] + chunks(n_embd_);
  }
  auto find_group = [](const std::vector<int64_t>& start, int64_t item) {
    return static_cast<size_t>(std::upper_bound(start.begin(), start.end(), item) - start.begin() - 1);
  };

  // Phase 1: h = silu(x W_gate^T) * (x W_up^T), one gate row and one up row per step, applied
  // to every token of the group while they are in cache.
  run_items(up_start.back(), [&](int64_t item, int worker) {
    const size_t gi = find_group(up_start, item);
    const Group& g = groups[gi];
    const int64_t r0 = (item - up_start[gi]) * kRowsPerItem;
    const int64_t r1 = std::min<int64_t>(r0 + kRowsPerItem, g.ff);
    float* a = row_scratch_[worker].data();
    float* b = a + n_embd_;
    const size_t rb = g.gate->row_bytes();
    const size_t ub = g.up->row_bytes();
    for (int64_t r = r0; r < r1; ++r) {
      kernels::cpu::dequantize_row(g.gate->type, static_cast<const uint8_t*>(g.gate->data) +
                                                     (g.gate_up_row0 + r) * rb, a, n_embd_);
      kernels::cpu::dequantize_row(g.up->type, static_cast<const uint8_t*>(g.up->data) +
                                                   (g.gate_up_row0 + r) * ub, b, n_embd_);
      for (int64_t i = 0; i < g.n_tok; ++i) {
        const float* xt = x + static_cast<size_t>(g.tokens[i]) * n_embd_;
        g.h[i * g.ff + r] = silu(dot(xt, a, n_embd_)) * dot(xt, b, n_embd_);
      }
    }
  });

  // Phase 2: y = h W_down^T, one down row (length ff) per output element column.
  run_items(down_start.back(), [&](int64_t item, int worker) {
    const size_t gi = find_group(down_start, item);
    const Group& g = groups[gi];
    const int64_t o0 = (item - down_start[gi]) * kRowsPerItem;
    const int64_t o1 = std::min<int64_t>(o0 + kRowsPerItem, n_embd_);
    float* a = row_scratch_[worker].data();
    const size_t db = g.down->row_bytes();
    for (int64_t o = o0; o < o1; ++o) {
      kernels::cpu::dequantize_row(g.down->type, static_cast<const uint8_t*>(g.down->data) +
                                                     (g.down_row0 + o) * db, a, g.ff);
      for (int64_t i = 0; i < g.n_tok; ++i) g.y[i * n_embd_ + o] = dot(g.h + i * g.ff, a, g.ff);
    }
  });
}

void MoELayer::combine(int T, float* out) {
  // Per token, slots in rank order, then the shared expert: a fixed summation order.
  const int k = routing_.k;
  run_items(T, [&](int64_t t, int) {
    float* o = out + t * n_embd_;
    std::fill(o, o + n_embd_, 0.0f);
    for (int j = 0; j < k; ++j) {
      const int64_t pos = slot_pos_[t * k + j];
      if (pos < 0) continue;
      const float w = routing_.weight_at(static_cast<int>(t), j);
      const float* y = y_.data() + pos * n_embd_;
      for (int i = 0; i < n_embd_; ++i) o[i] += w * y[i];
    }
    if (n_ff_sh_ > 0) {
      const float gs = gate_sh_.empty() ? 1.0f : gate_sh_[t];
      const float* y = y_sh_.data() + t * n_embd_;
      for (int i = 0; i < n_embd_; ++i) o[i] += gs * y[i];
    }
  });
}

void MoELayer::forward(const float* x, int T, float* out, ExpertStats* stats) {
  if (T < 0) throw_error(ErrorKind::InvalidArgument, "moe layer: T = {} < 0", T);
  if (T > 0 && (!x || !out))
    throw_error(ErrorKind::InvalidArgument, "moe layer: null input or output");
  compute_logits(x, T);
  router_->route(logits_.data(), x, T, routing_);
  dispatch(T);
  gate_sh_.clear();
  if (n_ff_sh_ > 0 && !w_.gate_inp_shexp.empty() && T > 0) {
    // Qwen-MoE: the shared expert's output is scaled by sigmoid(w_sh . x_t).
    gate_sh_.resize(T);
    std::vector<float> w(n_embd_);
    kernels::cpu::dequantize_row(w_.gate_inp_shexp.type, w_.gate_inp_shexp.data, w.data(), n_embd_);
    for (int t = 0; t < T; ++t) {
      const float z = dot(x + static_cast<size_t>(t) * n_embd_, w.data(), n_embd_);
      gate_sh_[t] = 1.0f / (1.0f + std::exp(-z));
    }
  }
  run_ffns(x, T);
  combine(T, out);
  if (stats) stats->record_forward(routing_, expert_bytes_);
}

}  // namespace specmoe::moe
