#include "core/backend_profile.h"

#include <algorithm>
#include <chrono>
#include <type_traits>

#include <fmt/format.h>

namespace specmoe::core {

namespace {

// "Q4_K 8960x1536": a weight's type and shape (outputs x inputs).
std::string weight_name(const MatrixView& w) { return fmt::format("{} {}x{}", dtype_name(w.type), w.n_out, w.n_in); }

}  // namespace

template <class Name, class F>
auto ProfilingBackend::timed(const Name& name, double macs, double weight_bytes, F&& f) {
  if (!enabled_) return f();
  using Clock = std::chrono::steady_clock;
  inner_->synchronize();  // what earlier ops queued is theirs
  const auto t0 = Clock::now();
  auto finish = [&] {
    inner_->synchronize();
    std::string key;
    if constexpr (std::is_invocable_v<const Name&>) key = name();
    else key = name;
    OpProfile& p = ops_[key];
    if (p.name.empty()) p.name = key;
    ++p.calls;
    p.seconds += std::chrono::duration<double>(Clock::now() - t0).count();
    p.macs += macs;
    p.weight_bytes += weight_bytes;
  };
  if constexpr (std::is_void_v<decltype(f())>) {
    f();
    finish();
  } else {
    auto r = f();
    finish();
    return r;
  }
}

std::vector<OpProfile> ProfilingBackend::ops() const {
  std::vector<OpProfile> v;
  v.reserve(ops_.size());
  for (const auto& [key, p] : ops_) v.push_back(p);
  std::sort(v.begin(), v.end(), [](const OpProfile& a, const OpProfile& b) {
    return a.seconds != b.seconds ? a.seconds > b.seconds : a.name < b.name;
  });
  return v;
}

void ProfilingBackend::copy(void* dst, const void* src, size_t bytes) {
  timed("copy", 0, 0, [&] { inner_->copy(dst, src, bytes); });
}
void ProfilingBackend::copy_rows(void* dst, size_t dst_pitch, const void* src, size_t src_pitch, size_t row_bytes,
                                 int64_t rows) {
  timed("copy_rows", 0, 0, [&] { inner_->copy_rows(dst, dst_pitch, src, src_pitch, row_bytes, rows); });
}
void ProfilingBackend::download(void* host_dst, const void* src, size_t bytes) {
  timed("download", 0, 0, [&] { inner_->download(host_dst, src, bytes); });
}
void ProfilingBackend::upload(void* dst, const void* host_src, size_t bytes) {
  timed("upload", 0, 0, [&] { inner_->upload(dst, host_src, bytes); });
}

void ProfilingBackend::get_rows(const MatrixView& table, const int32_t* ids, int64_t n, float* out) {
  timed("get_rows", 0, 0, [&] { inner_->get_rows(table, ids, n, out); });
}
void ProfilingBackend::rms_norm(const float* x, const float* w, float* out, int64_t T, int64_t n, float eps) {
  timed("rms_norm", 0, 0, [&] { inner_->rms_norm(x, w, out, T, n, eps); });
}
void ProfilingBackend::layer_norm(const float* x, const float* w, const float* b, float* out, int64_t T, int64_t n,
                                  float eps) {
  timed("layer_norm", 0, 0, [&] { inner_->layer_norm(x, w, b, out, T, n, eps); });
}
void ProfilingBackend::matmul(const float* x, int64_t T, const MatrixView& w, float* y) {
  timed([&] { return "matmul " + weight_name(w); }, static_cast<double>(T) * w.n_in * w.n_out,
        static_cast<double>(w.bytes()), [&] { inner_->matmul(x, T, w, y); });
}
void ProfilingBackend::matmul_multi(const float* x, int64_t T, std::span<const MatrixView> w,
                                    std::span<float* const> y) {
  double macs = 0, bytes = 0;
  for (const MatrixView& m : w) {
    macs += static_cast<double>(T) * m.n_in * m.n_out;
    bytes += static_cast<double>(m.bytes());
  }
  auto name = [&] {
    std::string s = "matmul_multi";
    for (size_t i = 0; i < w.size(); ++i) s += (i ? " + " : " ") + weight_name(w[i]);
    return s;
  };
  timed(name, macs, bytes, [&] { inner_->matmul_multi(x, T, w, y); });
}
void ProfilingBackend::add_bias(float* y, const float* b, int64_t T, int64_t n) {
  timed("add_bias", 0, 0, [&] { inner_->add_bias(y, b, T, n); });
}
void ProfilingBackend::add(const float* a, const float* b, float* y, int64_t n) {
  timed("add", 0, 0, [&] { inner_->add(a, b, y, n); });
}
void ProfilingBackend::rope(float* x, int64_t T, const int32_t* positions, const RopeParams& p) {
  timed("rope", 0, 0, [&] { inner_->rope(x, T, positions, p); });
}
void ProfilingBackend::convert_rows(const float* src, int64_t rows, int64_t n, DType type, void* dst,
                                    size_t dst_pitch) {
  timed([&] { return fmt::format("convert_rows {}", dtype_name(type)); }, 0, 0,
        [&] { inner_->convert_rows(src, rows, n, type, dst, dst_pitch); });
}
void ProfilingBackend::attention(const float* q, int64_t T, const KVView& kv, const uint8_t* mask,
                                 const AttentionParams& p, float* out) {
  timed("attention", 0, 0, [&] { inner_->attention(q, T, kv, mask, p, out); });
}
void ProfilingBackend::mla_attention(const float* q, int64_t T, const MlaKVView& kv, const uint8_t* mask,
                                     const MlaAttentionParams& p, float* out) {
  timed("mla_attention", 0, 0, [&] { inner_->mla_attention(q, T, kv, mask, p, out); });
}
void ProfilingBackend::swiglu(const float* gate, const float* up, float* out, int64_t n) {
  timed("swiglu", 0, 0, [&] { inner_->swiglu(gate, up, out, n); });
}
void ProfilingBackend::gelu(const float* x, float* y, int64_t n) {
  timed("gelu", 0, 0, [&] { inner_->gelu(x, y, n); });
}

void ProfilingBackend::xielu(const float* x, float* y, int64_t n, const kernels::XIeluParams& p) {
  timed("xielu", 0, 0, [&] { inner_->xielu(x, y, n, p); });
}
void ProfilingBackend::relu_sqr(const float* x, float* y, int64_t n) {
  timed("relu_sqr", 0, 0, [&] { inner_->relu_sqr(x, y, n); });
}

void ProfilingBackend::clamp(const float* x, float limit, float* y, int64_t n) {
  timed("clamp", 0, 0, [&] { inner_->clamp(x, limit, y, n); });
}
void ProfilingBackend::short_conv(const float* rows, const int32_t* prev, int64_t T, int64_t row0, int64_t width,
                                  int n_taps, const float* taps, float* out) {
  timed("short_conv", 0, 0, [&] { inner_->short_conv(rows, prev, T, row0, width, n_taps, taps, out); });
}
void ProfilingBackend::delta_net(const float* qkv, const float* alpha, const float* beta, const float* conv_w,
                                 const float* dt_bias, const float* a, float* states, const int32_t* slots, int64_t T,
                                 const DeltaNetParams& p, float* out) {
  timed("delta_net", 0, 0, [&] { inner_->delta_net(qkv, alpha, beta, conv_w, dt_bias, a, states, slots, T, p, out); });
}
void ProfilingBackend::mamba2(const float* zxbcdt, const float* conv_w, const float* conv_b, const float* dt_bias,
                              const float* a, const float* d, const float* norm_w, float* states, const int32_t* slots,
                              int64_t T, const Mamba2Params& p, float* xbc, float* out) {
  timed("mamba2", 0, 0,
        [&] { inner_->mamba2(zxbcdt, conv_w, conv_b, dt_bias, a, d, norm_w, states, slots, T, p, xbc, out); });
}
void ProfilingBackend::sigmoid_mul(const float* gate, const float* x, float* y, int64_t n, int64_t group) {
  timed("sigmoid_mul", 0, 0, [&] { inner_->sigmoid_mul(gate, x, y, n, group); });
}
void ProfilingBackend::mul(const float* a, const float* b, float* y, int64_t n) {
  timed("mul", 0, 0, [&] { inner_->mul(a, b, y, n); });
}
void ProfilingBackend::scale(const float* x, float s, float* y, int64_t n) {
  timed("scale", 0, 0, [&] { inner_->scale(x, s, y, n); });
}
void ProfilingBackend::softcap(const float* x, float cap, float* y, int64_t n) {
  timed("softcap", 0, 0, [&] { inner_->softcap(x, cap, y, n); });
}
void ProfilingBackend::scatter_cols(const float* src, int64_t rows, int64_t n_src, const int32_t* cols, float* dst,
                                    int64_t n_dst, float fill) {
  timed("scatter_cols", 0, 0, [&] { inner_->scatter_cols(src, rows, n_src, cols, dst, n_dst, fill); });
}
void ProfilingBackend::moe_ffn(const MoEBlock& block, int k, double capacity_factor, const float* x,
                               const float* router_x, int64_t T, float* out, moe::Routing& routing) {
  timed("moe_ffn", 0, 0, [&] { inner_->moe_ffn(block, k, capacity_factor, x, router_x, T, out, routing); });
}
void ProfilingBackend::argmax_rows(const float* x, int64_t rows, int64_t n, int32_t* host_ids) {
  timed("argmax_rows", 0, 0, [&] { inner_->argmax_rows(x, rows, n, host_ids); });
}
void ProfilingBackend::distributions(const float* logits, int64_t rows, int64_t n, const SamplingParams& params,
                                     std::span<const int32_t> history, std::span<const int32_t> extra, float* out) {
  timed("distributions", 0, 0, [&] { inner_->distributions(logits, rows, n, params, history, extra, out); });
}
int32_t ProfilingBackend::sample(const float* probs, int64_t n, const SamplingParams& params, double u) {
  return timed("sample", 0, 0, [&] { return inner_->sample(probs, n, params, u); });
}
Draw ProfilingBackend::draw(const float* probs, int64_t n, float* q_out, int64_t n_out, const SamplingParams& params,
                            double u, const float* confidence_logits) {
  return timed("draw", 0, 0, [&] { return inner_->draw(probs, n, q_out, n_out, params, u, confidence_logits); });
}

ProfilingBackend* profiling_backend(Backend& b) { return dynamic_cast<ProfilingBackend*>(&b); }

}  // namespace specmoe::core
