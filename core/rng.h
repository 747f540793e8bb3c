// Counter-based random numbers: Philox4x32-10 (Salmon et al. 2011, via Random123). A stream is a
// key (seed, stream id) and a counter, so results never depend on thread count or call order
// elsewhere, and the same generator exists on the GPU (cuRAND's Philox).
#pragma once
#include <array>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>

namespace specmoe::core {

// One Philox4x32-10 block (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC 2011):
// 4 counter words and 2 key words -> 4 random words. Exposed so tests can check it against the
// Random123 known-answer vectors.
std::array<uint32_t, 4> philox4x32_10(const std::array<uint32_t, 4>& counter,
                                      const std::array<uint32_t, 2>& key);

// Layout (the same as cuRAND's curand_init(seed, subsequence, offset) for Philox): key = seed (low
// word first); counter = (block lo, block hi, stream lo, stream hi). Each (seed, stream, block)
// triple is thus a distinct Philox input, with 2^64 blocks per stream. Words of a block are handed
// out in order 0..3; next_u64 takes two words, low word first.
class Rng {
 public:
  // seed: the experiment / command-line seed. stream: which independent stream (e.g. derived from
  // prompt index and repeat with Rng::stream_id).
  explicit Rng(uint64_t seed, uint64_t stream = 0);

  uint32_t next_u32();
  uint64_t next_u64();
  double uniform();          // [0, 1) with 53 random bits
  float uniform_float();     // [0, 1) with 24 random bits
  double normal();           // standard normal (Box-Muller), for noisy top-k routing
  uint64_t counter() const;  // number of 128-bit blocks drawn so far
  uint64_t seed() const { return seed_; }
  uint64_t stream() const { return stream_; }
  // Mixes a list of indices (prompt index, repeat, ...) into one stream id (SplitMix64 chain).
  static uint64_t stream_id(std::initializer_list<uint64_t> parts);

 private:
  uint64_t seed_, stream_, ctr_ = 0;
  uint32_t buf_[4] = {0, 0, 0, 0};
  int pos_ = 4;
};

// Standard normal draws from a seeded Rng, as the noisy top-k router takes them
// (moe::NormalSource; moe/ sits below core and cannot name core::Rng itself).
inline std::function<double()> rng_normal_source(std::shared_ptr<Rng> rng) {
  return [rng = std::move(rng)]() { return rng->normal(); };
}

}  // namespace specmoe::core
