// The table of the differential op harness (tests/backend_ops.h): every op of core::Backend, the
// matmul and get_rows of every dtype, at awkward shapes (token counts and output rows of 1, 3, 17,
// 4097; inner dimensions at the dtype's block multiple, and 17, 33, 100 for the float types), each
// with the normalized-MSE bound of the CPU and the CUDA column and the reason for it.
//
// nMSE = sum (got - ref)^2 / sum ref^2 (for matmul the denominator is sum (x_i w_i)^2, see
// Output::energy). Rules of thumb behind the numbers: an fp32 result computed in another order
// differs by ~n eps^2 (eps = 2^-24 per rounding) in nMSE, far below 1e-9; rounding an operand
// to a format with p significant bits adds (2^-p)^2 / 3 (half: 8e-8, bfloat16: 5e-6); rounding
// activations to 8 bits per block adds (amax/127)^2 / 12 relative to E[x^2]. Bounds are 10-25x
// those estimates: a shape with a single output sees one error, whose square is chi-square
// distributed (P(> 10x its mean) = 0.2%, P(> 20x) = 1e-5). A wrong element mapping, pairing or
// mask gives nMSE of order 1, so the bounds stay far from what a bug gives.
#pragma once
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "backend_ops.h"
#include "backend_ops_cases.h"
#include "backend_ops_sampling.h"

