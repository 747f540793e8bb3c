// The differential op harness (tests/unit/backend_ops_test.cpp runs it; tests/backend_ops_table.h
// is its table): every op of core::Backend, run on random inputs of awkward shapes through
//   the reference  kernels::cpu::*_ref on host data (core::SamplerChain for sampling,
//                  moe::MoELayer on the host for the MoE block): the one oracle;
//   the CPU column make_backend(Device{}), the fast paths the transformer runs;
//   the CUDA column make_backend(Device{Cuda, 0}), when a device is present;
// and judged by one check (check() below): normalized MSE within the entry's bound for that
// column, no NaN/Inf where the reference has none, neither the reference nor the result all
// zeros, exact equality for ids, and (Arena::damage) sentinel guards around every buffer untouched
// and inputs unchanged. The backend columns use only the Backend interface, as the transformer
// does: inputs through allocate/upload, weights through resident(), results through download().
// No GoogleTest here, so a benchmark can reuse the cases.
#pragma once
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/backend.h"
#include "kernels/cpu/quant.h"
#include "kernels/dtype.h"
#include "kernels/matrix_view.h"
#include "quant_reference.h"

namespace specmoe::testing::ops {

using core::Backend;
using kernels::MatrixView;

enum class Column { Cpu, Cuda };
inline const char* column_name(Column c) { return c == Column::Cpu ? "cpu" : "cuda"; }

// The normalized-MSE bound of an entry in each backend column, with the reason for it. 0 means
// bit-identical to the reference (the fast path computes each element as the reference does).
struct Bound {
  double cpu = 0.0;
  double cuda = 0.0;
  std::string why;
  double of(Column c) const { return c == Column::Cpu ? cpu : cuda; }
};

// One result of an op: floats compared by normalized MSE, or ids (tokens, experts, bit patterns)
// compared exactly.
struct Output {
  Output() = default;
  Output(std::string name_, std::vector<float> values_ = {}) : name(std::move(name_)), values(std::move(values_)) {}
  static Output of_ids(std::string name_, std::vector<int32_t> ids_) {
    Output o(std::move(name_));
    o.ids = std::move(ids_);
    return o;
  }
  std::string name;
  std::vector<float> values;
  std::vector<int32_t> ids;
  // The nMSE denominator (reference outputs only); < 0: the sum of squares of the values. A
  // matmul sets sum_i (x_i w_i)^2, the expected y^2 for random inputs, so that a shape with one or
  // three outputs is not judged against one y that happens to be near zero.
  double energy = -1.0;
};
using Outputs = std::vector<Output>;

struct Verdict {
  bool ok = true;
  double nmse = 0.0;
  std::string message;  // why not ok
};

// The one check: got against the reference ref with the entry's bound. Ids: equal. Values: finite
// exactly where the reference is, neither side all zeros, nMSE (over the finite ones) <= bound.
inline Verdict check(const Output& ref, const Output& got, double bound) {
  Verdict v;
  auto fail = [&](std::string m) {
    if (v.ok) v.message = std::move(m);
    v.ok = false;
  };
  if (!ref.ids.empty() || !got.ids.empty()) {
    if (got.ids.size() != ref.ids.size()) {
      fail(fmt::format("{}: {} ids, the reference has {}", ref.name, got.ids.size(), ref.ids.size()));
      return v;
    }
    size_t wrong = 0;
    for (size_t i = 0; i < ref.ids.size(); ++i)
      if (got.ids[i] != ref.ids[i] && wrong++ == 0)
        fail(fmt::format("{}[{}] = {}, the reference says {}", ref.name, i, got.ids[i], ref.ids[i]));
    if (wrong > 1) v.message += fmt::format(" ({} of {} differ)", wrong, ref.ids.size());
    return v;
  }
  if (got.values.size() != ref.values.size()) {
    fail(fmt::format("{}: {} values, the reference has {}", ref.name, got.values.size(), ref.values.size()));
    return v;
  }
  double err = 0.0, ref_ss = 0.0;
  size_t bad = 0, first_bad = 0;
  bool ref_nonzero = false, got_nonzero = false;
  for (size_t i = 0; i < ref.values.size(); ++i) {
    const double r = ref.values[i], g = got.values[i];
    if (std::isfinite(r) != std::isfinite(g) && bad++ == 0) first_bad = i;
    if (r != 0.0) ref_nonzero = true;
    if (g != 0.0) got_nonzero = true;
    if (std::isfinite(r) && std::isfinite(g)) {
      err += (g - r) * (g - r);
      ref_ss += r * r;
    }
  }
  const double energy = ref.energy >= 0.0 ? ref.energy : ref_ss;
  v.nmse = energy > 0.0 ? err / energy : (err > 0.0 ? INFINITY : 0.0);
  if (bad > 0)
    fail(fmt::format("{}: {} values finite where the reference is not or the reverse, first [{}] = {} (reference {})", ref.name,
                     bad, first_bad, got.values[first_bad], ref.values[first_bad]));
  if (!ref_nonzero) fail(fmt::format("{}: the reference is all zeros (the check would be vacuous)", ref.name));
  if (!got_nonzero) fail(fmt::format("{}: the result is all zeros", ref.name));
  if (!(v.nmse <= bound)) fail(fmt::format("{}: normalized MSE {:.3g} above the bound {:.3g}", ref.name, v.nmse, bound));
  return v;
}

// ---------------------------------------------------------------------------------------------
// Buffers of one case on one backend. Every float buffer sits between two guard regions of
// sentinel NaNs (at least one row and 64 floats each side, rounded to 64 floats so the body keeps
// the allocation's 256-byte alignment); outputs are prefilled with the sentinel, so an element the
// op does not write shows as NaN; an over-read of an input reads NaN into the result. damage()
// reports guards that changed and inputs the op wrote.

inline constexpr uint32_t kSentinelBits = 0x7FC0FFEEu;  // a quiet NaN no arithmetic produces

class Arena {
 public:
  explicit Arena(Backend& b) : b_(b) {}
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;

