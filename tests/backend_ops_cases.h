// The op cases of the differential harness (tests/backend_ops.h) for the forward's dense ops:
// matmul, get_rows, rms_norm, layer_norm, rope (with frequency factors, YaRN and attn_factor),
// convert_rows (KV cache stores), attention (F32, F16 and Q8_0 K/V rows, sliding windows), the
// element-wise ops (swiglu, gelu, add, add_bias, mul, scale, softcap, relu_sqr, clamp), lfm2's
// short convolution, argmax_rows and scatter_cols. Each names its Backend op, makes seeded host inputs, computes
// the reference with kernels::cpu::*_ref, and runs the op on a backend through the Backend
// interface. Sampling and the MoE block: tests/backend_ops_sampling.h.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "backend_ops.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/quant.h"

namespace specmoe::testing::ops {

namespace cpu = kernels::cpu;
using kernels::AttentionParams;
using kernels::DeltaNetParams;
using kernels::Mamba2Params;
using kernels::KVView;
using kernels::MlaAttentionParams;
using kernels::MlaKVView;
using kernels::RopePairing;
using kernels::RopeParams;

// y[T, n_out] = x[T, n_in] W^T for W of any dtype.
class MatmulCase final : public OpCase {
 public:
  MatmulCase(DType type, int64_t T, int64_t n_in, int64_t n_out, Bound bound, Fill fill = Fill::Quantized,
             size_t pad_bytes = 0)
      : OpCase("matmul", std::move(bound)), type_(type), T_(T), n_in_(n_in), n_out_(n_out), fill_(fill),
        pad_(pad_bytes) {}
  std::string shape() const override {
    return fmt::format("{} T={} n_in={} n_out={}{}{}", dtype_name(type_), T_, n_in_, n_out_,
                       fill_ == Fill::RandomCodes ? " random-codes" : "", pad_ ? fmt::format(" pad={}", pad_) : "");
  }
  void run(Backend& b) override { b.matmul(x_d_, T_, w_d_, y_d_); }
  Outputs result(Backend&, Arena& a) override { return {{"y", a.get(y_d_)}}; }
  double bytes() const override {
    return static_cast<double>(dtype_row_bytes(type_, n_in_)) * n_out_ + 4.0 * T_ * (n_in_ + n_out_);
  }
  double flops() const override { return 2.0 * T_ * n_in_ * n_out_; }

 protected:
  void make_inputs() override {
    w_ = make_matrix(type_, n_in_, n_out_, seed(), fill_, pad_);
    x_ = normal_floats(static_cast<size_t>(T_ * n_in_), seed() + 1);
  }
  Outputs compute_reference() override {
    Output y{"y"};
    y.values.resize(static_cast<size_t>(T_ * n_out_));
    cpu::matmul_ref(x_.data(), T_, w_.view, y.values.data());
    std::vector<float> row(static_cast<size_t>(n_in_));
    double energy = 0.0;  // sum over outputs of sum_i (x_i w_i)^2
    for (int64_t j = 0; j < n_out_; ++j) {
      cpu::dequantize_row(type_, w_.view.row(j), row.data(), n_in_);
      for (int64_t t = 0; t < T_; ++t)
        for (int64_t i = 0; i < n_in_; ++i) {
          const double p = static_cast<double>(x_[t * n_in_ + i]) * row[i];
          energy += p * p;
        }
    }
    y.energy = energy;
    return {y};
  }
  void do_prepare(Backend& b, Arena& a) override {
    w_d_ = b.resident(w_.view);
    x_d_ = a.input(x_, n_in_);
    y_d_ = a.output(static_cast<size_t>(T_ * n_out_), n_out_);
  }
  void free_inputs() override { w_ = {}, x_ = {}; }

 private:
  DType type_;
  int64_t T_, n_in_, n_out_;
  Fill fill_;
  size_t pad_;
  HostMatrix w_;
  std::vector<float> x_;
  MatrixView w_d_;
  float *x_d_ = nullptr, *y_d_ = nullptr;
};

// y_i = x W_i^T for up to three weights sharing x (q/k/v, gate/up) in one matmul_multi call:
// each y_i against matmul_ref, so a chunk of rows computed for the wrong weight, on the wrong
// activation format or into the wrong output shows.
class MatmulMultiCase final : public OpCase {
 public:
  MatmulMultiCase(std::vector<DType> types, int64_t T, int64_t n_in, std::vector<int64_t> n_outs, Bound bound)
      : OpCase("matmul_multi", std::move(bound)), types_(std::move(types)), T_(T), n_in_(n_in), n_outs_(std::move(n_outs)) {}
  std::string shape() const override {
    std::string s = fmt::format("T={} n_in={}", T_, n_in_);
    for (size_t i = 0; i < types_.size(); ++i) s += fmt::format(" {}x{}", dtype_name(types_[i]), n_outs_[i]);
    return s;
  }
  void run(Backend& b) override { b.matmul_multi(x_d_, T_, w_d_, y_d_); }
  Outputs result(Backend&, Arena& a) override {
    Outputs out;
    for (size_t i = 0; i < y_d_.size(); ++i) out.push_back({fmt::format("y{}", i), a.get(y_d_[i])});
    return out;
  }
  double bytes() const override {
    double b = 4.0 * T_ * n_in_;
    for (size_t i = 0; i < types_.size(); ++i)
      b += static_cast<double>(dtype_row_bytes(types_[i], n_in_)) * n_outs_[i] + 4.0 * T_ * n_outs_[i];
    return b;
  }
  double flops() const override {
    double f = 0.0;
    for (int64_t n : n_outs_) f += 2.0 * T_ * n_in_ * n;
    return f;
  }

 protected:
  void make_inputs() override {
    w_.clear();
    for (size_t i = 0; i < types_.size(); ++i) w_.push_back(make_matrix(types_[i], n_in_, n_outs_[i], seed() + 10 * i));
    x_ = normal_floats(static_cast<size_t>(T_ * n_in_), seed() + 1);
  }
  Outputs compute_reference() override {
    Outputs out;
    for (size_t i = 0; i < types_.size(); ++i) {
      Output y{fmt::format("y{}", i)};
      y.values.resize(static_cast<size_t>(T_ * n_outs_[i]));
      cpu::matmul_ref(x_.data(), T_, w_[i].view, y.values.data());
      std::vector<float> row(static_cast<size_t>(n_in_));
      double energy = 0.0;  // as MatmulCase
      for (int64_t j = 0; j < n_outs_[i]; ++j) {
        cpu::dequantize_row(types_[i], w_[i].view.row(j), row.data(), n_in_);
        for (int64_t t = 0; t < T_; ++t)
          for (int64_t k = 0; k < n_in_; ++k) {
            const double p = static_cast<double>(x_[t * n_in_ + k]) * row[k];
            energy += p * p;
          }
      }
      y.energy = energy;
      out.push_back(std::move(y));
    }
    return out;
  }
  void do_prepare(Backend& b, Arena& a) override {
    w_d_.clear();
    y_d_.clear();
    for (size_t i = 0; i < types_.size(); ++i) {
      w_d_.push_back(b.resident(w_[i].view));
      y_d_.push_back(a.output(static_cast<size_t>(T_ * n_outs_[i]), n_outs_[i]));
    }
    x_d_ = a.input(x_, n_in_);
  }
  void free_inputs() override { w_.clear(), x_ = {}; }