namespace specmoe::testing::ops {

// Every tensor type of kernels/dtype.h; the Backend multiplies and looks up rows of each of them
// (the read-only i-quant and ternary formats from random codes: nothing here writes them).
inline const std::vector<DType>& all_dtypes() {
  static const std::vector<DType> types = {DType::F32,    DType::F16,   DType::BF16,    DType::Q8_0,  DType::Q4_0,
                                           DType::Q4_1,   DType::Q5_0,  DType::Q5_1,    DType::IQ4_NL, DType::Q2_K,
                                           DType::Q3_K,   DType::Q4_K,  DType::Q5_K,    DType::Q6_K,   DType::IQ4_XS,
                                           DType::MXFP4,  DType::IQ2_XXS, DType::IQ2_XS, DType::IQ2_S, DType::IQ3_XXS,
                                           DType::IQ3_S,  DType::IQ1_S, DType::IQ1_M,   DType::TQ1_0,  DType::TQ2_0};
  return types;
}

// The ops of core::Backend that compute (memory and weight residency are exercised by all).
inline const std::vector<std::string>& backend_op_names() {
  static const std::vector<std::string> names = {
      "matmul",   "matmul_multi", "get_rows", "rms_norm", "layer_norm", "rope",        "convert_rows",
      "attention", "mla_attention", "short_conv", "delta_net", "mamba2", "swiglu", "gelu", "relu_sqr", "xielu", "clamp", "sigmoid_mul", "scatter_cols", "add",        "add_bias",    "mul",
      "scale",    "softcap",  "argmax_rows", "distributions", "sample", "draw",  "moe_ffn"};
  return names;
}

inline bool is_float_type(DType t) { return t == DType::F32 || t == DType::F16 || t == DType::BF16; }

// Normalized-MSE bounds of y = x W^T for weights of type t and T tokens.
inline Bound matmul_bound(DType t, int64_t T) {
  Bound b;
  std::string cpu, cuda;
  if (is_float_type(t)) {
    b.cpu = 1e-9;
    cpu = "fp32 sums of the same products in another order (AVX2 lanes; F16/BF16 widen exactly)";
  } else {
    b.cpu = 5e-4;
    cpu = "AVX2 integer kernels round x to 8 bits per block (step amax/127): ~2.5e-5 for N(0, 1) in blocks of "
          "32, ~5e-5 in blocks of 256 (measured), and a shape with one output sees the chi-square tail of one "
          "error (3x seen)";
  }
  switch (t) {
    case DType::F32: b.cuda = 1e-8, cuda = "cuBLAS fp32 GEMM: summation order only"; break;
    case DType::F16: b.cuda = 2e-6, cuda = "x rounded to half for the F16 GEMM: (2^-11)^2/3 = 8e-8"; break;
    case DType::BF16: b.cuda = 1e-4, cuda = "x rounded to bfloat16 for the BF16 GEMM: (2^-8)^2/3 = 5e-6"; break;
    default:
      if (T <= 8)
        b.cuda = 1e-8, cuda = "fp32 dequantizing matvec (T <= 8): summation order only";
      else
        b.cuda = 4e-6, cuda = "T > 8: weights dequantized to half and x rounded to half for cuBLAS: 2 x 8e-8";
  }
  b.why = "cpu: " + cpu + "; cuda: " + cuda;
  return b;
}

inline std::vector<std::unique_ptr<OpCase>> make_backend_op_table() {
  std::vector<std::unique_ptr<OpCase>> t;
  auto add = [&](auto* c) { t.emplace_back(c); };
  using Mask = AttentionCase::Mask;
  using EW = ElementwiseCase::Kind;
  using NK = NormCase::Kind;

  // ---- matmul and get_rows, every dtype. K: inner dimensions (17, 33, 100 for float types; 1,
  // 3 and 17 blocks otherwise); 4096 x 4097 is a real projection (what the perf mode reports).
  for (DType type : all_dtypes()) {
    const int64_t B = dtype_info(type).block_size;
    const bool fl = B == 1;
    const int64_t K0 = fl ? 17 : B, K1 = fl ? 33 : 3 * B, K2 = fl ? 100 : 17 * B;
    // Matrices of 4097 rows of a quantized type hold random codes: quantizing millions of floats
    // with the K-quant and IQ4 scale searches would cost seconds.
    const Fill big = Fill::RandomCodes;
    struct S { int64_t T, n_in, n_out; };
    // T = 9 and 16: one group of the AVX-512 kernels; 65: a second 64-token tile.
    for (S s : {S{1, K0, 17}, S{17, K0, 1}, S{1, K1, 1}, S{3, K1, 3}, S{3, K1, 4097}, S{8, K2, 17}, S{9, K1, 5},
                S{16, K1, 33}, S{17, K2, 17}, S{65, K1, 17}, S{1, 4096, 4097}})
      add(new MatmulCase(type, s.T, s.n_in, s.n_out, matmul_bound(type, s.T), s.n_out == 4097 && !fl ? big : Fill::Quantized));
    // Rows padded past their blocks (row_bytes above the dense size), and for quantized types
    // random codes: every byte pattern of the payload, the kernels' extremes included.
    add(new MatmulCase(type, 3, K2, 33, matmul_bound(type, 3), fl ? Fill::Quantized : Fill::RandomCodes, 8));
    if (!fl) add(new MatmulCase(type, 17, K1, 3, matmul_bound(type, 17), Fill::RandomCodes));
    // Float rows of several 256-element blocks with a tail, in a batch whose F16 / BF16 blocks
    // are converted to F32 first (the packed float kernels' block loop and staging).
    if (fl) add(new MatmulCase(type, 17, 777, 33, matmul_bound(type, 17)));

    const Bound rows{0.0, 1e-12,
                     "cpu: dequantize_row per id, as the reference; cuda: fp32 dequantization (FMA contraction may "
                     "drop one rounding of d * q)"};
    add(new GetRowsCase(type, K0, 4097, 3, rows, fl ? Fill::Quantized : big));
    add(new GetRowsCase(type, K1, 17, 17, rows));
    add(new GetRowsCase(type, fl ? 4096 : 16 * B, 3, 1, rows));
    add(new GetRowsCase(type, K1, 37, 5, rows, fl ? Fill::Quantized : Fill::RandomCodes, 8));
  }

  // ---- matmul_multi: weights sharing x, mixed activation formats (blocks of 32, 256, float),
  // awkward and empty-adjacent row counts; each output must equal its own matmul.
  {
    struct M { std::vector<DType> types; int64_t T, n_in; std::vector<int64_t> n_outs; };
    const M multis[] = {{{DType::Q4_K, DType::Q4_K, DType::Q6_K}, 1, 512, {17, 3, 33}},
                        {{DType::Q4_K, DType::Q4_K, DType::Q6_K}, 9, 512, {33, 1, 17}},
                        {{DType::Q8_0, DType::Q4_K}, 17, 256, {5, 67}},
                        {{DType::F16, DType::Q4_0, DType::Q5_K}, 3, 256, {4, 17, 3}},
                        {{DType::Q4_1, DType::Q4_1}, 65, 128, {31, 16}}};
    for (const M& m : multis) {
      // The loosest bound of the types involved (each output is one of those matmuls).
      Bound b = matmul_bound(m.types[0], m.T);
      for (DType t : m.types) {
        const Bound o = matmul_bound(t, m.T);
        if (o.cpu > b.cpu) b.cpu = o.cpu, b.why = o.why;
        b.cuda = std::max(b.cuda, o.cuda);
      }
      add(new MatmulMultiCase(m.types, m.T, m.n_in, m.n_outs, b));
    }
  }

  // ---- norms: the fast path runs the reference's row sums (RMSNorm's rows interleaved, up to 8
  // at a time: 9 and 17 rows take a run of 8 and one of 1 or 9); the device reduces in fp32 (the
  // reference in double): relative error ~1e-6 at most over 4097 terms.
  const Bound norm{0.0, 1e-10, "cpu: the reference's row sums; cuda: fp32 reductions over <= 4097 terms"};
  struct N { int64_t T, n; bool affine, in_place; };
  for (N s : {N{1, 1, true, false}, N{3, 17, true, false}, N{17, 100, true, false}, N{1, 4097, true, false},
              N{3, 4096, true, true}, N{9, 1536, true, true}, N{4097, 33, true, false}, N{17, 4097, false, false}})
    add(new NormCase(NK::Rms, s.T, s.n, s.affine, s.in_place, norm));
  for (N s : {N{1, 17, true, false}, N{3, 100, true, false}, N{17, 4097, true, false}, N{4097, 64, true, false},
              N{3, 33, false, false}, N{1, 4096, true, true}})
    add(new NormCase(NK::Layer, s.T, s.n, s.affine, s.in_place, norm));

  // ---- rope: both pairings, partial rope_dims, head_dim not a multiple of 32, 4097 tokens.
  const Bound rope{0.0, 1e-5,
                   "cpu: the reference's angles and rotation; cuda: angles pos * freq in fp32 (powf within 4 ulp), "
                   "|d theta| <= 4096 * 3e-7 rad: nMSE <= ~1e-6"};
  const RopePairing A = RopePairing::Adjacent, H = RopePairing::SplitHalves;
  struct R { int64_t T; RopeParams p; int32_t max_pos; };
  for (R s : {R{1, {3, 64, 64, 10000.0f, 1.0f, A}, 4096}, R{17, {3, 64, 64, 1000000.0f, 1.0f, H}, 4096},
              R{3, {2, 80, 32, 10000.0f, 0.5f, A}, 100}, R{17, {5, 18, 12, 500000.0f, 0.25f, H}, 2048},
              R{3, {4, 128, 64, 10000.0f, 1.0f, A}, 4096}, R{1, {1, 2, 2, 10000.0f, 1.0f, H}, 7},
              R{4097, {2, 64, 64, 10000.0f, 1.0f, H}, 4096}})
    add(new RopeCase(s.T, s.p, s.max_pos, rope));
  // Llama 3's frequency factors (per-pair divisors, in the op's memory), YaRN's ramp between
  // extrapolated and interpolated angles (qwen3's YaRN: freq_scale 1/4, ext_factor 1, the
  // correction range of pairs, an empty range), and a cos/sin magnitude (attn_factor): the same
  // fp32-angle bound, positions up to 8192 (|d theta| <= 8192 * 3e-7 rad).
  struct RF { int64_t T; RopeParams p; int32_t max_pos; bool factors; };
  for (RF s : {RF{17, {4, 64, 64, 500000.0f, 1.0f, A}, 8192, true}, RF{3, {2, 80, 32, 10000.0f, 1.0f, H}, 1000, true},
               RF{17, {4, 128, 128, 1000000.0f, 0.25f, H, nullptr, 1.0f, 20.0f, 45.0f, 1.1386f}, 8192, false},
               RF{3, {3, 64, 64, 10000.0f, 0.5f, A, nullptr, 1.0f, 10.0f, 10.0f, 1.0f}, 4096, false},
               RF{4097, {2, 64, 64, 10000.0f, 0.125f, H, nullptr, 0.5f, 4.0f, 24.0f, 1.2f}, 8192, true},
               RF{1, {5, 18, 12, 10000.0f, 1.0f, A, nullptr, 0.0f, 0.0f, 0.0f, 0.8f}, 2048, false}})
    add(new RopeCase(s.T, s.p, s.max_pos, rope, s.factors));

  // ---- convert_rows: the forward's KV cache stores, bytes compared exactly (padding between
  // rows untouched); float types at widths that are not multiples of 32.
  const Bound bytes_exact{0.0, 0.0,
                          "bytes compared exactly: F16 by round-to-nearest-even and Q8_0 by the same fp32 steps with "
                          "IEEE rounding on every backend"};
  struct C { int64_t rows, n; size_t pad; };
  for (DType type : {DType::F32, DType::F16, DType::Q8_0}) {
    for (C s : {C{1, 32, 0}, C{3, 64, 6}, C{17, 256, 0}, C{4097, 128, 0}, C{5, 96, 34}})
      add(new ConvertRowsCase(type, s.rows, s.n, s.pad, bytes_exact));
    if (type != DType::Q8_0)
      for (C s : {C{3, 17, 2}, C{17, 100, 0}}) add(new ConvertRowsCase(type, s.rows, s.n, s.pad, bytes_exact));
  }

  // ---- attention: causal, explicit tree masks (also over the cache's last rows: a tree drafted
  // level by level), a token that sees nothing, bidirectional blocks (DFlash), GQA, long caches.
  const Bound attn{1e-10, 1e-9,
                   "cpu: AVX2 dot products and axpy in another order than the scalar reference; cuda: fp32 scores, "
                   "softmax and sums in warp order"};
  struct At { int h, hkv, d; int64_t past, T, pad; Mask m; };
  for (At s : {At{4, 2, 64, 0, 1, 0, Mask::Causal}, At{4, 4, 17, 0, 3, 0, Mask::Causal},
               At{4, 1, 17, 37, 3, 5, Mask::Causal}, At{6, 3, 128, 300, 17, 0, Mask::Tree},
               At{2, 2, 33, 1, 1, 3, Mask::Causal}, At{3, 1, 64, 0, 17, 0, Mask::Blind},
               At{8, 2, 100, 17, 17, 0, Mask::Tree}, At{8, 8, 64, 4097, 1, 0, Mask::Causal},
               At{4, 2, 64, 4000, 3, 0, Mask::Tree}, At{2, 1, 64, 0, 100, 0, Mask::Causal},
               At{4, 2, 64, 40, 2, 0, Mask::CachedTree}, At{6, 3, 128, 300, 9, 0, Mask::CachedTree},
               At{4, 1, 17, 3, 3, 5, Mask::CachedTree}, At{4, 2, 64, 300, 16, 0, Mask::Bidirectional},
               At{2, 1, 17, 0, 5, 3, Mask::Bidirectional}})
    add(new AttentionCase(s.h, s.hkv, s.d, s.past, s.T, s.pad, s.m, attn));

  // KV rows of every cache type, each key type with each value type. The reference dequantizes
  // the rows and runs the same float math; F16 widens exactly and Q8_0 values are d * q, so the
  // CPU fast path and the device differ from it by summation order only (the F32 bound), except
  // for Q8_0 keys on the CPU: the query is rounded to 8 bits per block of 32 for the integer dot
  // (step amax/127: relative score error ~(2.5/127)^2/12 = 3e-5 in variance for N(0, 1) blocks,
  // which the softmax carries into the output; 1e-6 to 3.3e-5 measured, the largest with one
  // token and two heads), the bound of the integer matmuls, whose activations round the same way.
  const Bound attn_q8k{5e-4, 1e-9,
                       "cpu: Q8_0 keys against the query rounded to 8 bits per block (~3e-5 relative score "
                       "variance, up to 3.3e-5 measured); cuda: fp32 scores, softmax and sums in warp order"};
  using KT = AttentionCase::Kv;
  const DType kv_types[] = {DType::F32, DType::F16, DType::Q8_0};
  for (DType kt : kv_types)
    for (DType vt : kv_types) {
      if (kt == DType::F32 && vt == DType::F32) continue;  // the entries above
      const Bound& b = kt == DType::Q8_0 ? attn_q8k : attn;
      for (At s : {At{4, 2, 64, 0, 1, 0, Mask::Causal}, At{6, 3, 128, 300, 17, 0, Mask::Tree},
                   At{2, 2, 32, 1, 1, 3, Mask::Causal}, At{3, 1, 64, 0, 17, 0, Mask::Blind},
                   At{8, 8, 64, 4097, 1, 0, Mask::Causal}, At{4, 2, 64, 4000, 3, 0, Mask::Tree},
                   At{4, 2, 64, 40, 4, 0, Mask::CachedTree}, At{8, 2, 64, 100, 9, 0, Mask::Bidirectional}})
        add(new AttentionCase(s.h, s.hkv, s.d, s.past, s.T, s.pad, s.m, b, KT{kt, vt}));
      if (kt != DType::Q8_0 && vt != DType::Q8_0)  // head dimensions no Q8_0 block divides
        for (At s : {At{4, 1, 17, 37, 3, 5, Mask::Causal}, At{8, 2, 100, 17, 17, 0, Mask::Tree}})
          add(new AttentionCase(s.h, s.hkv, s.d, s.past, s.T, s.pad, s.m, b, KT{kt, vt}));
    }

  // The entries below name their rows' types, window, sinks and ALiBi in one AttentionKv; Q8_0
  // keys take the quantized-key bound.
  struct Kc { At s; KT kv; };
  auto add_attention = [&](std::initializer_list<Kc> cases) {
    for (const Kc& c : cases)
      add(new AttentionCase(c.s.h, c.s.hkv, c.s.d, c.s.past, c.s.T, c.s.pad, c.s.m,
                            c.kv.k == DType::Q8_0 ? attn_q8k : attn, c.kv));
  };
  const DType F32 = DType::F32, F16 = DType::F16, Q8 = DType::Q8_0;

  // Sliding windows (gemma3's local layers): keys window or more positions behind a query are
  // hidden, in caches and trees (new tokens at n_past + depth), a window of 1 (each token sees only
  // keys at its own position), a token whose window holds no cached row, and F16 / Q8_0 caches.
  add_attention({{At{4, 2, 64, 300, 17, 0, Mask::Tree}, KT{F32, F32, 64}},
                 {At{2, 1, 64, 0, 100, 0, Mask::Causal}, KT{F32, F32, 5}},
                 {At{3, 1, 64, 37, 3, 0, Mask::Blind}, KT{F32, F32, 7}},
                 {At{6, 3, 128, 300, 17, 0, Mask::Tree}, KT{F32, F32, 1}},
                 {At{4, 1, 17, 37, 3, 5, Mask::Causal}, KT{F32, F32, 30}},
                 {At{8, 8, 64, 4097, 1, 0, Mask::Causal}, KT{F16, F16, 512}},
                 {At{4, 2, 64, 4000, 3, 0, Mask::Tree}, KT{Q8, Q8, 1000}},
                 {At{4, 2, 64, 300, 4, 0, Mask::CachedTree}, KT{F16, F16, 3}}});

  // Chunked attention (llama4's local layers): keys before the query's chunk are hidden, with
  // queries inside one chunk and across a chunk boundary (positions 310-329 over chunks of 64:
  // the last ten see only their own chunk's new tokens), trees, chunks of 1 (each token sees only
  // keys at its own position), a chunk that holds no cached row and F16 / Q8_0 caches.
  add_attention({{At{4, 2, 64, 300, 17, 0, Mask::Causal}, KT{F32, F32, 0, false, 0.0f, 64}},
                 {At{4, 2, 64, 310, 20, 0, Mask::Causal}, KT{F32, F32, 0, false, 0.0f, 64}},
                 {At{4, 2, 64, 300, 17, 0, Mask::Tree}, KT{F16, F16, 0, false, 0.0f, 64}},
                 {At{3, 1, 64, 37, 3, 0, Mask::Causal}, KT{F32, F32, 0, false, 0.0f, 1}},
                 {At{2, 1, 64, 128, 5, 0, Mask::Causal}, KT{F32, F32, 0, false, 0.0f, 128}},
                 {At{4, 2, 64, 4000, 3, 0, Mask::Tree}, KT{Q8, Q8, 0, false, 0.0f, 1000}}});

  // Attention sinks (gpt-oss): a learned logit per head joins each softmax without a value, with
  // windows (gpt-oss's local layers), trees, GQA head groups of the F16 path, a blind token (no key:
  // the output stays 0) and Q8_0 rows.
  add_attention({{At{4, 2, 64, 0, 1, 0, Mask::Causal}, KT{F32, F32, 0, true}},
                 {At{8, 1, 64, 300, 17, 0, Mask::Tree}, KT{F16, F16, 0, true}},
                 {At{4, 2, 64, 300, 17, 0, Mask::Tree}, KT{F32, F32, 64, true}},
                 {At{3, 1, 64, 37, 3, 0, Mask::Blind}, KT{F16, F16, 7, true}},
                 {At{4, 2, 64, 4000, 3, 0, Mask::Causal}, KT{Q8, Q8, 128, true}},
                 {At{4, 1, 17, 37, 3, 5, Mask::CachedTree}, KT{F32, F32, 0, true}}});

  // ALiBi (bloom, mpt, refact, jais): -slope * |pq - pk| on each score; head counts that are powers
  // of two and not (5, 12: the interleaved slopes), trees (new tokens at n_past + depth), windows,
  // sinks, GQA head groups of the F16 path, a blind token and Q8_0 rows.
  add_attention({{At{4, 4, 64, 0, 1, 0, Mask::Causal}, KT{F32, F32, 0, false, 8.0f}},
                 {At{5, 5, 64, 37, 17, 0, Mask::Causal}, KT{F16, F16, 0, false, 8.0f}},
                 {At{12, 4, 64, 300, 17, 0, Mask::Tree}, KT{F16, F16, 0, false, 8.0f}},
                 {At{6, 3, 128, 300, 17, 0, Mask::Tree}, KT{F32, F32, 64, true, 8.0f}},
                 {At{3, 1, 64, 37, 3, 0, Mask::Blind}, KT{F16, F16, 0, false, 8.0f}},
                 {At{8, 8, 64, 4000, 3, 0, Mask::Causal}, KT{Q8, Q8, 0, false, 16.0f}},
                 {At{4, 1, 17, 37, 3, 5, Mask::CachedTree}, KT{F32, F32, 0, false, 8.0f}}});

  // ---- multi-head latent attention (deepseek2's absorbed form): one query head set over the
  // shared latent rows; causal, trees, a blind token, padded rows, a long cache, windows.
  struct Ml { int h, rank, rope; int64_t past, T, pad; Mask m; int window; };
  for (Ml s : {Ml{4, 32, 16, 0, 1, 0, Mask::Causal, 0}, Ml{4, 17, 3, 0, 3, 0, Mask::Causal, 0},
               Ml{16, 512, 64, 37, 3, 5, Mask::Causal, 0}, Ml{3, 64, 32, 300, 17, 0, Mask::Tree, 0},
               Ml{1, 33, 0, 1, 1, 3, Mask::Causal, 0}, Ml{2, 64, 16, 0, 17, 0, Mask::Blind, 0},
               Ml{8, 128, 64, 4097, 1, 0, Mask::Causal, 0}, Ml{4, 64, 16, 100, 17, 0, Mask::Tree, 40},
               Ml{2, 32, 16, 0, 100, 0, Mask::Causal, 7}, Ml{4, 64, 16, 37, 4, 0, Mask::CachedTree, 0},
               Ml{4, 64, 16, 100, 3, 0, Mask::CachedTree, 2}})
    add(new MlaAttentionCase(s.h, s.rank, s.rope, s.past, s.T, s.pad, s.m, s.window, attn));

  // ---- element-wise ops.
  const Bound act{1e-13, 1e-10,
                  "cpu: a vectorised exp within 2 ulp where the CPU has AVX2 (measured nMSE: SwiGLU 3e-17, GELU 1e-15, "
                  "whose tanh = 1 - 2 / (1 + exp(2u)) loses relative precision near 0), the reference's libm calls "
                  "on the portable path; cuda: expf / tanhf within a few ulp (GELU's 1 + tanh cancels for x < 0 "
                  "where the value is tiny, which nMSE weighs by size)"};
  const Bound sum{0.0, 0.0, "one correctly rounded fp32 addition per element on every backend: bit-identical"};
  struct E { int64_t T, n; bool alias; };
  for (EW k : {EW::Swiglu, EW::Gelu, EW::Add})
    for (E s : {E{1, 1, false}, E{3, 17, false}, E{17, 100, false}, E{1, 4097, false}, E{4097, 33, false},
                E{3, 4097, true}})
      add(new ElementwiseCase(k, s.T, s.n, s.alias, k == EW::Add ? sum : act));
  for (E s : {E{1, 1, true}, E{3, 17, true}, E{17, 4097, true}, E{4097, 100, true}, E{1, 33, true}})
    add(new ElementwiseCase(EW::AddBias, s.T, s.n, true, sum));
  const Bound product{0.0, 0.0, "one correctly rounded fp32 product per element on every backend: bit-identical"};
  const Bound cap{0.0, 1e-10, "cpu: the reference's loop; cuda: tanhf within a few ulp"};
  for (EW k : {EW::Mul, EW::Scale, EW::Softcap})
    for (E s : {E{1, 1, false}, E{3, 17, false}, E{17, 100, true}, E{1, 4097, false}, E{4097, 33, false},
                E{3, 4097, true}})
      add(new ElementwiseCase(k, s.T, s.n, s.alias, k == EW::Softcap ? cap : product));
  // Squared ReLU (not on a single element, which half the time the ReLU zeroes: a vacuous check).
  for (E s : {E{1, 7, false}, E{3, 17, false}, E{17, 100, true}, E{1, 4097, false}, E{4097, 33, false},
              E{3, 4097, true}})
    add(new ElementwiseCase(EW::ReluSqr, s.T, s.n, s.alias, product));
  // Clamp (mpt's clamp_kqv): a selection, exact on every backend.
  const Bound exact{0.0, 0.0, "a comparison and a selection: the same bits on every backend"};
  for (E s : {E{1, 7, false}, E{3, 17, false}, E{17, 100, true}, E{1, 4097, false}, E{3, 4097, true}})
    add(new ElementwiseCase(EW::Clamp, s.T, s.n, s.alias, exact));
  // xIELU (Apertus's MLP): products, and libm's expm1f on the negative side (CUDA's within a few ulp).
  const Bound xielu_bound{0.0, 1e-10, "cpu: the reference's loop; cuda: expm1f within a few ulp"};
  for (E s : {E{1, 7, false}, E{3, 17, false}, E{17, 100, true}, E{1, 4097, false}, E{3, 4097, true}})
    add(new ElementwiseCase(EW::XIelu, s.T, s.n, s.alias, xielu_bound));

  // ---- lfm2's short convolution: the sequence's start (nothing cached), trees over a cache, wide
  // rows, 2 to 5 taps.
  const Bound conv{0.0, 0.0, "n_taps products added in the same order from 0 (CUDA without FMA): bit-identical"};
  for (auto [T, n_past, width, taps] : std::vector<std::tuple<int64_t, int64_t, int64_t, int>>{
           {1, 0, 64, 3}, {3, 0, 17, 3}, {5, 7, 1024, 3}, {17, 2, 100, 4}, {3, 40, 4097, 2}, {9, 1, 256, 5}})
    add(new ShortConvCase(T, n_past, width, taps, conv));

  // Qwen3.5's attention output gate: x * sigmoid(gate).
  const Bound sig{0.0, 1e-12, "cpu: the reference's loop; cuda: expf within a few ulp"};
  for (E s : {E{1, 7, false}, E{3, 17, false}, E{17, 100, true}, E{1, 4097, false}, E{3, 4097, true}})
    add(new ElementwiseCase(EW::SigmoidMul, s.T, s.n, s.alias, sig));
  // spark2_5's gate per head: one gate per run of head_dim (group) elements; rows of n_head heads.
  for (auto [T, n, group, alias] : std::vector<std::tuple<int64_t, int64_t, int64_t, bool>>{
           {1, 64, 16, false}, {5, 2048, 128, true}, {17, 96, 48, true}})
    add(new ElementwiseCase(EW::SigmoidMul, T, n, alias, sig, group));

  // ---- scatter_cols (an EAGLE-3 head's draft-vocabulary logits into the target's vocabulary):
  // single rows and columns, pure permutations (n_src == n_dst), mostly-fill rows, the threaded
  // path (rows * n_dst >= 64K) and a real head's 32000 of 151936 ids, filled with -inf and 0.
  const Bound copies{0.0, 0.0, "plain copies and a fill: the same bits on every backend"};
  struct Sc { int64_t rows, n_src, n_dst; float fill; };
  for (Sc s : {Sc{1, 1, 1, -INFINITY}, Sc{1, 1, 17, 0.0f}, Sc{3, 5, 5, -INFINITY}, Sc{3, 5, 4097, -INFINITY},
               Sc{7, 5, 33, 0.0f}, Sc{1, 1000, 1000, 0.0f}, Sc{7, 1000, 1003, -INFINITY},
               Sc{3, 1000, 32000, -INFINITY}, Sc{1, 1000, 151936, -INFINITY}, Sc{7, 1000, 151936, 0.0f},
               Sc{7, 5, 150001, -INFINITY}, Sc{3, 1, 128256, 0.0f}, Sc{3, 32000, 151936, -INFINITY}})
    add(new ScatterColsCase(s.rows, s.n_src, s.n_dst, s.fill, copies));

  // ---- Qwen3.5's gated DeltaNet: one token, chains and trees over cached states, one and several
  // value heads per key head, Qwen3.5's head width 128, awkward widths and conv lengths.
  const Bound dn{1e-10, 1e-9,
                 "cpu: the AVX2 rows sum each dot in 8 lanes with FMA, the reference in index order (~1e-14 "
                 "measured); cuda: the reference's order without FMA, expf/logf within a few ulp"};
  for (auto [T, cached, hk, hv, dim, conv] : std::vector<std::tuple<int64_t, int, int, int, int, int>>{
           {1, 0, 1, 1, 16, 4}, {1, 2, 2, 4, 32, 4}, {5, 3, 2, 2, 17, 3}, {9, 1, 4, 8, 128, 4}, {17, 4, 1, 3, 33, 2},
           {40, 0, 2, 4, 64, 4}}) {
    DeltaNetParams p;
    p.n_k_heads = hk, p.n_v_heads = hv, p.head_dim = dim, p.d_conv = conv, p.eps = 1e-6f;
    add(new DeltaNetCase(T, cached, p, dn));
  }
  // Qwen3-Next's order: value heads g r .. g r + r - 1 read query/key head g.
  for (auto [T, cached, hk, hv, dim] : std::vector<std::tuple<int64_t, int, int, int, int>>{{1, 2, 2, 4, 32}, {9, 1, 2, 6, 17}}) {
    DeltaNetParams p;
    p.n_k_heads = hk, p.n_v_heads = hv, p.head_dim = dim, p.d_conv = 4, p.eps = 1e-6f, p.kv_interleaved = true;
    add(new DeltaNetCase(T, cached, p, dn));
  }

  // ---- granitehybrid's Mamba-2 mixer: one token, chains and trees over cached states, one and
  // several groups, Granite 4.0 H's head of 64 and state of 128, with and without bias and norm.
  const Bound m2{1e-10, 1e-9,
                 "cpu: the AVX2 rows sum over the state in 8 lanes with FMA, the reference in index order (~1e-13 "
                 "measured); cuda: the reference's order without FMA, expf/logf within a few ulp"};
  for (auto [T, cached, heads, hd, state, groups, conv, bias, norm] :
       std::vector<std::tuple<int64_t, int, int, int, int, int, int, bool, bool>>{
           {1, 0, 2, 16, 16, 1, 4, true, true}, {1, 2, 8, 64, 128, 1, 4, true, true},
           {5, 3, 4, 17, 9, 2, 3, false, true}, {9, 1, 6, 32, 16, 3, 4, true, false},
           {17, 4, 4, 8, 33, 4, 2, true, true}, {40, 0, 8, 16, 16, 2, 4, true, true}}) {
    Mamba2Params p;
    p.n_head = heads, p.head_dim = hd, p.d_state = state, p.n_group = groups, p.d_conv = conv, p.eps = 1e-5f;
    add(new Mamba2Case(T, cached, p, bias, norm, m2));
  }

  // ---- argmax: exact ids.
  const Bound ids{0.0, 0.0, "ids compared exactly"};
  for (auto [rows, n] : std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {3, 3}, {3, 17}, {17, 4097}, {1, 32000}, {3, 4097}})
    add(new ArgmaxCase(rows, n, ids));