  // Read-only input (checked unchanged afterwards; `host` must outlive the arena).
  float* input(const std::vector<float>& host, int64_t row) { return add(host.size(), row, &host, Kind::In); }
  // Input the op writes (in place).
  float* inout(const std::vector<float>& host, int64_t row) { return add(host.size(), row, &host, Kind::InOut); }
  // Output of n floats, prefilled with the sentinel.
  float* output(size_t n, int64_t row) { return add(n, row, nullptr, Kind::Out); }
  // Ids, positions, masks: plain copies.
  template <class T>
  T* plain(const std::vector<T>& host) {
    std::shared_ptr<void> mem = b_.allocate(std::max<size_t>(host.size(), 1) * sizeof(T));
    if (!host.empty()) b_.upload(mem.get(), host.data(), host.size() * sizeof(T));
    keep_.push_back(mem);
    return static_cast<T*>(mem.get());
  }
  // The body of a guarded buffer (waits for the queued work).
  std::vector<float> get(const float* body) const {
    const Buf& buf = find(body);
    std::vector<float> out(buf.n);
    if (buf.n) b_.download(out.data(), buf.body, buf.n * sizeof(float));
    return out;
  }
  // One line per damaged guard or written input; empty when all is well.
  std::vector<std::string> damage() const {
    std::vector<std::string> found;
    for (size_t k = 0; k < bufs_.size(); ++k) {
      const Buf& buf = bufs_[k];
      std::vector<uint32_t> all(buf.n + 2 * buf.guard);
      b_.download(all.data(), buf.body - buf.guard, all.size() * sizeof(float));
      size_t before = 0, after = 0;
      for (size_t i = 0; i < buf.guard; ++i) {
        before += all[i] != kSentinelBits;
        after += all[buf.guard + buf.n + i] != kSentinelBits;
      }
      const char* what = buf.kind == Kind::Out ? "output" : buf.kind == Kind::In ? "input" : "in-place buffer";
      if (before || after)
        found.push_back(fmt::format("{} {} ({} floats): {} guard floats before it and {} after it overwritten", what,
                                    k, buf.n, before, after));
      if (buf.kind == Kind::In &&
          std::memcmp(all.data() + buf.guard, buf.host->data(), buf.n * sizeof(float)) != 0)
        found.push_back(fmt::format("input {} ({} floats) was written", k, buf.n));
    }
    return found;
  }

 private:
  enum class Kind { In, InOut, Out };
  struct Buf {
    std::shared_ptr<void> mem;
    float* body = nullptr;
    size_t n = 0, guard = 0;
    const std::vector<float>* host = nullptr;
    Kind kind = Kind::Out;
  };
  float* add(size_t n, int64_t row, const std::vector<float>* host, Kind kind) {
    Buf buf;
    buf.n = n;
    buf.guard = static_cast<size_t>((std::max<int64_t>(row, 64) + 63) / 64 * 64);
    buf.host = host;
    buf.kind = kind;
    std::vector<uint32_t> all(n + 2 * buf.guard, kSentinelBits);
    if (host && n) std::memcpy(all.data() + buf.guard, host->data(), n * sizeof(float));
    buf.mem = b_.allocate(all.size() * sizeof(float));
    b_.upload(buf.mem.get(), all.data(), all.size() * sizeof(float));
    buf.body = static_cast<float*>(buf.mem.get()) + buf.guard;
    bufs_.push_back(buf);
    return buf.body;
  }
  const Buf& find(const float* body) const {
    for (const Buf& b : bufs_)
      if (b.body == body) return b;
    throw std::logic_error("Arena::get: not a buffer of this arena");
  }
  Backend& b_;
  std::vector<Buf> bufs_;
  std::vector<std::shared_ptr<void>> keep_;
};

// ---------------------------------------------------------------------------------------------
// One entry of the table: an op of the Backend interface at one dtype and shape, with its bound.

class OpCase {
 public:
  OpCase(std::string op, Bound bound) : op_(std::move(op)), bound_(std::move(bound)) {}
  virtual ~OpCase() = default;

