// Philox4x32-10 streams on top of Random123's implementation (header-only, librandom123-dev).
#include "core/rng.h"

#include <cmath>
#include <numbers>

#include <Random123/philox.h>

namespace specmoe::core {

std::array<uint32_t, 4> philox4x32_10(const std::array<uint32_t, 4>& counter,
                                      const std::array<uint32_t, 2>& key) {
  r123::Philox4x32_R<10> gen;
  r123::Philox4x32_R<10>::ctr_type c = {{counter[0], counter[1], counter[2], counter[3]}};
  r123::Philox4x32_R<10>::key_type k = {{key[0], key[1]}};
  const auto out = gen(c, k);
  return {out[0], out[1], out[2], out[3]};
}

Rng::Rng(uint64_t seed, uint64_t stream) : seed_(seed), stream_(stream) {}

uint32_t Rng::next_u32() {
  if (pos_ == 4) {
    const std::array<uint32_t, 4> ctr = {static_cast<uint32_t>(ctr_), static_cast<uint32_t>(ctr_ >> 32),
                                         static_cast<uint32_t>(stream_),
                                         static_cast<uint32_t>(stream_ >> 32)};
    const std::array<uint32_t, 2> key = {static_cast<uint32_t>(seed_), static_cast<uint32_t>(seed_ >> 32)};
    const auto block = philox4x32_10(ctr, key);
    for (int i = 0; i < 4; ++i) buf_[i] = block[i];
    ++ctr_;
    pos_ = 0;
  }
  return buf_[pos_++];
}

uint64_t Rng::next_u64() {
  const uint64_t lo = next_u32();
  const uint64_t hi = next_u32();
  return lo | (hi << 32);
}

double Rng::uniform() {
  // Top 53 bits -> k * 2^-53, k in [0, 2^53): exactly representable, so the result is < 1.
  return static_cast<double>(next_u64() >> 11) * 0x1.0p-53;
}

float Rng::uniform_float() {
  return static_cast<float>(next_u32() >> 8) * 0x1.0p-24f;
}

double Rng::normal() {
  // Box-Muller (1958). u1 in (0, 1] so log(u1) is finite; the sine partner is discarded so the
  // generator's state stays just (seed, stream, counter, position).
  const double u1 = 1.0 - uniform();
  const double u2 = uniform();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

uint64_t Rng::counter() const { return ctr_; }

namespace {
// SplitMix64 (Steele, Lea, Flood 2014): a bijective 64-bit mixer with good avalanche.
uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
}  // namespace

uint64_t Rng::stream_id(std::initializer_list<uint64_t> parts) {
  // Chain: h = splitmix(h ^ part) per part, then fold in the count so that {a} and {a, 0} or a
  // list and its prefix do not share a structural collision.
  uint64_t h = 0;
  for (const uint64_t part : parts) h = splitmix64(h ^ part);
  return splitmix64(h ^ static_cast<uint64_t>(parts.size()));
}

}  // namespace specmoe::core
