// Matrix multiplication over every weight dtype: the reference, the portable fast path and the
// dispatch to the AVX2 kernels. Weight rows are the outer loop and tokens the inner one, so a
// decode-time batch of T tokens reads each weight row from memory once (DESIGN.md: verification
// of k draft tokens must cost about one forward).
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "base/error.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/quant.h"
#include "kernels/cpu/simd_avx2.h"
#include "kernels/cpu/simd_avx512.h"

namespace specmoe::kernels::cpu {

namespace {

bool cpu_has_avx2() {
#if defined(__x86_64__) || defined(__i386__)
  // F16C through CPUID (leaf 1, ECX bit 29): clang before 16 rejects __builtin_cpu_supports("f16c").
  static const bool has = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    const bool f16c = __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C) != 0;
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && f16c;
  }();
  return has;
#else
  return false;
#endif
}

bool cpu_has_avx512() {
#if defined(__x86_64__) || defined(__i386__)
  static const bool has = cpu_has_avx2() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                          __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
                          __builtin_cpu_supports("avx512vnni");
  return has;
#else
  return false;
#endif
}

Isa detected_isa() { return cpu_has_avx512() ? Isa::Avx512 : cpu_has_avx2() ? Isa::Avx2 : Isa::Scalar; }

// A 64-byte aligned, growable byte buffer (the quantized activations: the AVX-512 kernels load
// whole cache lines of them).
class AlignedBytes {
 public:
  uint8_t* get(size_t bytes) {
    if (bytes > size_) {
      const size_t rounded = (bytes + 63) / 64 * 64;
      data_.reset(static_cast<uint8_t*>(std::aligned_alloc(64, rounded)));
      if (!data_) throw_error(ErrorKind::Runtime, "matmul: cannot allocate {} bytes of activations", rounded);
      size_ = rounded;
    }
    return data_.get();
  }

 private:
  struct Free {
    void operator()(uint8_t* p) const { std::free(p); }
  };
  std::unique_ptr<uint8_t, Free> data_;
  size_t size_ = 0;
};

// Rows per chunk handed to a thread: big enough to amortise the hand-out, small enough to
// balance. Only affects which thread computes a row, never the row's value.
constexpr int64_t kRowGrain = 16;

// Below this many multiply-adds (T * n_in * n_out) a matmul runs on the calling thread: a
// hand-off to the workers costs a few microseconds, as much as the whole product of a tiny model
// (stories260K's 64 x 64 projections are 4K multiply-adds). Serial or not only changes who
// computes a row, never its value.
constexpr int64_t kMinParallelMacs = int64_t{1} << 16;

// Runs fn over the rows, in parallel when the product is big enough.
template <class Fn>
void for_rows(ThreadPool& pool, const MatrixView& w, int64_t T, Fn&& fn) {
  if (T * w.n_in * w.n_out < kMinParallelMacs)
    fn(int64_t{0}, w.n_out);
  else
    pool.parallel_for(w.n_out, kRowGrain, fn);
}

// Converts row j of w to floats. F32 rows are returned in place (no copy).
const float* row_as_f32(const MatrixView& w, int64_t j, float* scratch) {
  const uint8_t* src = w.row(j);
  if (w.type == DType::F32) return reinterpret_cast<const float*>(src);
  dequantize_row(w.type, src, scratch, w.n_in);
  return scratch;
}

// Portable dot product with 8 independent partial sums (lets the compiler vectorise without
// reassociating), combined in a fixed order.
float dot_portable(const float* a, const float* b, int64_t n) {
  float s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int l = 0; l < 8; ++l) s[l] += a[i + l] * b[i + l];
  float tail = 0.0f;
  for (; i < n; ++i) tail += a[i] * b[i];
  return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7])) + tail;
}

}  // namespace

Isa best_isa() {
  static const Isa isa = [] {
    const char* env = std::getenv("SPECMOE_CPU_ISA");
    if (env == nullptr || *env == 0) return detected_isa();
    if (std::strcmp(env, "scalar") == 0) return Isa::Scalar;
    if (std::strcmp(env, "avx2") == 0) return usable_isa(Isa::Avx2);
    if (std::strcmp(env, "avx512") == 0) return usable_isa(Isa::Avx512);
    return detected_isa();  // unknown names: the default
  }();
  return isa;
}