  const std::string& op() const { return op_; }  // the Backend method's name
  virtual std::string shape() const = 0;         // "Q4_K T=3 n_in=256 n_out=17"
  std::string name() const { return op_ + " " + shape(); }
  const Bound& bound() const { return bound_; }
  // The seed of the case's inputs: FNV-1a of its name, so an entry's data do not depend on the
  // entries around it.
  uint64_t seed() const {
    uint64_t h = 1469598103934665603ull;
    for (char c : name()) h = (h ^ static_cast<uint8_t>(c)) * 1099511628211ull;
    return h;
  }

  // The reference outputs, computed once from the host inputs (made on first use).
  const Outputs& reference() {
    ensure_inputs();
    if (!have_ref_) ref_ = compute_reference(), have_ref_ = true;
    return ref_;
  }
  // Uploads the inputs to `b` (buffers in `a`), ready for run().
  void prepare(Backend& b, Arena& a) {
    ensure_inputs();
    do_prepare(b, a);
  }
  // The op alone (what the performance mode times); may be called repeatedly after prepare().
  virtual void run(Backend& b) = 0;
  // The results of the last run().
  virtual Outputs result(Backend& b, Arena& a) = 0;
  // Bytes the op reads and writes once (weights + activations) and its floating-point operations.
  virtual double bytes() const = 0;
  virtual double flops() const { return 0.0; }

  // Frees the host inputs and the reference (once every column has run; the inputs are remade
  // from the same seed if needed again). A device backend keeps its resident copy of a weight by
  // host address: release a case only after the backends that saw it are gone.
  void release() {
    free_inputs();
    ref_ = {};
    have_ref_ = false;
    have_inputs_ = false;
  }

 protected:
  virtual void make_inputs() = 0;
  virtual Outputs compute_reference() = 0;
  virtual void do_prepare(Backend& b, Arena& a) = 0;
  virtual void free_inputs() = 0;

