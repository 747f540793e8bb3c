// CpuBackend: the Backend of the host CPU. Memory is host memory; the ops are kernels/cpu's fast
// paths on the backend's own thread pool (AVX2 where the CPU has it, threads split by output
// element, so results do not depend on the thread count); the MoE block is moe::MoELayer; the
// sampling ops are core::SamplerChain's, the definition every other backend is tested against.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <unordered_map>

#include <fmt/format.h>

#include "base/error.h"
#include "core/backend.h"
#include "core/logits_processors.h"
#include "kernels/cpu/huge_pages.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/packed.h"
#include "kernels/cpu/quant.h"

namespace specmoe::core {

std::shared_ptr<void> allocate_host_memory(size_t bytes);  // core/backend.cpp

namespace {

namespace cpu = kernels::cpu;


class CpuBackend final : public Backend {
 public:
  CpuBackend(int n_threads, cpu::HugePages huge_pages) : pool_(n_threads), huge_pages_(huge_pages) {}

  Device device() const override { return Device{}; }
  std::string describe() const override {
    const cpu::Isa isa = cpu::best_isa();
    return fmt::format("cpu ({}{}, {} threads)", cpu::isa_name(isa),
                       isa >= cpu::Isa::Avx512 && !cpu::decode_prefetch() ? ", no decode prefetch" : "",
                       pool_.n_threads());
  }
  int threads() const override { return pool_.n_threads(); }

  // ---- memory
  std::shared_ptr<void> allocate(size_t bytes) override { return allocate_host_memory(bytes); }
  void copy(void* dst, const void* src, size_t bytes) override {
    if (dst != src) std::memcpy(dst, src, bytes);
  }
  void copy_rows(void* dst, size_t dst_pitch, const void* src, size_t src_pitch, size_t row_bytes,
                 int64_t rows) override {
    for (int64_t r = 0; r < rows; ++r)
      std::memcpy(static_cast<uint8_t*>(dst) + r * dst_pitch, static_cast<const uint8_t*>(src) + r * src_pitch,
                  row_bytes);
  }
  void download(void* host_dst, const void* src, size_t bytes) override { copy(host_dst, src, bytes); }
  void upload(void* dst, const void* host_src, size_t bytes) override { copy(dst, host_src, bytes); }
  void synchronize() override {}

  // ---- weights: the host views are the CPU's own; block-quantized matrices that the integer
  // kernels read packed (kernels/cpu/packed.h) get a packed copy, made once per host address (a
  // tied output head shares the embedding's) and owned by this backend. The view keeps its file
  // rows for get_rows.
  MatrixView resident(const MatrixView& host) override {
    if (host.empty() || !cpu::packs(host.type) || cpu::best_isa() == cpu::Isa::Scalar) return host;
    MatrixView v = host;
    std::shared_ptr<void>& copy = packed_[host.data];
    if (!copy) {
      copy = cpu::allocate_huge(cpu::packed_bytes(host), huge_pages_);  // packing writes every byte
      cpu::pack(pool_, host, copy.get());
    }
    v.packed = copy.get();
    return v;
  }
  VectorView resident(const VectorView& host) override { return host; }