  // ---- sampling distributions, with and without penalties; the kept set is compared exactly.
  const Bound dist{0.0, 1e-8,
                   "cpu: the backend runs SamplerChain itself; cuda: softmax of the kept set with expf and CUB fp32 "
                   "sums, relative 1e-4 per probability at most"};
  auto params = [](float temp, int k, float p, float min_p, float pen = 1.0f, int last_n = 64, int ngram = 0) {
    SamplingParams s;
    s.temperature = temp, s.top_k = k, s.top_p = p, s.min_p = min_p;
    s.repeat_penalty = pen, s.repeat_last_n = last_n, s.no_repeat_ngram = ngram;
    return s;
  };
  const SamplingParams plain[] = {params(0.8f, 40, 0.95f, 0.05f), params(1.0f, 0, 1.0f, 0.0f),
                                  params(0.7f, 5, 1.0f, 0.0f),    params(1.3f, 0, 0.5f, 0.0f),
                                  params(1.0f, 0, 1.0f, 0.2f),    params(0.0f, 40, 0.95f, 0.05f)};
  const SamplingParams penalised[] = {params(0.8f, 40, 0.95f, 0.05f, 1.3f, 16, 2), params(0.0f, 40, 0.95f, 0.05f, 1.3f, 64, 2),
                                      params(1.0f, 0, 1.0f, 0.0f, 0.8f, -1, 0), params(0.7f, 0, 0.9f, 0.0f, 1.0f, 64, 3)};
  for (const SamplingParams& p : plain)
    for (int64_t n : {1, 3, 17, 4097, 32000}) add(new DistributionsCase(n >= 4097 ? 3 : 1, n, p, dist));
  for (const SamplingParams& p : penalised)
    for (int64_t n : {17, 4097, 32000}) add(new DistributionsCase(3, n, p, dist));

