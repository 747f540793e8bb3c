// Matrix multiplication over every weight dtype: the reference, the portable fast path and the
// dispatch to the AVX2 kernels. Weight rows are the outer loop and tokens the inner one, so a
// decode-time batch of T tokens reads each weight row from memory once (DESIGN.md: verification
// of k draft tokens must cost about one forward).
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "base/error.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/packed.h"
#include "kernels/cpu/quant.h"
#include "kernels/cpu/simd_amx.h"
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

// AMX-TILE and AMX-INT8 (CPUID leaf 7 EDX bits 24, 25), the tile state enabled by the OS in XCR0
// (bits 17, 18: XTILECFG, XTILEDATA), and on Linux the tile data granted to this process
// (arch_prctl ARCH_REQ_XCOMP_PERM, once; without it the first tile instruction faults).
bool cpu_has_amx() {
#if (defined(__x86_64__) || defined(__i386__)) && defined(__linux__)
  static const bool has = [] {
    if (!cpu_has_avx512()) return false;
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || (d & (1u << 24)) == 0 || (d & (1u << 25)) == 0) return false;
    if (!__get_cpuid(1, &a, &b, &c, &d) || (c & bit_OSXSAVE) == 0) return false;  // xgetbv is usable
    unsigned lo = 0, hi = 0;
    asm volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    if ((lo & (3u << 17)) != (3u << 17)) return false;
    constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
    return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
  }();
  return has;
#else
  return false;
#endif
}

Isa detected_isa() {
  return cpu_has_amx() ? Isa::Amx : cpu_has_avx512() ? Isa::Avx512 : cpu_has_avx2() ? Isa::Avx2 : Isa::Scalar;
}

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

// Chunks per thread for batches of up to kTokenTileRows tokens (decode, verification): a few
// long runs of consecutive rows per thread, not many short ones. Measured on 2 Zen 5 cores,
// Qwen2.5-Coder-1.5B Q4_K_M decode (`specmoe bench -n 48 -p 0`): 16-row chunks 24 tokens/s,
// 64 rows 33-36, 256 rows 43, 2-4 chunks per thread 41-47 (0.5B: 48 -> 91-99). Chunks handed
// out one after the other alternate between the threads, so with short ones neither core's
// hardware prefetcher sees a long stream and each hand-out is a contended atomic; several chunks
// per thread still let one thread take over most of the work while the other is descheduled.
constexpr int64_t kChunksPerThread = 4;
// Longer batches keep kRowGrain x 4 rows per chunk: the chunk's weights then stay in L2 while the
// batch's token tiles pass over them (the packed kernels' kTokenTile of 64).
constexpr int64_t kTokenTileRows = 64;

// Below this many multiply-adds (T * n_in * n_out) a matmul runs on the calling thread: a
// hand-off to the workers costs a few microseconds, as much as the whole product of a tiny model
// (stories260K's 64 x 64 projections are 4K multiply-adds). Serial or not only changes who
// computes a row, never its value.
constexpr int64_t kMinParallelMacs = int64_t{1} << 16;

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
    if (std::strcmp(env, "amx") == 0) return usable_isa(Isa::Amx);
    return detected_isa();  // unknown names: the default
  }();
  return isa;
}

bool decode_prefetch() {
  static const bool on = [] {
    const char* env = std::getenv("SPECMOE_DECODE_PREFETCH");
    if (env != nullptr && (std::strcmp(env, "0") == 0 || std::strcmp(env, "1") == 0)) return *env == '1';
#if defined(__x86_64__) || defined(__i386__)
    return !__builtin_cpu_is("amd");
#else
    return true;
#endif
  }();
  return on;
}

Isa usable_isa(Isa want) {
  if (want == Isa::Amx && !cpu_has_amx()) want = Isa::Avx512;
  if (want == Isa::Avx512 && !cpu_has_avx512()) want = Isa::Avx2;
  if (want == Isa::Avx2 && !cpu_has_avx2()) want = Isa::Scalar;
  return want;
}

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::Amx: return "amx-int8";
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
  matmul_multi(pool, x, T, std::span<const MatrixView>(&w, 1), std::span<float* const>(&y, 1), isa);
}