 private:
  std::vector<DType> types_;
  int64_t T_, n_in_;
  std::vector<int64_t> n_outs_;
  std::vector<HostMatrix> w_;
  std::vector<float> x_;
  std::vector<MatrixView> w_d_;
  std::vector<float*> y_d_;
  float* x_d_ = nullptr;
};

// out[i, :] = row ids[i] of a table of any dtype (embedding lookup).
class GetRowsCase final : public OpCase {
 public:
  GetRowsCase(DType type, int64_t n_in, int64_t n_rows, int64_t n_ids, Bound bound, Fill fill = Fill::Quantized,
              size_t pad_bytes = 0)
      : OpCase("get_rows", std::move(bound)), type_(type), n_in_(n_in), n_rows_(n_rows), n_ids_(n_ids), fill_(fill),
        pad_(pad_bytes) {}
  std::string shape() const override {
    return fmt::format("{} n_in={} rows={} ids={}{}{}", dtype_name(type_), n_in_, n_rows_, n_ids_,
                       fill_ == Fill::RandomCodes ? " random-codes" : "", pad_ ? fmt::format(" pad={}", pad_) : "");
  }
  void run(Backend& b) override { b.get_rows(table_d_, ids_d_, n_ids_, out_d_); }
  Outputs result(Backend&, Arena& a) override { return {{"rows", a.get(out_d_)}}; }
  double bytes() const override {
    return static_cast<double>(n_ids_) * (static_cast<double>(dtype_row_bytes(type_, n_in_)) + 4.0 * n_in_ + 4.0);
  }

 protected:
  void make_inputs() override {
    table_ = make_matrix(type_, n_in_, n_rows_, seed(), fill_, pad_);
    std::mt19937_64 rng(seed() + 1);
    ids_.resize(static_cast<size_t>(n_ids_));
    for (int32_t& id : ids_) id = static_cast<int32_t>(rng() % static_cast<uint64_t>(n_rows_));
    ids_[0] = static_cast<int32_t>(n_rows_ - 1);  // the last row, the first, and a repeat
    if (n_ids_ > 1) ids_[1] = 0;
    if (n_ids_ > 2) ids_[2] = ids_[0];
  }
  Outputs compute_reference() override {
    Output out{"rows"};
    out.values.resize(static_cast<size_t>(n_ids_ * n_in_));
    cpu::get_rows_ref(table_.view, ids_.data(), n_ids_, out.values.data());
    return {out};
  }
  void do_prepare(Backend& b, Arena& a) override {
    table_d_ = b.resident(table_.view);
    ids_d_ = a.plain(ids_);
    out_d_ = a.output(static_cast<size_t>(n_ids_ * n_in_), n_in_);
  }
  void free_inputs() override { table_ = {}, ids_ = {}; }

 private:
  DType type_;
  int64_t n_in_, n_rows_, n_ids_;
  Fill fill_;
  size_t pad_;
  HostMatrix table_;
  std::vector<int32_t> ids_;
  MatrixView table_d_;
  int32_t* ids_d_ = nullptr;
  float* out_d_ = nullptr;
};

// rms_norm and layer_norm over T rows of n; the weight (and bias) optional; out may be x.
class NormCase final : public OpCase {
 public:
  enum class Kind { Rms, Layer };
  NormCase(Kind kind, int64_t T, int64_t n, bool affine, bool in_place, Bound bound)
      : OpCase(kind == Kind::Rms ? "rms_norm" : "layer_norm", std::move(bound)), kind_(kind), T_(T), n_(n),
        affine_(affine), in_place_(in_place) {}
  std::string shape() const override {
    return fmt::format("T={} n={}{}{}", T_, n_, affine_ ? "" : " no-weight", in_place_ ? " in-place" : "");
  }
  void run(Backend& b) override {
    if (kind_ == Kind::Rms)
      b.rms_norm(x_d_, w_d_, out_d_, T_, n_, kEps);
    else
      b.layer_norm(x_d_, w_d_, b_d_, out_d_, T_, n_, kEps);
  }
  Outputs result(Backend&, Arena& a) override { return {{"out", a.get(out_d_)}}; }
  double bytes() const override { return 4.0 * (2.0 * T_ * n_ + (affine_ ? 2.0 * n_ : 0.0)); }
  double flops() const override { return (kind_ == Kind::Rms ? 4.0 : 7.0) * T_ * n_; }

 protected:
  void make_inputs() override {
    // Layer norm gets an offset, so that subtracting the mean matters.
    x_ = normal_floats(static_cast<size_t>(T_ * n_), seed(), 2.0f, kind_ == Kind::Layer ? 1.5f : 0.0f);
    w_ = normal_floats(static_cast<size_t>(n_), seed() + 1, 0.5f, 1.0f);
    bias_ = normal_floats(static_cast<size_t>(n_), seed() + 2, 0.5f);
  }
  Outputs compute_reference() override {
    Output out{"out"};
    out.values.resize(x_.size());
    if (kind_ == Kind::Rms)
      cpu::rms_norm_ref(x_.data(), affine_ ? w_.data() : nullptr, out.values.data(), T_, n_, kEps);
    else
      cpu::layer_norm_ref(x_.data(), affine_ ? w_.data() : nullptr, affine_ ? bias_.data() : nullptr,
                          out.values.data(), T_, n_, kEps);
    return {out};
  }
  void do_prepare(Backend& b, Arena& a) override {
    // Norm weights reach the ops as the transformer passes them: resident vectors.
    w_d_ = affine_ ? b.resident(core::VectorView{w_.data(), n_}).data : nullptr;
    b_d_ = affine_ ? b.resident(core::VectorView{bias_.data(), n_}).data : nullptr;
    x_d_ = in_place_ ? a.inout(x_, n_) : a.input(x_, n_);
    out_d_ = in_place_ ? x_d_ : a.output(x_.size(), n_);
  }
  void free_inputs() override { x_ = {}, w_ = {}, bias_ = {}; }

 private:
  static constexpr float kEps = 1e-5f;
  Kind kind_;
  int64_t T_, n_;
  bool affine_, in_place_;
  std::vector<float> x_, w_, bias_;
  const float *w_d_ = nullptr, *b_d_ = nullptr;
  float *x_d_ = nullptr, *out_d_ = nullptr;
};

// RoPE in place over [T, n_head * head_dim] at random positions up to max_pos. Dimensions at or
// beyond rope_dims must come back bit for bit (an exact output of their bit patterns).
// With factors (llama3's rope_freqs): per-pair divisors in [1, 8], passed in the op's memory;
// p's YaRN fields (ext_factor, corr_low/high) and attn_factor are used as given.
class RopeCase final : public OpCase {
 public:
  RopeCase(int64_t T, RopeParams p, int32_t max_pos, Bound bound, bool factors = false)
      : OpCase("rope", std::move(bound)), T_(T), p_(p), max_pos_(max_pos), with_factors_(factors) {}
  std::string shape() const override {
    std::string extra;
    if (with_factors_) extra += " freq-factors";
    if (p_.ext_factor != 0.0f)
      extra += fmt::format(" yarn ext={} corr=[{},{}]", p_.ext_factor, p_.corr_low, p_.corr_high);
    if (p_.attn_factor != 1.0f) extra += fmt::format(" attn_factor={}", p_.attn_factor);
    return fmt::format("T={} heads={} head_dim={} rope_dims={} {} base={} scale={} pos<={}{}", T_, p_.n_head,
                       p_.head_dim, p_.rope_dims, p_.pairing == RopePairing::Adjacent ? "adjacent" : "split-halves",
                       p_.freq_base, p_.freq_scale, max_pos_, extra);
  }
  void run(Backend& b) override {
    RopeParams p = p_;
    p.freq_factors = factors_d_;
    b.rope(x_d_, T_, pos_d_, p);
  }
  Outputs result(Backend&, Arena& a) override { return split(a.get(x_d_)); }
  double bytes() const override { return 8.0 * T_ * width() + 4.0 * T_; }
  double flops() const override { return 6.0 * T_ * p_.n_head * (p_.rope_dims / 2); }