Isa usable_isa(Isa want) {
  if (want == Isa::Avx512 && !cpu_has_avx512()) want = Isa::Avx2;
  if (want == Isa::Avx2 && !cpu_has_avx2()) want = Isa::Scalar;
  return want;
}

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::Avx512: return "avx512-vnni";
    case Isa::Avx2: return "avx2";
    default: return "scalar";
  }
}

void matmul_ref(const float* x, int64_t T, const MatrixView& w, float* y) {
  std::vector<float> row(static_cast<size_t>(w.n_in));
  for (int64_t j = 0; j < w.n_out; ++j) {
    const float* r = row_as_f32(w, j, row.data());
    for (int64_t t = 0; t < T; ++t) {
      const float* xt = x + t * w.n_in;
      float acc = 0.0f;
      for (int64_t i = 0; i < w.n_in; ++i) acc += xt[i] * r[i];
      y[t * w.n_out + j] = acc;
    }
  }
}

void matmul(ThreadPool& pool, const float* x, int64_t T, const MatrixView& w, float* y, Isa isa) {
  if (T <= 0 || w.n_out <= 0) return;
  if (w.n_in == 0) {
    std::fill(y, y + T * w.n_out, 0.0f);
    return;
  }
  isa = usable_isa(isa);
  if (isa != Isa::Scalar && avx2::act_block_size(w.type) > 0) {
    // Integer path: the activations are quantized once here, then every row reads them. The
    // buffer is per calling thread and reused across calls (no allocation per matmul).
    thread_local AlignedBytes acts;
    const size_t stride = avx2::act_row_bytes(w.type, w.n_in);
    uint8_t* a = acts.get(stride * static_cast<size_t>(T));
    auto quantize = [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) avx2::quantize_acts(w.type, x + t * w.n_in, w.n_in, a + t * stride);
    };
    // Long batches (prefill) quantize on every thread; a token's blocks depend on its row only.
    if (T >= 16)
      pool.parallel_for(T, 4, quantize);
    else
      quantize(0, T);
    if (isa == Isa::Avx512 && avx512::has_quant_kernel(w.type)) {
      const size_t scratch_floats = avx512::scratch_floats(w, T);
      for_rows(pool, w, T, [&](int64_t j0, int64_t j1) {
        thread_local std::vector<float> scratch;
        if (scratch.size() < scratch_floats) scratch.resize(scratch_floats);
        avx512::matmul_quant_rows(w, a, stride, T, y, j0, j1, scratch.data());
      });
      return;
    }
    for_rows(pool, w, T, [&](int64_t j0, int64_t j1) {
      avx2::matmul_quant_rows(w, a, stride, T, y, j0, j1);
    });
    return;
  }
  // Dequantized-row scratch, only where a row must be converted to f32 first (the portable path
  // for non-F32 weights; types without an integer kernel on the AVX2 path never reach here).
  if (isa == Isa::Avx512) isa = Isa::Avx2;  // float weights: the AVX2 kernels
  const bool need_scratch = isa == Isa::Avx2 ? (w.type != DType::F32 && w.type != DType::F16 && w.type != DType::BF16)
                                             : w.type != DType::F32;
  for_rows(pool, w, T, [&](int64_t j0, int64_t j1) {
    thread_local std::vector<float> scratch;
    if (need_scratch && scratch.size() < static_cast<size_t>(w.n_in)) scratch.resize(static_cast<size_t>(w.n_in));
    if (isa == Isa::Avx2) {
      avx2::matmul_rows(w, x, T, y, j0, j1, scratch.data());
      return;
    }
    for (int64_t j = j0; j < j1; ++j) {
      const float* r = row_as_f32(w, j, scratch.data());
      for (int64_t t = 0; t < T; ++t) y[t * w.n_out + j] = dot_portable(x + t * w.n_in, r, w.n_in);
    }
  });
}

float dot_f32(const float* a, const float* b, int64_t n, Isa isa) {
  if (usable_isa(isa) != Isa::Scalar) return avx2::dot_f32(a, b, n);
  return dot_portable(a, b, n);
}

}  // namespace specmoe::kernels::cpu