namespace {

// One weight of a matmul_multi call: which kernel runs its rows, on which activations.
struct Product {
  const MatrixView* w = nullptr;
  float* y = nullptr;
  enum class Path { AmxPacked, Avx512Packed, Avx2Packed, Avx2Quant, Avx2Float, Portable } path = Path::Portable;
  const uint8_t* acts = nullptr;  // quantized activations (the integer paths)
  size_t stride = 0;
  int64_t first_chunk = 0;        // index of its first chunk of rows among all products
  const uint8_t* biased = nullptr;  // Avx2Quant in tiles: the activation codes plus 128 (n_in per token)
  bool avx512 = false;              // Avx2Quant in tiles: the AVX-512 VNNI ones
};

// Rows [j0, j1) of one product for all T tokens.
void run_rows(const Product& p, const float* x, int64_t T, int64_t j0, int64_t j1) {
  const MatrixView& w = *p.w;
  switch (p.path) {
    case Product::Path::AmxPacked:
    case Product::Path::Avx512Packed:
    case Product::Path::Avx2Packed: {
      // The packed groups of rows [j0, j1): the view's copy, or packed here for a view without one
      // (tests, tools; the CPU backend packs every weight of a model once).
      const int64_t g0 = j0 / kPackRows, g1 = (j1 + kPackRows - 1) / kPackRows;
      const size_t group_bytes = kPackRows * dtype_row_bytes(w.type, w.n_in);
      const uint8_t* groups;
      if (w.packed != nullptr) {
        groups = static_cast<const uint8_t*>(w.packed) + g0 * group_bytes;
      } else {
        thread_local AlignedBytes buf;
        uint8_t* dst = buf.get((g1 - g0) * group_bytes);
        pack_groups(w, g0, g1, dst);
        groups = dst;
      }
      if (p.path == Product::Path::AmxPacked)
        amx::matmul_packed_rows(w.type, groups, w.n_in, p.acts, p.stride, T, p.y, w.n_out, j0, j1);
      else if (p.path == Product::Path::Avx512Packed)
        avx512::matmul_packed_rows(w.type, groups, w.n_in, p.acts, p.stride, T, p.y, w.n_out, j0, j1);
      else
        avx2::matmul_packed_rows(w.type, groups, w.n_in, p.acts, p.stride, T, p.y, w.n_out, j0, j1);
      return;
    }
    case Product::Path::Avx2Quant:
      avx2::matmul_quant_rows(w, p.acts, p.stride, T, p.y, j0, j1, p.biased, p.avx512);
      return;
    default: break;
  }
  // Dequantized-row scratch, only where a row must be converted to f32 first (the portable path
  // for non-F32 weights; types without an integer kernel on the AVX2 path never reach here).
  thread_local std::vector<float> scratch;
  const bool need = p.path == Product::Path::Avx2Float
                        ? (w.type != DType::F32 && w.type != DType::F16 && w.type != DType::BF16)
                        : w.type != DType::F32;
  if (need && scratch.size() < static_cast<size_t>(w.n_in)) scratch.resize(static_cast<size_t>(w.n_in));
  if (p.path == Product::Path::Avx2Float) {
    avx2::matmul_rows(w, x, T, p.y, j0, j1, scratch.data());
    return;
  }
  for (int64_t j = j0; j < j1; ++j) {
    const float* r = row_as_f32(w, j, scratch.data());
    for (int64_t t = 0; t < T; ++t) p.y[t * w.n_out + j] = dot_portable(x + t * w.n_in, r, w.n_in);
  }
}

}  // namespace