 protected:
  void make_inputs() override {
    x_ = normal_floats(static_cast<size_t>(T_ * width()), seed());
    std::mt19937_64 rng(seed() + 1);
    pos_.resize(static_cast<size_t>(T_));
    for (int32_t& q : pos_) q = static_cast<int32_t>(rng() % static_cast<uint64_t>(max_pos_ + 1));
    pos_.back() = max_pos_;
    if (T_ > 1) pos_[0] = 0;  // angle 0: the identity
    factors_.clear();
    if (with_factors_) {  // llama3-like: 1 for high frequencies, up to 8 for low ones, a ramp between
      const int half = p_.rope_dims / 2;
      for (int i = 0; i < half; ++i)
        factors_.push_back(1.0f + 7.0f * std::clamp((static_cast<float>(i) - half / 3.0f) / (half / 3.0f + 1), 0.0f, 1.0f));
    }
  }
  Outputs compute_reference() override {
    std::vector<float> y = x_;
    RopeParams p = p_;
    p.freq_factors = with_factors_ ? factors_.data() : nullptr;
    cpu::rope_ref(y.data(), T_, pos_, p);
    return split(std::move(y));
  }
  void do_prepare(Backend&, Arena& a) override {
    x_d_ = a.inout(x_, width());
    pos_d_ = a.plain(pos_);
    factors_d_ = with_factors_ ? a.plain(factors_) : nullptr;
  }
  void free_inputs() override { x_ = {}, pos_ = {}, factors_ = {}; }

 private:
  int64_t width() const { return int64_t{p_.n_head} * p_.head_dim; }
  // The rotated values, and the bit patterns of the dimensions rope must not touch.
  Outputs split(std::vector<float> y) const {
    Outputs out{{"x", std::move(y)}};
    if (p_.rope_dims < p_.head_dim) {
      Output bits{"dims >= rope_dims (bits)"};
      for (size_t i = 0; i < out[0].values.size(); ++i)
        if (static_cast<int>(i % p_.head_dim) >= p_.rope_dims) {
          int32_t v;
          std::memcpy(&v, &out[0].values[i], 4);
          bits.ids.push_back(v);
        }
      out.push_back(std::move(bits));
    }
    return out;
  }
  int64_t T_;
  RopeParams p_;
  int32_t max_pos_;
  bool with_factors_;
  std::vector<float> x_, factors_;
  std::vector<int32_t> pos_;
  float* x_d_ = nullptr;
  const float* factors_d_ = nullptr;
  int32_t* pos_d_ = nullptr;
};

// KV cache rows of `type` made from float rows: row r of `rows` holds the first n of the
// `stride` floats at src + r * stride, converted by quantize_row (the bytes the forward's
// convert_rows stores), then the bit patterns of the remaining stride - n floats (padding a view
// may skip over). Kept in floats so the harness's guarded buffers can hold them.
struct KVRows {
  std::vector<float> store;
  size_t pitch = 0;  // bytes between rows
  const void* data() const { return store.data(); }
};
inline KVRows make_kv_rows(DType type, const std::vector<float>& src, int64_t rows, int64_t n, int64_t stride) {
  KVRows out;
  out.pitch = dtype_row_bytes(type, n) + static_cast<size_t>(stride - n) * sizeof(float);
  out.store.assign((rows * out.pitch + 3) / 4, 0.0f);
  auto* bytes = reinterpret_cast<uint8_t*>(out.store.data());
  for (int64_t r = 0; r < rows; ++r) {
    uint8_t* row = bytes + r * out.pitch;
    cpu::quantize_row(type, src.data() + r * stride, row, n);
    std::memcpy(row + dtype_row_bytes(type, n), src.data() + r * stride + n, static_cast<size_t>(stride - n) * sizeof(float));
  }
  return out;
}

// Attention of T new tokens over n_past cached rows plus themselves (KV rows of kv_dim elements
// of the key / value types, pad floats' worth of bytes apart beyond the row): causal (no mask),
// an explicit tree mask (each token sees its ancestors and itself), or a tree whose last token
// sees no new token (with n_past = 0 and no window reaching the cache: nothing, a zero output).
// With a window or chunks, cached row r is at position r and new token j at n_past + its depth (its
// index for a causal batch), as the forward sets them.
struct AttentionKv {  // key / value row types, the sliding window, sinks and ALiBi of an AttentionCase
  DType k = DType::F32, v = DType::F32;
  int window = 0;
  bool sinks = false;  // a learned sink logit per head (gpt-oss), N(0, 2): some above the scores
  float alibi = 0.0f;  // ALiBi's maximum bias (bloom: 8): slopes of alibi_slope; 0 = none
  int chunk = 0;       // chunked attention (llama4's local layers): keys before the query's chunk hidden
};
class AttentionCase final : public OpCase {
 public:
  // Tree: a random tree of the new tokens; Blind: the last token sees nothing; CachedTree: a tree
  // whose first nodes are the cache's last rows (KVView::mask_past: a tree drafted level by level);
  // Bidirectional: every new token sees every other, later ones too (a DFlash block).
  enum class Mask { Causal, Tree, Blind, CachedTree, Bidirectional };
  using Kv = AttentionKv;
  AttentionCase(int n_head, int n_head_kv, int head_dim, int64_t n_past, int64_t T, int64_t pad, Mask mask,
                Bound bound, Kv kv = {})
      : OpCase("attention", std::move(bound)), p_{n_head, n_head_kv, head_dim, 1.0f / std::sqrt(float(head_dim)), kv.window},
        n_past_(n_past), T_(T), pad_(pad), mask_(mask), kt_(kv.k), vt_(kv.v), with_sinks_(kv.sinks) {
    p_.chunk = kv.chunk;
    for (int h = 0; kv.alibi > 0.0f && h < n_head; ++h) slopes_.push_back(kernels::alibi_slope(n_head, kv.alibi, h));
    alibi_ = kv.alibi;
  }
  std::string shape() const override {
    static const char* names[] = {"causal", "tree", "tree+blind", "tree over cached rows", "bidirectional"};
    std::string types = kt_ == DType::F32 && vt_ == DType::F32
                            ? std::string()
                            : fmt::format(" K={} V={}", dtype_name(kt_), dtype_name(vt_));
    return fmt::format("heads={}/{} head_dim={} n_past={} T={}{} {}{}{}{}{}{}", p_.n_head, p_.n_head_kv, p_.head_dim,
                       n_past_, T_, pad_ ? fmt::format(" pad={}", pad_) : "", names[static_cast<int>(mask_)], types,
                       p_.window ? fmt::format(" window={}", p_.window) : "",
                       p_.chunk ? fmt::format(" chunk={}", p_.chunk) : "", with_sinks_ ? " sinks" : "",
                       alibi_ > 0.0f ? fmt::format(" alibi={}", alibi_) : "");
  }
  void run(Backend& b) override {
    AttentionParams p = p_;
    p.sinks = with_sinks_ ? sinks_d_ : nullptr;
    p.alibi_slopes = slopes_.empty() ? nullptr : slopes_d_;
    b.attention(q_d_, T_, view(k_d_, v_d_, pos_d_), mask_ == Mask::Causal ? nullptr : mask_d_, p, out_d_);
  }
  Outputs result(Backend&, Arena& a) override { return {{"out", a.get(out_d_)}}; }
  double bytes() const override {
    return 8.0 * T_ * q_width() + static_cast<double>(n_past_ + T_) * (k_.pitch + v_.pitch) + T_ * (mask_past() + T_);
  }
  double flops() const override { return 4.0 * T_ * p_.n_head * p_.head_dim * (n_past_ + T_); }