  // ---- draws: tokens exactly (inverse CDF in double on both; only a uniform within rounding of
  // a boundary could differ), draw's q and confidence by nMSE.
  add(new SampleCase(5, params(1.0f, 0, 1.0f, 0.0f), 8, ids, {0.0f, 0.25f, 0.0f, 0.75f, 0.0f}));
  for (int64_t n : {17, 4097, 32000})
    for (const SamplingParams& p : {plain[0], plain[1], plain[5]}) add(new SampleCase(n, p, 64, ids));
  const Bound draw{0.0, 1e-10,
                   "cpu: the reference is the CPU backend's rule; cuda: renormalisation and the confidence's softmax "
                   "sum in double, in another order"};
  using DV = DrawCase::Variant;
  add(new DrawCase(4097, 4097, plain[0], true, DV::Plain, 16, draw));
  add(new DrawCase(4097, 4097, plain[0], false, DV::Aliased, 16, draw));
  add(new DrawCase(4097, 4000, plain[1], true, DV::Plain, 16, draw));
  add(new DrawCase(3000, 4097, plain[0], false, DV::Plain, 16, draw));
  add(new DrawCase(17, 17, plain[5], true, DV::Plain, 4, draw));
  add(new DrawCase(32000, 32000, plain[5], true, DV::Aliased, 4, draw));
  add(new DrawCase(17, 5, plain[1], false, DV::NoMass, 4, draw));
  add(new DrawCase(17, 5, plain[5], false, DV::NoMass, 4, draw));

