#include "core/rng.h"

#include <cmath>
#include <cstdint>
#include <set>
#include <vector>

#include <gtest/gtest.h>

namespace specmoe::core {
namespace {

// Known-answer vectors from Random123's tests/kat_vectors (github.com/DEShawResearch/random123),
// the three "philox4x32 10" lines: counter (4 words), key (2 words) -> output (4 words).
struct Kat {
  std::array<uint32_t, 4> ctr;
  std::array<uint32_t, 2> key;
  std::array<uint32_t, 4> out;
};
const Kat kKats[] = {
    {{0x00000000, 0x00000000, 0x00000000, 0x00000000},
     {0x00000000, 0x00000000},
     {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
    {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
     {0xffffffff, 0xffffffff},
     {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
    {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
     {0xa4093822, 0x299f31d0},
     {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
};

TEST(Philox, KnownAnswerVectors) {
  for (const Kat& kat : kKats) EXPECT_EQ(philox4x32_10(kat.ctr, kat.key), kat.out);
}

TEST(Rng, ZeroSeedZeroStreamFirstBlockIsTheZeroKat) {
  Rng rng(0, 0);
  EXPECT_EQ(rng.counter(), 0u);
  EXPECT_EQ(rng.next_u32(), 0x6627e8d5u);
  EXPECT_EQ(rng.counter(), 1u);
  EXPECT_EQ(rng.next_u32(), 0xe169c58du);
  // next_u64 takes two words, low word first.
  EXPECT_EQ(rng.next_u64(), (uint64_t{0x9b00dbd8} << 32) | 0xbc57ac4cu);
  EXPECT_EQ(rng.counter(), 1u);
  rng.next_u32();
  EXPECT_EQ(rng.counter(), 2u);
}

TEST(Rng, LayoutIsKeySeedCounterBlockAndStream) {
  const uint64_t seed = 0x0123456789abcdefull, stream = 0xfedcba9876543210ull;
  Rng rng(seed, stream);
  for (uint32_t block = 0; block < 3; ++block) {
    const auto want = philox4x32_10({block, 0, 0x76543210u, 0xfedcba98u}, {0x89abcdefu, 0x01234567u});
    for (int i = 0; i < 4; ++i) EXPECT_EQ(rng.next_u32(), want[i]) << "block " << block << " word " << i;
  }
}

// The device draws take their uniforms from a copy of the loop's Rng and then advance the original
// by as many as they used (core/sampler.cpp, verify/speculative_verifier_cuda.cpp): a copy made
// mid-block continues exactly as the original, and advancing by n draws lands on the same state.
TEST(Rng, ACopyContinuesLikeTheOriginal) {
  Rng rng(5, 9);
  rng.next_u32();  // mid-block: three words of block 0 are left
  Rng probe = rng;
  std::vector<double> drawn;
  for (int i = 0; i < 7; ++i) drawn.push_back(probe.uniform());
  for (int i = 0; i < 7; ++i) EXPECT_EQ(rng.uniform(), drawn[i]) << i;
  EXPECT_EQ(rng.counter(), probe.counter());
  EXPECT_EQ(rng.next_u32(), probe.next_u32());
  EXPECT_EQ(rng.seed(), 5u);
  EXPECT_EQ(rng.stream(), 9u);
}

TEST(Rng, SameSeedSameSequence) {
  Rng a(42, 7), b(42, 7);
  for (int i = 0; i < 1001; ++i) ASSERT_EQ(a.next_u32(), b.next_u32()) << i;
  for (int i = 0; i < 17; ++i) ASSERT_EQ(a.uniform(), b.uniform()) << i;
  for (int i = 0; i < 17; ++i) ASSERT_EQ(a.normal(), b.normal()) << i;
  EXPECT_EQ(a.counter(), b.counter());
}

TEST(Rng, DifferentStreamsAndSeedsDiffer) {
  // Streams 0..15 and seeds 0..15: the first 8 words of every generator are distinct sequences,
  // and within one sequence almost all words differ position by position.
  std::set<std::vector<uint32_t>> seen;
  for (uint64_t seed = 0; seed < 16; ++seed) {
    for (uint64_t stream = 0; stream < 16; ++stream) {
      Rng rng(seed, stream);
      std::vector<uint32_t> words(8);
      for (auto& w : words) w = rng.next_u32();
      EXPECT_TRUE(seen.insert(words).second) << "seed " << seed << " stream " << stream;
    }
  }
  Rng a(1, 0), b(1, 1);
  int equal = 0;
  for (int i = 0; i < 1000; ++i) equal += a.next_u32() == b.next_u32();
  EXPECT_EQ(equal, 0);  // P(any of 1000 32-bit words equal by chance) ~ 2.3e-7
}

TEST(Rng, UniformIsInUnitIntervalAndUses53Bits) {
  Rng rng(3, 1), twin(3, 1);
  for (int i = 0; i < 100000; ++i) {
    const double u = rng.uniform();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    ASSERT_EQ(u, static_cast<double>(twin.next_u64() >> 11) * 0x1.0p-53);
  }
  for (int i = 0; i < 100000; ++i) {
    const float u = rng.uniform_float();
    ASSERT_GE(u, 0.0f);
    ASSERT_LT(u, 1.0f);
    ASSERT_EQ(u, static_cast<float>(twin.next_u32() >> 8) * 0x1.0p-24f);
  }
}

TEST(Rng, UniformMeanVarianceAndHistogram) {
  // N = 200000 draws. Mean 1/2 with sd sqrt(1/12/N) = 6.5e-4; sample variance 1/12 with
  // sd sqrt((1/80 - 1/144)/N) = 1.7e-4. Tolerances are 5 sd (false-failure rate ~ 6e-7; the
  // seed is fixed anyway, so this guards against a broken generator, not chance).
  const int n = 200000;
  Rng rng(2024, Rng::stream_id({5, 1}));
  std::vector<int> bins(16, 0);
  double sum = 0, sum2 = 0;
  for (int i = 0; i < n; ++i) {
    const double u = rng.uniform();
    sum += u;
    sum2 += u * u;
    ++bins[static_cast<int>(u * 16)];
  }
  const double mean = sum / n, var = sum2 / n - mean * mean;
  EXPECT_NEAR(mean, 0.5, 5 * 6.5e-4);
  EXPECT_NEAR(var, 1.0 / 12.0, 5 * 1.7e-4);
  // Chi-square over 16 equal bins, 15 degrees of freedom; critical value at significance 0.001
  // is 37.70.
  double chi2 = 0;
  for (int c : bins) chi2 += (c - n / 16.0) * (c - n / 16.0) / (n / 16.0);
  EXPECT_LT(chi2, 37.70);
}

TEST(Rng, NormalMomentsAndOneSigmaMass) {
  // N = 200000. Mean 0 (sd 1/sqrt(N) = 2.24e-3), variance 1 (sd sqrt(2/N) = 3.16e-3), mass inside
  // |z| < 1 is 0.682689 (sd sqrt(p(1-p)/N) = 1.04e-3). Tolerances: 5 sd.
  const int n = 200000;
  Rng rng(99, 3);
  double sum = 0, sum2 = 0;
  int inside = 0;
  for (int i = 0; i < n; ++i) {
    const double z = rng.normal();
    ASSERT_TRUE(std::isfinite(z));
    sum += z;
    sum2 += z * z;
    inside += std::abs(z) < 1.0;
  }
  const double mean = sum / n;
  EXPECT_NEAR(mean, 0.0, 5 * 2.24e-3);
  EXPECT_NEAR(sum2 / n - mean * mean, 1.0, 5 * 3.16e-3);
  EXPECT_NEAR(static_cast<double>(inside) / n, 0.682689, 5 * 1.04e-3);
}

TEST(Rng, StreamIdIsDeterministicOrderSensitiveAndCollisionFree) {
  EXPECT_EQ(Rng::stream_id({3, 4}), Rng::stream_id({3, 4}));
  EXPECT_NE(Rng::stream_id({3, 4}), Rng::stream_id({4, 3}));
  EXPECT_NE(Rng::stream_id({0}), Rng::stream_id({0, 0}));
  EXPECT_NE(Rng::stream_id({}), Rng::stream_id({0}));
  EXPECT_NE(Rng::stream_id({1}), 1u);
  std::set<uint64_t> ids;
  size_t count = 0;
  for (uint64_t a = 0; a < 64; ++a) {
    ids.insert(Rng::stream_id({a}));
    ++count;
    for (uint64_t b = 0; b < 64; ++b) {
      ids.insert(Rng::stream_id({a, b}));
      ids.insert(Rng::stream_id({a, b, 1}));
      count += 2;
    }
  }
  EXPECT_EQ(ids.size(), count);
}

}  // namespace
}  // namespace specmoe::core