 protected:
  void make_inputs() override {
    const int64_t rows = n_past_ + T_;
    q_ = normal_floats(static_cast<size_t>(T_ * q_width()), seed());
    sinks_ = normal_floats(static_cast<size_t>(p_.n_head), seed() + 4, 2.0f);
    k_ = make_kv_rows(kt_, normal_floats(static_cast<size_t>(rows * stride()), seed() + 1), rows, kv_dim(), stride());
    v_ = make_kv_rows(vt_, normal_floats(static_cast<size_t>(rows * stride()), seed() + 2), rows, kv_dim(), stride());
    // The tree's nodes: the cache's last M rows (CachedTree), then the new tokens.
    const int64_t M = mask_past(), N = M + T_, first = n_past_ - M;
    mask_bytes_.assign(static_cast<size_t>(T_ * N), 0);
    std::mt19937_64 rng(seed() + 3);
    std::vector<int64_t> parent(static_cast<size_t>(N), -1);  // -1: a child of the committed prefix
    for (int64_t i = 1; i < N; ++i) parent[i] = static_cast<int64_t>(rng() % static_cast<uint64_t>(i + 1)) - 1;
    for (int64_t i = 0; i < T_; ++i)
      for (int64_t j = M + i; j >= 0; j = parent[j]) mask_bytes_[i * N + j] = 1;
    if (mask_ == Mask::Blind)
      for (int64_t j = 0; j < T_; ++j) mask_bytes_[(T_ - 1) * T_ + j] = 0;
    if (mask_ == Mask::Bidirectional) std::fill(mask_bytes_.begin(), mask_bytes_.end(), uint8_t{1});
    positions_.resize(static_cast<size_t>(rows));
    for (int64_t r = 0; r < first; ++r) positions_[r] = static_cast<int32_t>(r);
    for (int64_t j = 0; j < N; ++j) {
      int64_t depth = 0;
      if (mask_ == Mask::Causal || mask_ == Mask::Bidirectional) depth = j;
      else for (int64_t a = parent[j]; a >= 0; a = parent[a]) ++depth;
      positions_[first + j] = static_cast<int32_t>(first + depth);
    }
  }
  Outputs compute_reference() override {
    Output out{"out"};
    out.values.resize(q_.size());
    AttentionParams p = p_;
    p.sinks = with_sinks_ ? sinks_.data() : nullptr;
    p.alibi_slopes = slopes_.empty() ? nullptr : slopes_.data();
    cpu::attention_ref(q_.data(), T_, view(k_.data(), v_.data(), positions_.data()),
                       mask_ == Mask::Causal ? nullptr : mask_bytes_.data(), p, out.values.data());
    return {out};
  }
  void do_prepare(Backend&, Arena& a) override {
    q_d_ = a.input(q_, q_width());
    // Guards after the last row: reading past n_past + T reads NaN (sentinel bytes decode to NaN
    // halves and NaN Q8_0 scales too).
    k_d_ = a.input(k_.store, static_cast<int64_t>(k_.pitch / 4 + 1));
    v_d_ = a.input(v_.store, static_cast<int64_t>(v_.pitch / 4 + 1));
    mask_d_ = a.plain(mask_bytes_);
    pos_d_ = a.plain(positions_);
    sinks_d_ = a.input(sinks_, p_.n_head);
    if (!slopes_.empty()) slopes_d_ = a.input(slopes_, p_.n_head);
    out_d_ = a.output(q_.size(), q_width());
  }
  void free_inputs() override { q_ = {}, k_ = {}, v_ = {}, mask_bytes_ = {}, positions_ = {}, sinks_ = {}; }

 private:
  KVView view(const void* k, const void* v, const int32_t* positions) const {
    KVView kv;
    kv.k = k, kv.v = v;
    kv.k_row_bytes = k_.pitch, kv.v_row_bytes = v_.pitch;
    kv.k_type = kt_, kv.v_type = vt_;
    kv.n_past = n_past_;
    kv.mask_past = mask_past();
    kv.positions = p_.window > 0 || p_.chunk > 0 || alibi_ > 0.0f ? positions : nullptr;
    return kv;
  }
  int64_t mask_past() const { return mask_ == Mask::CachedTree ? std::min<int64_t>(n_past_, 5) : 0; }
  int64_t q_width() const { return int64_t{p_.n_head} * p_.head_dim; }
  int64_t kv_dim() const { return int64_t{p_.n_head_kv} * p_.head_dim; }
  int64_t stride() const { return kv_dim() + pad_; }
  AttentionParams p_;
  int64_t n_past_, T_, pad_;
  Mask mask_;
  DType kt_, vt_;
  bool with_sinks_;
  float alibi_ = 0.0f;
  std::vector<float> q_, sinks_, slopes_;
  KVRows k_, v_;
  std::vector<uint8_t> mask_bytes_;
  std::vector<int32_t> positions_;
  float *q_d_ = nullptr, *k_d_ = nullptr, *v_d_ = nullptr, *out_d_ = nullptr, *sinks_d_ = nullptr, *slopes_d_ = nullptr;
  uint8_t* mask_d_ = nullptr;
  int32_t* pos_d_ = nullptr;
};

// convert_rows: `rows` rows of n floats into rows of `type` (F32, F16, Q8_0) pad bytes apart
// beyond the row, as the forward stores new keys and values. The whole output buffer must equal
// the reference's bytes (kernels/cpu quantize_row per row), the padding between rows untouched
// (it keeps the sentinel). Inputs of more than one row include an all-zero block (Q8_0's d = 0),
// a value beyond the half range (Inf in F16) and a tie between two halves (rounds to even).
class ConvertRowsCase final : public OpCase {
 public:
  ConvertRowsCase(DType type, int64_t rows, int64_t n, size_t pad, Bound bound)
      : OpCase("convert_rows", std::move(bound)), type_(type), rows_(rows), n_(n), pad_(pad) {}
  std::string shape() const override {
    return fmt::format("{} rows={} n={}{}", dtype_name(type_), rows_, n_, pad_ ? fmt::format(" pad={}", pad_) : "");
  }
  void run(Backend& b) override { b.convert_rows(x_d_, rows_, n_, type_, out_d_, pitch()); }
  Outputs result(Backend&, Arena& a) override { return outputs(a.get(out_d_)); }
  double bytes() const override { return 4.0 * rows_ * n_ + static_cast<double>(rows_) * dtype_row_bytes(type_, n_); }

 protected:
  void make_inputs() override {
    x_ = normal_floats(static_cast<size_t>(rows_ * n_), seed(), 2.0f);
    if (rows_ > 1) {
      for (int64_t i = 0; i < std::min<int64_t>(n_, 32); ++i) x_[(rows_ - 1) * n_ + i] = 0.0f;  // last row's first block
      x_[n_] = 1.0f + 1.0f / 2048.0f;  // halfway between the halves 1 and 1 + 2^-10
      if (n_ > 1) x_[n_ + 1] = 7.0e4f;  // above 65504: Inf as a half
    }
  }
  Outputs compute_reference() override {
    std::vector<float> buf(words(), sentinel());
    for (int64_t r = 0; r < rows_; ++r)
      cpu::quantize_row(type_, x_.data() + r * n_, reinterpret_cast<uint8_t*>(buf.data()) + r * pitch(), n_);
    return outputs(buf);
  }
  void do_prepare(Backend&, Arena& a) override {
    x_d_ = a.input(x_, n_);
    out_d_ = a.output(words(), static_cast<int64_t>(pitch() / 4 + 1));
  }
  void free_inputs() override { x_ = {}; }