void matmul_multi(ThreadPool& pool, const float* x, int64_t T, std::span<const MatrixView> ws,
                  std::span<float* const> ys, Isa isa) {
  if (ws.size() != ys.size())
    throw_error(ErrorKind::InvalidArgument, "matmul_multi: {} weights but {} outputs", ws.size(), ys.size());
  if (T <= 0 || ws.empty()) return;
  for (const MatrixView& w : ws)
    if (w.n_in != ws[0].n_in)
      throw_error(ErrorKind::InvalidArgument, "matmul_multi: weights of {} and {} inputs share one x", ws[0].n_in,
                  w.n_in);
  isa = usable_isa(isa);
  const int64_t n_in = ws[0].n_in;
  if (n_in == 0) {
    for (size_t i = 0; i < ws.size(); ++i) std::fill(ys[i], ys[i] + T * ws[i].n_out, 0.0f);
    return;
  }
  // Integer paths: the activations are quantized once per block size (32 or 256) for all the
  // weights, then every row reads them. The buffers are per calling thread and reused across
  // calls (no allocation per matmul).
  thread_local AlignedBytes acts_buf[2];
  const uint8_t* acts[2] = {nullptr, nullptr};
  size_t strides[2] = {0, 0};
  auto quantized = [&](DType type) -> int {
    const int k = avx2::act_block_size(type) == 32 ? 0 : 1;
    if (acts[k] == nullptr) {
      const size_t stride = avx2::act_row_bytes(type, n_in);
      uint8_t* a = acts_buf[k].get(stride * static_cast<size_t>(T));
      auto quantize = [&](int64_t t0, int64_t t1) {
        for (int64_t t = t0; t < t1; ++t) avx2::quantize_acts(type, x + t * n_in, n_in, a + t * stride);
      };
      // Long batches (prefill) quantize on every thread; a token's blocks depend on its row only.
      if (T >= 16)
        pool.parallel_for(T, 4, quantize);
      else
        quantize(0, T);
      acts[k] = a;
      strides[k] = stride;
    }
    return k;
  };
  thread_local AlignedBytes biased_buf;
  const uint8_t* biased = nullptr;
  Product products[8];
  std::vector<Product> many;  // more than 8 weights in one call (not in the forward)
  Product* prods = products;
  if (ws.size() > 8) {
    many.resize(ws.size());
    prods = many.data();
  }
  // Rows per chunk: kChunksPerThread chunks per thread over all the products' rows (at least
  // kRowGrain rows), or kRowGrain x 4 for long batches, whose weights are re-read from L2 once
  // per token tile.
  int64_t grain = 4 * kRowGrain;
  if (T <= kTokenTileRows) {
    int64_t rows = 0;
    for (const MatrixView& w : ws) rows += w.n_out;
    const int64_t n_chunks = kChunksPerThread * pool.n_threads();
    grain = std::max<int64_t>(kRowGrain, (rows + n_chunks - 1) / n_chunks);
  }
  // Packed weights are computed in whole groups of 16 rows: chunks start on a group.
  grain = (grain + kPackRows - 1) / kPackRows * kPackRows;
  int64_t chunks = 0, macs = 0;
  for (size_t i = 0; i < ws.size(); ++i) {
    const MatrixView& w = ws[i];
    Product& p = prods[i];
    p.w = &w;
    p.y = ys[i];
    p.first_chunk = chunks;
    chunks += (w.n_out + grain - 1) / grain;
    macs += T * n_in * w.n_out;
    if (isa != Isa::Scalar && avx2::act_block_size(w.type) > 0) {
      const int k = quantized(w.type);
      p.acts = acts[k];
      p.stride = strides[k];
      // AMX tiles from the batch size where they beat the AVX-512 kernels (simd_amx.h).
      if (isa == Isa::Amx && amx::min_tokens(w.type) > 0 && T >= amx::min_tokens(w.type))
        p.path = Product::Path::AmxPacked;
      else if (packs(w.type))
        p.path = isa >= Isa::Avx512 ? Product::Path::Avx512Packed : Product::Path::Avx2Packed;
      else
        p.path = Product::Path::Avx2Quant;
      if (p.path == Product::Path::Avx2Quant && avx2::row_tiles(w.type, T, isa >= Isa::Avx512)) {
        // The row-major tiles read the codes plus 128: made once per call, from the first
        // such product's quantized activations (they all share the 256-element ones).
        if (biased == nullptr) {
          uint8_t* b = biased_buf.get(static_cast<size_t>(n_in) * static_cast<size_t>(T));
          auto bias = [&](int64_t t0, int64_t t1) {
            for (int64_t t = t0; t < t1; ++t) avx2::biased_codes(p.acts + t * p.stride, n_in, b + t * n_in);
          };
          if (T >= 16)
            pool.parallel_for(T, 4, bias);
          else
            bias(0, T);
          biased = b;
        }
        p.biased = biased;
        p.avx512 = isa >= Isa::Avx512;
      }
    } else if (isa != Isa::Scalar && w.packed != nullptr && packs(w.type)) {
      // Float weights with a packed copy: the packed kernels read the float activations.
      p.path = isa >= Isa::Avx512 ? Product::Path::Avx512Packed : Product::Path::Avx2Packed;
      p.acts = reinterpret_cast<const uint8_t*>(x);
      p.stride = static_cast<size_t>(n_in) * sizeof(float);
    } else {
      p.path = isa == Isa::Scalar ? Product::Path::Portable : Product::Path::Avx2Float;
    }
  }
  // One job over the row chunks of every product: chunk c belongs to the product whose range
  // holds it. Which thread runs a chunk never changes its values.
  auto run_chunks = [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      size_t i = 0;
      while (i + 1 < ws.size() && prods[i + 1].first_chunk <= c) ++i;
      const Product& p = prods[i];
      const int64_t j0 = (c - p.first_chunk) * grain;
      run_rows(p, x, T, j0, std::min(p.w->n_out, j0 + grain));
    }
  };
  if (macs < kMinParallelMacs)
    run_chunks(0, chunks);
  else
    pool.parallel_for(chunks, 1, run_chunks);
}

float dot_f32(const float* a, const float* b, int64_t n, Isa isa) {
  if (usable_isa(isa) != Isa::Scalar) return avx2::dot_f32(a, b, n);
  return dot_portable(a, b, n);
}

}  // namespace specmoe::kernels::cpu