  // ---- forward ops
  void get_rows(const MatrixView& table, const int32_t* ids, int64_t n, float* out) override {
    for (int64_t t = 0; t < n; ++t) cpu::dequantize_row(table.type, table.row(ids[t]), out + t * table.n_in, table.n_in);
  }
  void rms_norm(const float* x, const float* w, float* out, int64_t T, int64_t n, float eps) override {
    cpu::rms_norm(pool_, x, w, out, T, n, eps);
  }
  void layer_norm(const float* x, const float* w, const float* b, float* out, int64_t T, int64_t n,
                  float eps) override {
    cpu::layer_norm(pool_, x, w, b, out, T, n, eps);
  }
  void matmul(const float* x, int64_t T, const MatrixView& w, float* y) override { cpu::matmul(pool_, x, T, w, y); }
  void matmul_multi(const float* x, int64_t T, std::span<const MatrixView> w, std::span<float* const> y) override {
    cpu::matmul_multi(pool_, x, T, w, y);
  }
  void add_bias(float* y, const float* b, int64_t T, int64_t n) override { cpu::add_bias(y, b, T, n); }
  void add(const float* a, const float* b, float* y, int64_t n) override { cpu::add(a, b, y, n); }
  void rope(float* x, int64_t T, const int32_t* positions, const RopeParams& p) override {
    cpu::rope(pool_, x, T, std::span<const int32_t>(positions, static_cast<size_t>(T)), p);
  }
  void convert_rows(const float* src, int64_t rows, int64_t n, DType type, void* dst, size_t dst_pitch) override {
    if (type != DType::F32 && type != DType::F16 && type != DType::Q8_0)
      throw_error(ErrorKind::InvalidArgument, "convert_rows: rows of {}: only F32, F16 and Q8_0", dtype_name(type));
    if (dst_pitch < dtype_row_bytes(type, n))
      throw_error(ErrorKind::InvalidArgument, "convert_rows: {} {} elements do not fit rows {} bytes apart", n,
                  dtype_name(type), dst_pitch);
    pool_.parallel_for(rows, 16, [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) cpu::quantize_row(type, src + r * n, static_cast<uint8_t*>(dst) + r * dst_pitch, n);
    });
  }
  void attention(const float* q, int64_t T, const KVView& kv, const uint8_t* mask, const AttentionParams& p,
                 float* out) override {
    cpu::attention(pool_, q, T, kv, mask, p, out);
  }
  void mla_attention(const float* q, int64_t T, const MlaKVView& kv, const uint8_t* mask, const MlaAttentionParams& p,
                     float* out) override {
    cpu::mla_attention(pool_, q, T, kv, mask, p, out);
  }
  void swiglu(const float* gate, const float* up, float* out, int64_t n) override { cpu::swiglu(pool_, gate, up, out, n); }
  void gelu(const float* x, float* y, int64_t n) override { cpu::gelu(pool_, x, y, n); }
  void relu_sqr(const float* x, float* y, int64_t n) override { cpu::relu_sqr(pool_, x, y, n); }
  void xielu(const float* x, float* y, int64_t n, const kernels::XIeluParams& p) override {
    cpu::xielu(pool_, x, y, n, p);
  }
  void clamp(const float* x, float limit, float* y, int64_t n) override { cpu::clamp(pool_, x, limit, y, n); }
  void short_conv(const float* rows, const int32_t* prev, int64_t T, int64_t row0, int64_t width, int n_taps,
                  const float* taps, float* out) override {
    cpu::short_conv(pool_, rows, prev, T, row0, width, n_taps, taps, out);
  }
  void delta_net(const float* qkv, const float* alpha, const float* beta, const float* conv_w, const float* dt_bias,
                 const float* a, float* states, const int32_t* slots, int64_t T, const DeltaNetParams& p,
                 float* out) override {
    cpu::delta_net(pool_, qkv, alpha, beta, conv_w, dt_bias, a, states, slots, T, p, out);
  }
  void sigmoid_mul(const float* gate, const float* x, float* y, int64_t n, int64_t group) override {
    cpu::sigmoid_mul(pool_, gate, x, y, n, group);
  }
  void mamba2(const float* zxbcdt, const float* conv_w, const float* conv_b, const float* dt_bias, const float* a,
              const float* d, const float* norm_w, float* states, const int32_t* slots, int64_t T,
              const Mamba2Params& p, float* xbc, float* out) override {
    cpu::mamba2(pool_, zxbcdt, conv_w, conv_b, dt_bias, a, d, norm_w, states, slots, T, p, xbc, out);
  }
  void mul(const float* a, const float* b, float* y, int64_t n) override { cpu::mul(a, b, y, n); }
  void scale(const float* x, float s, float* y, int64_t n) override { cpu::scale(x, s, y, n); }
  void softcap(const float* x, float cap, float* y, int64_t n) override { cpu::softcap(pool_, x, cap, y, n); }
  void scatter_cols(const float* src, int64_t rows, int64_t n_src, const int32_t* cols, float* dst, int64_t n_dst,
                    float fill) override {
    cpu::scatter_cols(pool_, src, rows, n_src, cols, dst, n_dst, fill);
  }

  void moe_ffn(const MoEBlock& block, int k, double capacity_factor, const float* x, const float* router_x, int64_t T,
               float* out, moe::Routing& routing) override {
    // One moe::MoELayer per block (it owns the block's scratch and router), made on first use.
    std::unique_ptr<moe::MoELayer>& layer = moe_layers_[block.weights.gate_inp.data];
    if (!layer) layer = std::make_unique<moe::MoELayer>(block.weights, moe::make_router(block.router));
    layer->router().set_k(k);
    layer->router().set_capacity_factor(capacity_factor);
    layer->forward(pool_, x, static_cast<int>(T), out, nullptr, router_x);
    routing = layer->last_routing();
  }