 private:
  size_t pitch() const { return dtype_row_bytes(type_, n_) + pad_; }
  size_t words() const { return (rows_ * pitch() + 3) / 4; }
  static float sentinel() {
    float f;
    std::memcpy(&f, &kSentinelBits, 4);
    return f;
  }
  // The bytes (as 32-bit words, exact) and the rows dequantized (finite and non-zero checks).
  Outputs outputs(const std::vector<float>& buf) const {
    Output bytes{"bytes"};
    bytes.ids.resize(buf.size());
    std::memcpy(bytes.ids.data(), buf.data(), buf.size() * 4);
    Output rows{"dequantized"};
    rows.values.resize(static_cast<size_t>(rows_ * n_));
    for (int64_t r = 0; r < rows_; ++r)
      cpu::dequantize_row(type_, reinterpret_cast<const uint8_t*>(buf.data()) + r * pitch(), rows.values.data() + r * n_, n_);
    return {bytes, rows};
  }
  DType type_;
  int64_t rows_, n_;
  size_t pad_;
  std::vector<float> x_;
  float *x_d_ = nullptr, *out_d_ = nullptr;
};

// The element-wise ops over T rows of n: swiglu, gelu, add, mul, scale (by kScale) and softcap
// (cap kCap, where inputs of sd 3 reach the saturating part of tanh) on T * n elements, the output
// may alias the first input; add_bias (in place, the bias broadcast over the T rows).

// Multi-head latent attention in its absorbed form (deepseek2): T new tokens of n_head queries of
// kv_lora_rank + rope_dims over n_past cached latent rows plus the new ones (rows padded by pad
// floats), causal or by a tree mask, optionally within a sliding window over the rows' positions.
class MlaAttentionCase final : public OpCase {
 public:
  using Mask = AttentionCase::Mask;
  MlaAttentionCase(int n_head, int kv_lora_rank, int rope_dims, int64_t n_past, int64_t T, int64_t pad, Mask mask,
                   int window, Bound bound)
      : OpCase("mla_attention", std::move(bound)),
        p_{n_head, kv_lora_rank, rope_dims, 1.0f / std::sqrt(float(kv_lora_rank + rope_dims)), window},
        n_past_(n_past), T_(T), pad_(pad), mask_(mask) {}
  std::string shape() const override {
    static const char* names[] = {"causal", "tree", "tree+blind", "tree over cached rows"};
    return fmt::format("heads={} rank={} rope={} n_past={} T={}{}{} {}", p_.n_head, p_.kv_lora_rank, p_.rope_dims,
                       n_past_, T_, pad_ ? fmt::format(" pad={}", pad_) : "",
                       p_.window ? fmt::format(" window={}", p_.window) : "", names[static_cast<int>(mask_)]);
  }
  void run(Backend& b) override {
    b.mla_attention(q_d_, T_, view(rows_d_, pos_d_), mask_ == Mask::Causal ? nullptr : mask_d_, p_, out_d_);
  }
  Outputs result(Backend&, Arena& a) override { return {{"out", a.get(out_d_)}}; }
  double bytes() const override {
    return 4.0 * (T_ * p_.n_head * (p_.row_width() + p_.kv_lora_rank) + (n_past_ + T_) * p_.row_width()) + T_ * T_;
  }
  double flops() const override {
    return 2.0 * T_ * p_.n_head * (p_.row_width() + p_.kv_lora_rank) * (n_past_ + T_);
  }

 protected:
  void make_inputs() override {
    q_ = normal_floats(static_cast<size_t>(T_ * p_.n_head * p_.row_width()), seed());
    rows_ = normal_floats(static_cast<size_t>((n_past_ + T_) * stride()), seed() + 1);
    // The tree's nodes: the cache's last M rows (CachedTree), then the new tokens.
    const int64_t M = mask_past(), N = M + T_, first = n_past_ - M;
    mask_bytes_.assign(static_cast<size_t>(T_ * N), 0);
    std::mt19937_64 rng(seed() + 3);
    std::vector<int64_t> parent(static_cast<size_t>(N), -1);
    for (int64_t i = 1; i < N; ++i) parent[i] = static_cast<int64_t>(rng() % static_cast<uint64_t>(i + 1)) - 1;
    std::vector<int32_t> depth(static_cast<size_t>(N), 0);
    for (int64_t i = 0; i < N; ++i)
      depth[i] = mask_ == Mask::Causal ? static_cast<int32_t>(i) : parent[i] < 0 ? 0 : depth[parent[i]] + 1;
    for (int64_t i = 0; i < T_; ++i)
      for (int64_t j = M + i; j >= 0; j = parent[j]) mask_bytes_[i * N + j] = 1;
    if (mask_ == Mask::Blind)
      for (int64_t j = 0; j < T_; ++j) mask_bytes_[(T_ - 1) * T_ + j] = 0;
    // Positions: the cache 0..first-1, a tree node at first + its depth (a tree's siblings share one).
    positions_.resize(static_cast<size_t>(n_past_ + T_));
    for (int64_t r = 0; r < first; ++r) positions_[r] = static_cast<int32_t>(r);
    for (int64_t i = 0; i < N; ++i) positions_[first + i] = static_cast<int32_t>(first) + depth[i];
  }
  Outputs compute_reference() override {
    Output out{"out"};
    out.values.resize(static_cast<size_t>(T_ * p_.n_head * p_.kv_lora_rank));
    cpu::mla_attention_ref(q_.data(), T_, view(rows_.data(), positions_.data()),
                           mask_ == Mask::Causal ? nullptr : mask_bytes_.data(), p_, out.values.data());
    return {out};
  }
  void do_prepare(Backend&, Arena& a) override {
    q_d_ = a.input(q_, p_.row_width());
    rows_d_ = a.input(rows_, stride());  // guards after the last row: reading past n_past + T reads NaN
    mask_d_ = a.plain(mask_bytes_);
    pos_d_ = a.plain(positions_);
    out_d_ = a.output(static_cast<size_t>(T_ * p_.n_head * p_.kv_lora_rank), p_.kv_lora_rank);
  }
  void free_inputs() override { q_ = {}, rows_ = {}, mask_bytes_ = {}, positions_ = {}; }

 private:
  int64_t stride() const { return p_.row_width() + pad_; }
  int64_t mask_past() const { return mask_ == Mask::CachedTree ? std::min<int64_t>(n_past_, 5) : 0; }
  MlaKVView view(const float* rows, const int32_t* positions) const {
    return MlaKVView{rows, stride(), n_past_, p_.window > 0 ? positions : nullptr, mask_past()};
  }
  MlaAttentionParams p_;
  int64_t n_past_, T_, pad_;
  Mask mask_;
  std::vector<float> q_, rows_;
  std::vector<uint8_t> mask_bytes_;
  std::vector<int32_t> positions_;
  float *q_d_ = nullptr, *rows_d_ = nullptr, *out_d_ = nullptr;
  uint8_t* mask_d_ = nullptr;
  int32_t* pos_d_ = nullptr;
};

// The element-wise ops over T rows of n: swiglu, gelu and add (on T * n elements; the output may
// alias the first input) and add_bias (in place, the bias broadcast over the T rows).
class ElementwiseCase final : public OpCase {
 public:
  enum class Kind { Swiglu, Gelu, Add, AddBias, Mul, Scale, Softcap, ReluSqr, Clamp, SigmoidMul, XIelu };
  static constexpr float kScale = 0.7f, kCap = 5.0f, kClamp = 2.5f;  // clamp: about 1 in 3 of N(0, 9) clipped
  // xIELU's mapped scalars as Apertus-8B's first layer has them (about: alpha_n, alpha_p near 0.8,
  // beta 0.5, eps -1e-6): both sides of zero are taken.
  static constexpr kernels::XIeluParams kXIelu{1.3f, 0.8f, 0.5f, -1e-6f};
  // group: sigmoid_mul's run of elements sharing one gate (1: elementwise; n a multiple of it).
  ElementwiseCase(Kind kind, int64_t T, int64_t n, bool alias, Bound bound, int64_t group = 1)
      : OpCase(op_name(kind), std::move(bound)), kind_(kind), T_(T), n_(n), group_(group),
        alias_(alias || kind == Kind::AddBias) {}
  std::string shape() const override {
    return fmt::format("T={} n={}{}{}", T_, n_, group_ > 1 ? fmt::format(" group={}", group_) : "",
                       alias_ && kind_ != Kind::AddBias ? " in-place" : "");
  }
  void run(Backend& b) override {
    const int64_t total = T_ * n_;
    switch (kind_) {
      case Kind::Swiglu: b.swiglu(a_d_, b_d_, out_d_, total); break;
      case Kind::Gelu: b.gelu(a_d_, out_d_, total); break;
      case Kind::Add: b.add(a_d_, b_d_, out_d_, total); break;
      case Kind::AddBias: b.add_bias(out_d_, b_d_, T_, n_); break;
      case Kind::Mul: b.mul(a_d_, b_d_, out_d_, total); break;
      case Kind::Scale: b.scale(a_d_, kScale, out_d_, total); break;
      case Kind::Softcap: b.softcap(a_d_, kCap, out_d_, total); break;
      case Kind::ReluSqr: b.relu_sqr(a_d_, out_d_, total); break;
      case Kind::Clamp: b.clamp(a_d_, kClamp, out_d_, total); break;
      case Kind::SigmoidMul: b.sigmoid_mul(b_d_, a_d_, out_d_, total, group_); break;  // a * sigmoid(b)
      case Kind::XIelu: b.xielu(a_d_, out_d_, total, kXIelu); break;
    }
  }
  Outputs result(Backend&, Arena& a) override { return {{"out", a.get(out_d_)}}; }
  double bytes() const override {
    const double total = static_cast<double>(T_) * n_;
    switch (kind_) {
      case Kind::Gelu: case Kind::Scale: case Kind::Softcap: case Kind::ReluSqr: case Kind::Clamp: case Kind::XIelu:
        return 8.0 * total;
      case Kind::AddBias: return 8.0 * total + 4.0 * n_;
      default: return 12.0 * total;
    }
  }
  double flops() const override {
    const bool heavy = kind_ == Kind::Swiglu || kind_ == Kind::Gelu || kind_ == Kind::Softcap || kind_ == Kind::SigmoidMul ||
                       kind_ == Kind::XIelu;
    return static_cast<double>(T_) * n_ * (heavy ? 8 : 1);
  }

