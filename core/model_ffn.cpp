// Dense feed-forward blocks: SwiGLU (llama, qwen2: down(silu(gate x) * up x)) and the GELU MLP
// of gpt2 (down(gelu(up x + b_up)) + b_down).
#include "core/model_ffn.h"

#include <fmt/format.h>

#include <vector>

#include "base/error.h"
#include "core/model_moe.h"

namespace specmoe::core {

namespace cpu = kernels::cpu;

namespace {

class SwiGluFeedForward : public FeedForward {
 public:
  SwiGluFeedForward(const TensorBinder& b, const ModelConfig& c, int l) {
    const std::string p = fmt::format("blk.{}.", l);
    gate_ = b.matrix(p + "ffn_gate.weight", c.n_embd, c.n_ff);  // (n_embd -> n_ff)
    up_ = b.matrix(p + "ffn_up.weight", c.n_embd, c.n_ff);      // (n_embd -> n_ff)
    down_ = b.matrix(p + "ffn_down.weight", c.n_ff, c.n_embd);  // (n_ff -> n_embd)
  }

  void forward(cpu::ThreadPool& pool, const float* x, int64_t T, float* out) override {
    g_.resize(static_cast<size_t>(T) * gate_.n_out);
    u_.resize(g_.size());
    cpu::matmul(pool, x, T, gate_, g_.data());
    cpu::matmul(pool, x, T, up_, u_.data());
    cpu::swiglu(pool, g_.data(), u_.data(), g_.data(), static_cast<int64_t>(g_.size()));
    cpu::matmul(pool, g_.data(), T, down_, out);
  }

  size_t weight_bytes_per_token() const override { return gate_.bytes() + up_.bytes() + down_.bytes(); }

 private:
  cpu::MatrixView gate_, up_, down_;
  std::vector<float> g_, u_;  // [T, n_ff]
};

class GeluFeedForward : public FeedForward {
 public:
  GeluFeedForward(const TensorBinder& b, const ModelConfig& c, int l) {
    const std::string p = fmt::format("blk.{}.", l);
    up_ = b.matrix(p + "ffn_up.weight", c.n_embd, c.n_ff);      // (n_embd -> n_ff)
    b_up_ = b.vector(p + "ffn_up.bias", c.n_ff);
    down_ = b.matrix(p + "ffn_down.weight", c.n_ff, c.n_embd);  // (n_ff -> n_embd)
    b_down_ = b.vector(p + "ffn_down.bias", c.n_embd);
  }

  void forward(cpu::ThreadPool& pool, const float* x, int64_t T, float* out) override {
    h_.resize(static_cast<size_t>(T) * up_.n_out);
    cpu::matmul(pool, x, T, up_, h_.data());
    cpu::add_bias(h_.data(), b_up_.data(), T, up_.n_out);
    cpu::gelu_inplace(pool, h_.data(), static_cast<int64_t>(h_.size()));
    cpu::matmul(pool, h_.data(), T, down_, out);
    cpu::add_bias(out, b_down_.data(), T, down_.n_out);
  }

  size_t weight_bytes_per_token() const override { return up_.bytes() + down_.bytes(); }

 private:
  cpu::MatrixView up_, down_;
  std::vector<float> b_up_, b_down_;
  std::vector<float> h_;  // [T, n_ff]
};

}  // namespace

std::unique_ptr<FeedForward> make_feed_forward(const TensorBinder& binder, const ModelConfig& config, int layer) {
  if (config.is_moe()) return std::make_unique<MoEFeedForward>(binder, config, layer);
  if (config.arch == Arch::Gpt2) return std::make_unique<GeluFeedForward>(binder, config, layer);
  return std::make_unique<SwiGluFeedForward>(binder, config, layer);
}

}  // namespace specmoe::core