 private:
  void ensure_inputs() {
    if (!have_inputs_) make_inputs(), have_inputs_ = true;
  }
  std::string op_;
  Bound bound_;
  Outputs ref_;
  bool have_ref_ = false, have_inputs_ = false;
};

// ---------------------------------------------------------------------------------------------
// Host data.

// splitmix64: a fast seeded stream of 64-bit words (the harness fills matrices of millions).
struct SplitMix64 {
  uint64_t state;
  uint64_t operator()() {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
};

// Approximately N(mean, sd^2): the Irwin-Hall sum of four 16-bit uniforms of one word, scaled to
// unit variance (tails end at 3.46 sd). One word per value: generating 16M values costs ~30 ms.
inline std::vector<float> normal_floats(size_t n, uint64_t seed, float sd = 1.0f, float mean = 0.0f) {
  SplitMix64 rng{seed};
  std::vector<float> v(n);
  const float scale = sd * 1.7320508f / 65536.0f;  // sqrt(3): four uniforms have variance 1/3
  for (float& x : v) {
    const uint64_t w = rng();
    const float s = static_cast<float>((w & 0xFFFF) + ((w >> 16) & 0xFFFF) + ((w >> 32) & 0xFFFF) + (w >> 48));
    x = mean + (s - 2.0f * 65535.0f) * scale;
  }
  return v;
}

// How a weight matrix is filled: quantized from ~N(0, 0.5^2) floats (what a model file holds), or
// random codes (every byte pattern of the payload, extremes included) under random fp16 scales.
enum class Fill { Quantized, RandomCodes };

// Offsets of the fp16 scale fields inside one block of each quantized type (ggml's layouts).
inline std::vector<size_t> half_fields(DType t) {
  switch (t) {
    case DType::Q8_0: case DType::Q4_0: case DType::Q5_0: case DType::IQ4_NL: case DType::IQ4_XS: return {0};
    case DType::Q4_1: case DType::Q5_1: case DType::Q4_K: case DType::Q5_K: return {0, 2};
    case DType::Q2_K: return {80, 82};
    case DType::Q3_K: return {108};
    case DType::Q6_K: return {208};
    case DType::IQ2_XXS: case DType::IQ2_XS: case DType::IQ2_S: case DType::IQ3_XXS: case DType::IQ3_S:
    case DType::IQ1_S: return {0};
    case DType::TQ1_0: return {52};
    case DType::TQ2_0: return {64};
    default: return {};  // IQ1_M: its fp16 d is spread over four nibbles (make_matrix sets them)
  }
}

// A weight matrix [n_out, n_in] of `type` in host memory, rows row_bytes apart (pad_bytes after
// each row's blocks: the view allows row_bytes above the dense size).
struct HostMatrix {
  std::vector<uint8_t> bytes;
  MatrixView view;
};

inline HostMatrix make_matrix(DType type, int64_t n_in, int64_t n_out, uint64_t seed, Fill fill = Fill::Quantized,
                              size_t pad_bytes = 0) {
  HostMatrix m;
  const size_t dense = dtype_row_bytes(type, n_in), rb = dense + pad_bytes;
  m.bytes.assign(rb * static_cast<size_t>(n_out), 0);
  const std::vector<size_t> halves = half_fields(type);
  const bool e8m0 = type == DType::MXFP4;  // its scale is one E8M0 byte: 2^(e - 128)
  const bool iq1m = type == DType::IQ1_M;
  // The read-only formats cannot be quantized here (kernels/cpu/quant_iq.cpp): random codes always.
  if (dtype_is_read_only(type)) fill = Fill::RandomCodes;
  if (fill == Fill::RandomCodes && (!halves.empty() || e8m0 || iq1m)) {
    SplitMix64 rng{seed};
    const DTypeInfo& info = dtype_info(type);
    for (int64_t j = 0; j < n_out; ++j) {
      uint8_t* row = m.bytes.data() + j * rb;
      for (size_t i = 0; i < dense; i += 8) {
        const uint64_t w = rng();
        std::memcpy(row + i, &w, std::min<size_t>(8, dense - i));
      }
      if (e8m0)  // scales 2^-7 .. 2^-4: e in [121, 124]
        for (size_t blk = 0; blk < dense / info.block_bytes; ++blk)
          row[blk * info.block_bytes] = static_cast<uint8_t>(121 + (rng() & 3));
      for (size_t blk = 0; blk < dense / info.block_bytes; ++blk)
        for (size_t off : halves) {  // scales in [0.01, 0.1)
          const float u = static_cast<float>(rng() >> 40) * (1.0f / 16777216.0f);
          const uint16_t h = fp32_to_fp16(0.01f + 0.09f * u);
          std::memcpy(row + blk * info.block_bytes + off, &h, 2);
        }
      if (iq1m)  // d in [0.01, 0.1): its 4 nibbles in the top of the scale words (bytes 49, 51, 53, 55)
        for (size_t blk = 0; blk < dense / info.block_bytes; ++blk) {
          const float u = static_cast<float>(rng() >> 40) * (1.0f / 16777216.0f);
          const uint16_t h = fp32_to_fp16(0.01f + 0.09f * u);
          ref_set_iq1_m_half(row + blk * info.block_bytes, h);
        }
    }
  } else {
    const std::vector<float> v = normal_floats(static_cast<size_t>(n_in * n_out), seed, 0.5f);
    for (int64_t j = 0; j < n_out; ++j)
      kernels::cpu::quantize_row(type, v.data() + j * n_in, m.bytes.data() + j * rb, n_in);
  }
  m.view.type = type;
  m.view.data = m.bytes.data();
  m.view.n_in = n_in;
  m.view.n_out = n_out;
  m.view.row_bytes = rb;
  return m;
}

// ---------------------------------------------------------------------------------------------
// Timing (the performance mode): the op after one warm-up run, the median of a few runs, each
// followed by synchronize() so that queued device work is counted.

struct Timing {
  double ms = 0.0;
  int runs = 0;
};

inline Timing time_case(OpCase& c, Backend& b, double budget_ms = 200.0) {
  Arena arena(b);
  c.prepare(b, arena);
  c.run(b);
  b.synchronize();
  std::vector<double> ms;
  double total = 0.0;
  while (ms.size() < 3 || (ms.size() < 50 && total < budget_ms)) {
    const auto t0 = std::chrono::steady_clock::now();
    c.run(b);
    b.synchronize();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    total += ms.back();
  }
  std::nth_element(ms.begin(), ms.begin() + ms.size() / 2, ms.end());
  return {ms[ms.size() / 2], static_cast<int>(ms.size())};
}

}  // namespace specmoe::testing::ops