 protected:
  void make_inputs() override {
    const size_t total = static_cast<size_t>(T_ * n_);
    a_ = normal_floats(total, seed(), 3.0f);
    b_ = normal_floats(kind_ == Kind::AddBias ? static_cast<size_t>(n_) : total / static_cast<size_t>(group_), seed() + 1,
                       3.0f);
  }
  Outputs compute_reference() override {
    Output out{"out"};
    out.values.resize(a_.size());
    const int64_t total = T_ * n_;
    switch (kind_) {
      case Kind::Swiglu: cpu::swiglu_ref(a_.data(), b_.data(), out.values.data(), total); break;
      case Kind::Gelu: cpu::gelu_ref(a_.data(), out.values.data(), total); break;
      case Kind::Add: cpu::add(a_.data(), b_.data(), out.values.data(), total); break;  // its own reference
      case Kind::AddBias:  // its own reference
        out.values = a_;
        cpu::add_bias(out.values.data(), b_.data(), T_, n_);
        break;
      case Kind::Mul: cpu::mul(a_.data(), b_.data(), out.values.data(), total); break;  // its own reference
      case Kind::Scale: cpu::scale(a_.data(), kScale, out.values.data(), total); break;  // its own reference
      case Kind::Softcap: cpu::softcap_ref(a_.data(), kCap, out.values.data(), total); break;
      case Kind::ReluSqr: cpu::relu_sqr_ref(a_.data(), out.values.data(), total); break;
      case Kind::Clamp: cpu::clamp_ref(a_.data(), kClamp, out.values.data(), total); break;
      case Kind::SigmoidMul: cpu::sigmoid_mul_ref(b_.data(), a_.data(), out.values.data(), total, group_); break;
      case Kind::XIelu: cpu::xielu_ref(a_.data(), out.values.data(), total, kXIelu); break;
    }
    return {out};
  }
  void do_prepare(Backend&, Arena& a) override {
    a_d_ = alias_ ? a.inout(a_, n_) : a.input(a_, n_);
    const bool unary = kind_ == Kind::Gelu || kind_ == Kind::Scale || kind_ == Kind::Softcap || kind_ == Kind::ReluSqr ||
                       kind_ == Kind::Clamp || kind_ == Kind::XIelu;
    b_d_ = unary ? nullptr : a.input(b_, n_ / group_);
    out_d_ = alias_ ? a_d_ : a.output(a_.size(), n_);
  }
  void free_inputs() override { a_ = {}, b_ = {}; }

 private:
  static const char* op_name(Kind k) {
    switch (k) {
      case Kind::Swiglu: return "swiglu";
      case Kind::Gelu: return "gelu";
      case Kind::Add: return "add";
      case Kind::AddBias: return "add_bias";
      case Kind::Mul: return "mul";
      case Kind::Scale: return "scale";
      case Kind::Softcap: return "softcap";
      case Kind::ReluSqr: return "relu_sqr";
      case Kind::Clamp: return "clamp";
      case Kind::SigmoidMul: return "sigmoid_mul";
      case Kind::XIelu: return "xielu";
    }
    return "?";
  }
  Kind kind_;
  int64_t T_, n_, group_;
  bool alias_;
  std::vector<float> a_, b_;
  float *a_d_ = nullptr, *b_d_ = nullptr, *out_d_ = nullptr;
};

// lfm2's short causal convolution: T new tokens of `width` channels over n_past cached rows plus
// their own (rows padded by pad floats in the view: none, the rows are contiguous), n_taps taps.
// The new tokens form a random tree over the cache (token i's parent a new token before it or the
// cache's last row), so prev mixes cached rows, earlier new rows and -1 (the sequence's start,
// when the path is shorter than the filter).
class ShortConvCase final : public OpCase {
 public:
  ShortConvCase(int64_t T, int64_t n_past, int64_t width, int n_taps, Bound bound)
      : OpCase("short_conv", std::move(bound)), T_(T), n_past_(n_past), width_(width), taps_(n_taps) {}
  std::string shape() const override {
    return fmt::format("T={} n_past={} width={} taps={}", T_, n_past_, width_, taps_);
  }
  void run(Backend& b) override { b.short_conv(rows_d_, prev_d_, T_, n_past_, width_, taps_, w_d_, out_d_); }
  Outputs result(Backend&, Arena& a) override { return {{"out", a.get(out_d_)}}; }
  double bytes() const override { return 4.0 * (static_cast<double>(T_) * width_ * (taps_ + 1) + width_ * taps_); }
  double flops() const override { return 2.0 * static_cast<double>(T_) * width_ * taps_; }

 protected:
  void make_inputs() override {
    rows_ = normal_floats(static_cast<size_t>((n_past_ + T_) * width_), seed());
    w_ = normal_floats(static_cast<size_t>(width_ * taps_), seed() + 1, 0.6f);
    std::mt19937_64 rng(seed() + 2);
    const int P = taps_ - 1;
    prev_.assign(static_cast<size_t>(T_ * P), -1);
    std::vector<int64_t> parent(static_cast<size_t>(T_));
    for (int64_t i = 0; i < T_; ++i) {
      parent[i] = i == 0 ? -1 : static_cast<int64_t>(rng() % static_cast<uint64_t>(i + 1)) - 1;  // -1: the cache's tail
      int k = P - 1;
      for (int64_t j = parent[i]; j >= 0 && k >= 0; j = parent[j]) prev_[i * P + k--] = static_cast<int32_t>(n_past_ + j);
      for (int64_t r = n_past_ - 1; r >= 0 && k >= 0; --r) prev_[i * P + k--] = static_cast<int32_t>(r);
    }
  }
  Outputs compute_reference() override {
    Output out{"out"};
    out.values.resize(static_cast<size_t>(T_ * width_));
    cpu::short_conv_ref(rows_.data(), prev_.data(), T_, n_past_, width_, taps_, w_.data(), out.values.data());
    return {out};
  }
  void do_prepare(Backend&, Arena& a) override {
    rows_d_ = a.input(rows_, width_);
    w_d_ = a.input(w_, taps_);
    prev_d_ = a.plain(prev_);
    out_d_ = a.output(static_cast<size_t>(T_ * width_), width_);
  }
  void free_inputs() override { rows_ = {}, w_ = {}, prev_ = {}; }

