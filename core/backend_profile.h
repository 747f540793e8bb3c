// A Backend that times every op of another (the decorator pattern over the backend seam, so the
// same profile serves the CPU and CUDA): `specmoe bench --profile` reads from it where a forward's
// time goes, per op and, for the matmuls, per weight type and shape with the MACs and weight bytes
// that give each its achieved GMAC/s and GB/s. While disabled it only forwards the calls; while
// enabled it synchronizes the inner backend after every op (a device's queue would otherwise
// hide the op's time), which is what a profile costs and why it is never on in a timed run.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/backend.h"

namespace specmoe::core {

// What the ops of one name did since the last reset.
struct OpProfile {
  std::string name;  // "matmul Q4_K 8960x1536", "attention", "rms_norm", ...
  int64_t calls = 0;
  double seconds = 0.0;
  double macs = 0.0;         // matmuls: multiply-adds (tokens x n_in x n_out, summed)
  double weight_bytes = 0.0;  // matmuls: bytes of weights each call reads, summed
};

class ProfilingBackend final : public Backend {
 public:
  explicit ProfilingBackend(std::shared_ptr<Backend> inner) : inner_(std::move(inner)) {}

  // The backend whose ops are timed (device-specific code reaches its own backend through it:
  // core::cuda_context).
  Backend& inner() const { return *inner_; }
  void enable(bool on) { enabled_ = on; }
  bool enabled() const { return enabled_; }
  void reset() { ops_.clear(); }
  // The ops timed since the last reset, the most time first.
  std::vector<OpProfile> ops() const;

  // ---- memory (not timed: no op of the forward)
  Device device() const override { return inner_->device(); }
  std::shared_ptr<void> allocate(size_t bytes) override { return inner_->allocate(bytes); }
  void copy(void* dst, const void* src, size_t bytes) override;
  void copy_rows(void* dst, size_t dst_pitch, const void* src, size_t src_pitch, size_t row_bytes,
                 int64_t rows) override;
  void download(void* host_dst, const void* src, size_t bytes) override;
  void upload(void* dst, const void* host_src, size_t bytes) override;
  void synchronize() override { inner_->synchronize(); }

  std::string describe() const override { return inner_->describe(); }
  int threads() const override { return inner_->threads(); }
  MatrixView resident(const MatrixView& host) override { return inner_->resident(host); }
  VectorView resident(const VectorView& host) override { return inner_->resident(host); }

  // ---- timed ops
  void get_rows(const MatrixView& table, const int32_t* ids, int64_t n, float* out) override;
  void rms_norm(const float* x, const float* w, float* out, int64_t T, int64_t n, float eps) override;
  void layer_norm(const float* x, const float* w, const float* b, float* out, int64_t T, int64_t n,
                  float eps) override;
  void matmul(const float* x, int64_t T, const MatrixView& w, float* y) override;
  void matmul_multi(const float* x, int64_t T, std::span<const MatrixView> w, std::span<float* const> y) override;
  void add_bias(float* y, const float* b, int64_t T, int64_t n) override;
  void add(const float* a, const float* b, float* y, int64_t n) override;
  void rope(float* x, int64_t T, const int32_t* positions, const RopeParams& p) override;
  void convert_rows(const float* src, int64_t rows, int64_t n, DType type, void* dst, size_t dst_pitch) override;
  void attention(const float* q, int64_t T, const KVView& kv, const uint8_t* mask, const AttentionParams& p,
                 float* out) override;
  void mla_attention(const float* q, int64_t T, const MlaKVView& kv, const uint8_t* mask, const MlaAttentionParams& p,
                     float* out) override;
  void swiglu(const float* gate, const float* up, float* out, int64_t n) override;
  void gelu(const float* x, float* y, int64_t n) override;
  void relu_sqr(const float* x, float* y, int64_t n) override;
  void xielu(const float* x, float* y, int64_t n, const kernels::XIeluParams& p) override;
  void clamp(const float* x, float limit, float* y, int64_t n) override;
  void short_conv(const float* rows, const int32_t* prev, int64_t T, int64_t row0, int64_t width, int n_taps,
                  const float* taps, float* out) override;
  void delta_net(const float* qkv, const float* alpha, const float* beta, const float* conv_w, const float* dt_bias,
                 const float* a, float* states, const int32_t* slots, int64_t T, const DeltaNetParams& p,
                 float* out) override;
  void sigmoid_mul(const float* gate, const float* x, float* y, int64_t n, int64_t group) override;
  void mamba2(const float* zxbcdt, const float* conv_w, const float* conv_b, const float* dt_bias, const float* a,
              const float* d, const float* norm_w, float* states, const int32_t* slots, int64_t T,
              const Mamba2Params& p, float* xbc, float* out) override;
  void mul(const float* a, const float* b, float* y, int64_t n) override;
  void scale(const float* x, float s, float* y, int64_t n) override;
  void softcap(const float* x, float cap, float* y, int64_t n) override;
  void scatter_cols(const float* src, int64_t rows, int64_t n_src, const int32_t* cols, float* dst, int64_t n_dst,
                    float fill) override;
  void moe_ffn(const MoEBlock& block, int k, double capacity_factor, const float* x, const float* router_x, int64_t T,
               float* out, moe::Routing& routing) override;
  void argmax_rows(const float* x, int64_t rows, int64_t n, int32_t* host_ids) override;
  void distributions(const float* logits, int64_t rows, int64_t n, const SamplingParams& params,
                     std::span<const int32_t> history, std::span<const int32_t> extra, float* out) override;
  int32_t sample(const float* probs, int64_t n, const SamplingParams& params, double u) override;
  Draw draw(const float* probs, int64_t n, float* q_out, int64_t n_out, const SamplingParams& params, double u,
            const float* confidence_logits) override;

 private:
  // Runs f on the inner backend; when enabled, synchronized and timed under `name` (built only
  // then) with the given MACs and weight bytes.
  template <class Name, class F>
  auto timed(const Name& name, double macs, double weight_bytes, F&& f);

  std::shared_ptr<Backend> inner_;
  bool enabled_ = false;
  std::unordered_map<std::string, OpProfile> ops_;
};

// The profiling backend behind `b`, or nullptr when b is not one (Model::load makes one for
// LoadOptions::profile_ops).
ProfilingBackend* profiling_backend(Backend& b);

}  // namespace specmoe::core