  // ---- the MoE block: routing exactly, the output by nMSE.
  auto moe_bound = [](DType type) {
    Bound b{0.0, 1e-8,
            "cpu: the backend runs moe::MoELayer (bitwise the same for any thread count); cuda: fp32 GEMMs in "
            "another order through router, SwiGLU and combine"};
    if (type == DType::F16) b.cuda = 4e-6, b.why += "; F16 experts: x and the hidden rounded to half, 3 x 8e-8";
    if (type == DType::BF16) b.cuda = 2e-4, b.why += "; BF16 experts: x and the hidden rounded to bfloat16, 3 x 5e-6";
    if (!is_float_type(type))
      b.cuda = 2e-3, b.why += "; quantized experts: the reference (AVX2) rounds the activations of all three "
                              "products to 8 bits per block (~1e-4 together), the device does not";
    return b;
  };
  using MS = MoECase::Shape;
  using RK = moe::RouterKind;
  for (MS s : {MS{DType::F32, 8, 2, 64, 96, 0, 1, RK::SoftmaxTopK, 0.0},
               MS{DType::F32, 8, 2, 64, 96, 64, 17, RK::SoftmaxTopKRaw, 0.0},
               MS{DType::F32, 4, 2, 33, 17, 0, 3, RK::SoftmaxTopK, 0.0},
               MS{DType::F16, 8, 2, 64, 96, 0, 3, RK::SoftmaxTopK, 0.0},
               MS{DType::BF16, 4, 2, 64, 64, 32, 17, RK::SoftmaxTopKRaw, 0.0},
               MS{DType::Q8_0, 8, 2, 64, 96, 0, 17, RK::SoftmaxTopK, 0.0},
               MS{DType::Q8_0, 8, 8, 64, 96, 0, 3, RK::SoftmaxTopK, 0.0},
               MS{DType::Q4_K, 4, 2, 256, 256, 0, 3, RK::SoftmaxTopK, 0.0},
               MS{DType::F32, 8, 3, 64, 96, 0, 17, RK::SigmoidGroup, 0.0},
               MS{DType::F32, 8, 2, 64, 96, 0, 17, RK::SoftmaxTopK, 1.0},
               MS{DType::Q8_0, 8, 3, 64, 96, 32, 17, RK::SigmoidGroup, 0.75},
               MS{DType::F32, 16, 4, 64, 96, 0, 1, RK::SoftmaxGroup, 0.0},
               MS{DType::F16, 16, 4, 64, 96, 64, 17, RK::SoftmaxGroup, 0.0},
               MS{DType::Q8_0, 8, 3, 64, 96, 0, 17, RK::SoftmaxGroup, 1.0},
               // gpt-oss's block: router and expert biases, the clamped SwiGLU
               MS{DType::F32, 8, 2, 64, 96, 0, 1, RK::SoftmaxTopK, 0.0, true},
               MS{DType::F16, 16, 4, 64, 96, 0, 17, RK::SoftmaxTopK, 0.0, true},
               MS{DType::Q8_0, 8, 2, 64, 96, 0, 17, RK::SoftmaxTopK, 1.0, true},
               // smallthinker's: the router on the layer's input, the ReLU-gated GLU
               MS{DType::F32, 8, 2, 64, 96, 0, 1, RK::SoftmaxTopK, 0.0, false, true},
               MS{DType::F16, 16, 4, 64, 96, 0, 17, RK::SoftmaxTopK, 0.0, false, true},
               MS{DType::Q8_0, 8, 3, 64, 96, 0, 17, RK::SigmoidGroup, 0.0, false, true},
               // llama4's: sigmoid top-k, each expert reading its weight times the token's row, an
               // ungated shared expert of the expert width
               MS{DType::F32, 16, 1, 64, 96, 96, 1, RK::SigmoidGroup, 0.0, false, false, true},
               MS{DType::F16, 16, 1, 64, 96, 96, 17, RK::SigmoidGroup, 0.0, false, false, true},
               MS{DType::Q8_0, 8, 2, 64, 96, 0, 17, RK::SigmoidGroup, 0.0, false, false, true},
               // nemotron_h_moe's: ungated squared-ReLU experts and shared expert (no gate tensors)
               MS{DType::F32, 8, 2, 64, 96, 128, 1, RK::SigmoidGroup, 0.0, false, false, false, true},
               MS{DType::F16, 16, 4, 64, 96, 64, 17, RK::SigmoidGroup, 0.0, false, false, false, true},
               MS{DType::Q8_0, 8, 2, 64, 96, 0, 17, RK::SoftmaxTopK, 0.0, false, false, false, true},
               // maple's: the routed SwiGLU clamped (silu(min(g, L)) clamp(u, -L, L)); gate and up
               // rows of std ~4 here, so a limit of 2 clamps most of them
               MS{DType::F32, 8, 2, 64, 96, 0, 1, RK::SoftmaxTopK, 0.0, false, false, false, false, 2.0f},
               MS{DType::F16, 16, 4, 64, 96, 0, 17, RK::SoftmaxTopK, 0.0, false, false, false, false, 2.0f},
               MS{DType::Q8_0, 8, 2, 64, 96, 0, 17, RK::SoftmaxTopK, 1.0, false, false, false, false, 2.0f}})
    add(new MoECase(s, moe_bound(s.type)));
  return t;
}

}  // namespace specmoe::testing::ops