 private:
  int64_t T_, n_past_, width_;
  int taps_;
  std::vector<float> rows_, w_;
  std::vector<int32_t> prev_;
  float *rows_d_ = nullptr, *w_d_ = nullptr, *out_d_ = nullptr;
  int32_t* prev_d_ = nullptr;
};

// A gated DeltaNet layer's recurrence (Qwen3.5): T new tokens over a ring of state slots. Slots
// 0 .. n_cached - 1 hold random earlier states (a conv tail of unit scale, matrices of the scale a
// decayed state has); the new tokens form a random tree: token i continues the state of an
// earlier new token, of a cached slot, or of nothing (-1, the sequence's start), and writes slot
// n_cached + i. The output and the whole ring afterwards are compared.
class DeltaNetCase final : public OpCase {
 public:
  DeltaNetCase(int64_t T, int n_cached, DeltaNetParams p, Bound bound)
      : OpCase("delta_net", std::move(bound)), T_(T), n_cached_(n_cached), p_(p) {}
  std::string shape() const override {
    return fmt::format("T={} cached={} heads={}/{}{} dim={} conv={}", T_, n_cached_, p_.n_k_heads, p_.n_v_heads,
                       p_.kv_interleaved ? " interleaved" : "", p_.head_dim, p_.d_conv);
  }
  void run(Backend& b) override {
    b.delta_net(qkv_d_, alpha_d_, beta_d_, conv_d_, dt_d_, a_d_, states_d_, slots_d_, T_, p_, out_d_);
  }
  Outputs result(Backend&, Arena& a) override { return {{"out", a.get(out_d_)}, {"states", a.get(states_d_)}}; }
  double bytes() const override {
    return 4.0 * static_cast<double>(T_) * (2.0 * p_.state_floats() + p_.conv_dim() + p_.value_dim());
  }
  double flops() const override { return 8.0 * static_cast<double>(T_) * p_.n_v_heads * p_.head_dim * p_.head_dim; }

 protected:
  void make_inputs() override {
    const int64_t C = p_.conv_dim(), H = p_.n_v_heads, F = p_.state_floats();
    qkv_ = normal_floats(static_cast<size_t>(T_ * C), seed());
    alpha_ = normal_floats(static_cast<size_t>(T_ * H), seed() + 1);
    beta_ = normal_floats(static_cast<size_t>(T_ * H), seed() + 2, 2.0f);
    conv_ = normal_floats(static_cast<size_t>(C * p_.d_conv), seed() + 3, 0.6f);
    dt_ = normal_floats(static_cast<size_t>(H), seed() + 4, 0.5f);
    a_ = normal_floats(static_cast<size_t>(H), seed() + 5, 0.5f);
    for (float& x : a_) x = -std::exp(x);
    states_ = normal_floats(static_cast<size_t>((n_cached_ + T_) * F), seed() + 6, 0.3f);
    std::mt19937_64 rng(seed() + 7);
    slots_.resize(static_cast<size_t>(2 * T_));
    for (int64_t i = 0; i < T_; ++i) {
      const int64_t choices = i + n_cached_ + 1;  // an earlier new token, a cached slot or none
      const int64_t r = static_cast<int64_t>(rng() % static_cast<uint64_t>(choices));
      slots_[2 * i] = static_cast<int32_t>(r == 0 ? -1 : r - 1 < n_cached_ ? r - 1 : n_cached_ + (r - 1 - n_cached_));
      slots_[2 * i + 1] = static_cast<int32_t>(n_cached_ + i);
    }
  }
  Outputs compute_reference() override {
    Output out{"out"}, st{"states"};
    out.values.resize(static_cast<size_t>(T_ * p_.value_dim()));
    st.values = states_;
    cpu::delta_net_ref(qkv_.data(), alpha_.data(), beta_.data(), conv_.data(), dt_.data(), a_.data(), st.values.data(),
                       slots_.data(), T_, p_, out.values.data());
    return {out, st};
  }
  void do_prepare(Backend&, Arena& a) override {
    qkv_d_ = a.input(qkv_, p_.conv_dim());
    alpha_d_ = a.input(alpha_, p_.n_v_heads);
    beta_d_ = a.input(beta_, p_.n_v_heads);
    conv_d_ = a.input(conv_, p_.d_conv);
    dt_d_ = a.input(dt_, p_.n_v_heads);
    a_d_ = a.input(a_, p_.n_v_heads);
    states_d_ = a.inout(states_, p_.head_dim);
    slots_d_ = a.plain(slots_);
    out_d_ = a.output(static_cast<size_t>(T_ * p_.value_dim()), p_.head_dim);
  }
  void free_inputs() override { qkv_ = {}, alpha_ = {}, beta_ = {}, conv_ = {}, dt_ = {}, a_ = {}, states_ = {}; }

 private:
  int64_t T_;
  int n_cached_;
  DeltaNetParams p_;
  std::vector<float> qkv_, alpha_, beta_, conv_, dt_, a_, states_;
  std::vector<int32_t> slots_;
  float *qkv_d_ = nullptr, *alpha_d_ = nullptr, *beta_d_ = nullptr, *conv_d_ = nullptr, *dt_d_ = nullptr,
        *a_d_ = nullptr, *states_d_ = nullptr, *out_d_ = nullptr;
  int32_t* slots_d_ = nullptr;
};

// A Mamba-2 mixer (granitehybrid) over a ring of state slots, as DeltaNetCase: random cached states,
// a random tree of new tokens; with and without the convolution's bias and the grouped norm. The
// output, the convolution's scratch and the whole ring afterwards are compared.
class Mamba2Case final : public OpCase {
 public:
  Mamba2Case(int64_t T, int n_cached, Mamba2Params p, bool bias, bool norm, Bound bound)
      : OpCase("mamba2", std::move(bound)), T_(T), n_cached_(n_cached), p_(p), bias_(bias), norm_(norm) {}
  std::string shape() const override {
    return fmt::format("T={} cached={} heads={}x{} state={} groups={} conv={}{}{}", T_, n_cached_, p_.n_head,
                       p_.head_dim, p_.d_state, p_.n_group, p_.d_conv, bias_ ? " bias" : "", norm_ ? " norm" : "");
  }
  void run(Backend& b) override {
    b.mamba2(in_d_, conv_d_, bias_ ? convb_d_ : nullptr, dt_d_, a_d_, dd_d_, norm_ ? norm_d_ : nullptr, states_d_,
             slots_d_, T_, p_, xbc_d_, out_d_);
  }
  Outputs result(Backend&, Arena& a) override {
    return {{"out", a.get(out_d_)}, {"xbc", a.get(xbc_d_)}, {"states", a.get(states_d_)}};
  }
  double bytes() const override {
    return 4.0 * static_cast<double>(T_) * (2.0 * p_.state_floats() + p_.in_proj() + p_.d_inner());
  }
  double flops() const override { return 6.0 * static_cast<double>(T_) * p_.d_inner() * p_.d_state; }