  void argmax_rows(const float* x, int64_t rows, int64_t n, int32_t* host_ids) override {
    for (int64_t r = 0; r < rows; ++r) host_ids[r] = core::argmax(std::span<const float>(x + r * n, static_cast<size_t>(n)));
  }

  // ---- sampling: SamplerChain, row by row; row r's penalties see history + extra[0, r).
  void distributions(const float* logits, int64_t rows, int64_t n, const SamplingParams& params,
                     std::span<const int32_t> history, std::span<const int32_t> extra, float* out) override {
    if (rows > static_cast<int64_t>(extra.size()) + 1)
      throw_error(ErrorKind::InvalidArgument, "sampling: {} rows but {} drafted tokens (at most one row more)", rows,
                  extra.size());
    const SamplerChain chain(params);
    // Row r's penalties see the history and the first r drafted tokens: prefixes of one array.
    history_.assign(history.begin(), history.end());
    history_.insert(history_.end(), extra.begin(), extra.end());
    // The rows of a verification (a chain's g + 1, a tree's nodes + 1) on the pool's threads, one
    // row per chunk; an error is the lowest failing row's, whichever thread met it first.
    errors_.assign(static_cast<size_t>(rows), nullptr);
    pool_.parallel_for(rows, 1, [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        try {
          const size_t seen = history.size() + std::min(static_cast<size_t>(r), extra.size());
          chain.distribution(std::span<const float>(logits + r * n, static_cast<size_t>(n)),
                             std::span<const int32_t>(history_.data(), seen),
                             std::span<float>(out + r * n, static_cast<size_t>(n)));
        } catch (...) {
          errors_[static_cast<size_t>(r)] = std::current_exception();
        }
      }
    });
    for (const std::exception_ptr& e : errors_)
      if (e) std::rethrow_exception(e);
  }

  int32_t sample(const float* probs, int64_t n, const SamplingParams& params, double u) override {
    return SamplerChain(params).sample_with(std::span<const float>(probs, static_cast<size_t>(n)), u);
  }

  Draw draw(const float* probs, int64_t n, float* q, int64_t n_out, const SamplingParams& params, double u,
            const float* confidence_logits) override {
    Draw d;
    const int64_t m = std::min(n, n_out);
    if (q != probs) std::copy(probs, probs + m, q);
    if (n > n_out) {
      // Ids the target does not have are padding: mask them out so the token is always a target
      // id and q stays exactly the distribution it is drawn from.
      double sum = 0.0;
      for (int64_t i = 0; i < n_out; ++i) sum += q[i];
      if (sum <= 0.0) return d;
      const float inv = static_cast<float>(1.0 / sum);
      for (int64_t i = 0; i < n_out; ++i) q[i] *= inv;
    } else if (n < n_out) {
      std::fill(q + n, q + n_out, 0.0f);
    }
    if (confidence_logits != nullptr) {
      if (!params.greedy()) {
        d.confidence = *std::max_element(q, q + n_out);
      } else {
        // Processed q is one-hot at temperature 0; use the plain softmax's top probability,
        // 1 / sum(exp(l - max)) (the vectorised weights of sampling).
        const std::span<const float> l(confidence_logits, static_cast<size_t>(n));
        confidence_weights_.resize(static_cast<size_t>(n));
        const double z = cpu::exp_weights(l.data(), max_value(l), 1.0f, confidence_weights_.data(), n);
        d.confidence = static_cast<float>(1.0 / z);
      }
    }
    d.token = sample(q, n_out, params, u);
    return d;
  }

 private:
  cpu::ThreadPool pool_;
  cpu::HugePages huge_pages_;  // of the packed copies
  std::unordered_map<const void*, std::unique_ptr<moe::MoELayer>> moe_layers_;  // by router matrix
  std::unordered_map<const void*, std::shared_ptr<void>> packed_;               // by host address
  std::vector<int32_t> history_;              // distributions() scratch
  std::vector<std::exception_ptr> errors_;    // distributions(): each row's error, if any
  std::vector<float> confidence_weights_;     // draw() scratch
};

}  // namespace

std::shared_ptr<Backend> make_cpu_backend(int n_threads, HugePages huge_pages) {
  return std::make_shared<CpuBackend>(n_threads, huge_pages);
}

}  // namespace specmoe::core
