// Philox4x32-10 (Salmon et al. 2011, Random123) on the device, laid out like core::Rng so that a
// block counter reserved on the host (core::Rng::take_blocks) names the same random words here.
// Include from .cu files only.
#pragma once
#include <Random123/philox.h>

#include <cstdint>

namespace specmoe::kernels::cuda::detail {

// Word `word` (0..3) of block `counter` of stream (seed, stream): counter = {block lo, block hi,
// stream lo, stream hi}, key = {seed lo, seed hi}.
__device__ __forceinline__ uint32_t philox_word(uint64_t seed, uint64_t stream, uint64_t counter, int word) {
  r123::Philox4x32_R<10> gen;
  const r123::Philox4x32_R<10>::ctr_type c = {{static_cast<uint32_t>(counter), static_cast<uint32_t>(counter >> 32),
                                               static_cast<uint32_t>(stream), static_cast<uint32_t>(stream >> 32)}};
  const r123::Philox4x32_R<10>::key_type k = {{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)}};
  const r123::Philox4x32_R<10>::ctr_type r = gen(c, k);
  return r[word];
}

// 24 random bits -> [0, 1), exactly as core::Rng::uniform_float.
__device__ __forceinline__ float to_uniform(uint32_t bits) { return static_cast<float>(bits >> 8) * 0x1.0p-24f; }

// Words 0 and 1 of block `counter` as one 53-bit uniform in [0, 1), exactly as core::Rng::uniform
// does with a fresh block (next_u64 = word 0 | word 1 << 32; top 53 bits).
__device__ __forceinline__ double uniform53(uint64_t seed, uint64_t stream, uint64_t counter) {
  const uint64_t lo = philox_word(seed, stream, counter, 0);
  const uint64_t hi = philox_word(seed, stream, counter, 1);
  return static_cast<double>((lo | (hi << 32)) >> 11) * 0x1.0p-53;
}

}  // namespace specmoe::kernels::cuda::detail