 protected:
  void make_inputs() override {
    const int64_t H = p_.n_head, F = p_.state_floats();
    in_ = normal_floats(static_cast<size_t>(T_ * p_.in_proj()), seed());
    conv_ = normal_floats(static_cast<size_t>(p_.conv_dim() * p_.d_conv), seed() + 1, 0.6f);
    convb_ = normal_floats(static_cast<size_t>(p_.conv_dim()), seed() + 2, 0.2f);
    dt_ = normal_floats(static_cast<size_t>(H), seed() + 3, 0.5f);
    a_ = normal_floats(static_cast<size_t>(H), seed() + 4, 0.5f);
    for (float& x : a_) x = -std::exp(x);
    dd_ = normal_floats(static_cast<size_t>(H), seed() + 5);
    norm_w_ = normal_floats(static_cast<size_t>(p_.d_inner()), seed() + 6, 0.3f);
    for (float& x : norm_w_) x += 1.0f;
    states_ = normal_floats(static_cast<size_t>((n_cached_ + T_) * F), seed() + 7, 0.3f);
    std::mt19937_64 rng(seed() + 8);
    slots_.resize(static_cast<size_t>(2 * T_));
    for (int64_t i = 0; i < T_; ++i) {
      const int64_t r = static_cast<int64_t>(rng() % static_cast<uint64_t>(i + n_cached_ + 1));
      slots_[2 * i] = static_cast<int32_t>(r - 1);  // -1, a cached slot, or an earlier new token's
      slots_[2 * i + 1] = static_cast<int32_t>(n_cached_ + i);
    }
  }
  Outputs compute_reference() override {
    Output out{"out"}, xbc{"xbc"}, st{"states"};
    out.values.resize(static_cast<size_t>(T_ * p_.d_inner()));
    xbc.values.resize(static_cast<size_t>(T_ * p_.conv_dim()));
    st.values = states_;
    cpu::mamba2_ref(in_.data(), conv_.data(), bias_ ? convb_.data() : nullptr, dt_.data(), a_.data(), dd_.data(),
                    norm_ ? norm_w_.data() : nullptr, st.values.data(), slots_.data(), T_, p_, xbc.values.data(),
                    out.values.data());
    return {out, xbc, st};
  }
  void do_prepare(Backend&, Arena& a) override {
    in_d_ = a.input(in_, p_.in_proj());
    conv_d_ = a.input(conv_, p_.d_conv);
    convb_d_ = a.input(convb_, p_.conv_dim());
    dt_d_ = a.input(dt_, p_.n_head);
    a_d_ = a.input(a_, p_.n_head);
    dd_d_ = a.input(dd_, p_.n_head);
    norm_d_ = a.input(norm_w_, p_.d_inner());
    states_d_ = a.inout(states_, p_.d_state);
    slots_d_ = a.plain(slots_);
    xbc_d_ = a.output(static_cast<size_t>(T_ * p_.conv_dim()), p_.conv_dim());
    out_d_ = a.output(static_cast<size_t>(T_ * p_.d_inner()), p_.head_dim);
  }
  void free_inputs() override {
    in_ = {}, conv_ = {}, convb_ = {}, dt_ = {}, a_ = {}, dd_ = {}, norm_w_ = {}, states_ = {};
  }

 private:
  int64_t T_;
  int n_cached_;
  Mamba2Params p_;
  bool bias_, norm_;
  std::vector<float> in_, conv_, convb_, dt_, a_, dd_, norm_w_, states_;
  std::vector<int32_t> slots_;
  float *in_d_ = nullptr, *conv_d_ = nullptr, *convb_d_ = nullptr, *dt_d_ = nullptr, *a_d_ = nullptr, *dd_d_ = nullptr,
        *norm_d_ = nullptr, *states_d_ = nullptr, *xbc_d_ = nullptr, *out_d_ = nullptr;
  int32_t* slots_d_ = nullptr;
};

// The argmax of each of `rows` rows of n (ids come back to the host), with a tie between two
// maxima (the lowest id wins) and a NaN (never wins) planted when n >= 3.
class ArgmaxCase final : public OpCase {
 public:
  ArgmaxCase(int64_t rows, int64_t n, Bound bound) : OpCase("argmax_rows", std::move(bound)), rows_(rows), n_(n) {}
  std::string shape() const override { return fmt::format("rows={} n={}", rows_, n_); }
  void run(Backend& b) override { b.argmax_rows(x_d_, rows_, n_, ids_.data()); }
  Outputs result(Backend&, Arena&) override {
    Output o{"ids"};
    o.ids = ids_;
    return {o};
  }
  double bytes() const override { return 4.0 * rows_ * (n_ + 1); }

 protected:
  void make_inputs() override {
    x_ = normal_floats(static_cast<size_t>(rows_ * n_), seed());
    if (n_ >= 3) {
      float* tie = &x_[(1 % rows_) * n_];
      tie[1] = tie[n_ - 1] = 10.0f;
      float* nan = &x_[(2 % rows_) * n_];
      nan[0] = NAN;
      nan[2] = 11.0f;
    }
    ids_.assign(static_cast<size_t>(rows_), -1);
  }
  Outputs compute_reference() override {
    Output o{"ids"};
    o.ids.resize(static_cast<size_t>(rows_));
    cpu::argmax_rows_ref(x_.data(), rows_, n_, o.ids.data());
    return {o};
  }
  void do_prepare(Backend&, Arena& a) override {
    x_d_ = a.input(x_, n_);
    std::fill(ids_.begin(), ids_.end(), -1);
  }
  void free_inputs() override { x_ = {}; }

 private:
  int64_t rows_, n_;
  std::vector<float> x_;
  std::vector<int32_t> ids_;
  float* x_d_ = nullptr;
};

// scatter_cols: rows of n_src floats placed at the columns cols (a random subset of [0, n_dst) in
// random order, an EAGLE-3 head's d2t map) of rows of n_dst prefilled with `fill` (-inf for logits,
// or 0). Plain copies: the result's bits are compared exactly (-inf equals -inf; a NaN sentinel
// left by an unwritten element, or +inf, does not), and its values by the usual check (finite
// where the reference is, not all zeros).
class ScatterColsCase final : public OpCase {
 public:
  ScatterColsCase(int64_t rows, int64_t n_src, int64_t n_dst, float fill, Bound bound)
      : OpCase("scatter_cols", std::move(bound)), rows_(rows), n_src_(n_src), n_dst_(n_dst), fill_(fill) {}
  std::string shape() const override {
    return fmt::format("rows={} n_src={} n_dst={} fill={}", rows_, n_src_, n_dst_, fill_);
  }
  void run(Backend& b) override { b.scatter_cols(src_d_, rows_, n_src_, cols_d_, out_d_, n_dst_, fill_); }
  Outputs result(Backend&, Arena& a) override { return outputs(a.get(out_d_)); }
  double bytes() const override { return 4.0 * (static_cast<double>(rows_) * (n_src_ + n_dst_) + n_src_); }

 protected:
  void make_inputs() override {
    src_ = normal_floats(static_cast<size_t>(rows_ * n_src_), seed());
    // The first n_src of a seeded Fisher-Yates shuffle of [0, n_dst): distinct, in random order.
    std::vector<int32_t> perm(static_cast<size_t>(n_dst_));
    for (int64_t i = 0; i < n_dst_; ++i) perm[i] = static_cast<int32_t>(i);
    std::mt19937_64 rng(seed() + 1);
    for (int64_t i = 0; i < n_src_; ++i) {
      const int64_t k = i + static_cast<int64_t>(rng() % static_cast<uint64_t>(n_dst_ - i));
      std::swap(perm[i], perm[k]);
    }
    cols_.assign(perm.begin(), perm.begin() + n_src_);
  }
  Outputs compute_reference() override {
    std::vector<float> out(static_cast<size_t>(rows_ * n_dst_));
    cpu::scatter_cols_ref(src_.data(), rows_, n_src_, cols_.data(), out.data(), n_dst_, fill_);
    return outputs(out);
  }
  void do_prepare(Backend&, Arena& a) override {
    src_d_ = a.input(src_, n_src_);
    cols_d_ = a.plain(cols_);
    out_d_ = a.output(static_cast<size_t>(rows_ * n_dst_), n_dst_);
  }
  void free_inputs() override { src_ = {}, cols_ = {}; }

 private:
  // The bits (as 32-bit words, exact) and the values (finite and non-zero checks).
  static Outputs outputs(std::vector<float> values) {
    Output bits{"bits"};
    bits.ids.resize(values.size());
    std::memcpy(bits.ids.data(), values.data(), values.size() * sizeof(float));
    return {bits, Output{"out", std::move(values)}};
  }
  int64_t rows_, n_src_, n_dst_;
  float fill_;
  std::vector<float> src_;
  std::vector<int32_t> cols_;
  float *src_d_ = nullptr, *out_d_ = nullptr;
  int32_t* cols_d_ = nullptr;
};

}  // namespace specmoe::testing::ops
