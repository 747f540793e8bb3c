// Verifier: decides how many drafted tokens the target accepts and which token it emits next
// (the correction at the first rejection, or the bonus token after a full acceptance).
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/rng.h"
#include "draft/drafter.h"

namespace specmoe::verify {

struct VerifyResult {
  int n_accepted = 0;        // the first n_accepted draft tokens are kept
  int32_t next_token = -1;   // emitted after them
};

class Verifier {
 public:
  virtual ~Verifier() = default;
  virtual std::string name() const = 0;

  // draft: g >= 0 tokens x_1..x_g and their q rows (unless one_hot). p: the target's processed
  // distributions for the g+1 positions (p[i] predicts x_{i+1}; p[g] gives the bonus token), all
  // of the same size n_vocab. Throws Error(InvalidArgument) on mismatched sizes or out-of-range
  // draft tokens.
  virtual VerifyResult verify(const draft::Draft& draft, std::span<const std::vector<float>> p,
                              core::Rng& rng) const = 0;
};

// Shared argument checks for verifiers.
void check_verify_inputs(const char* verifier, const draft::Draft& draft, std::span<const std::vector<float>> p);

// Draws an index with probability w[i] / sum(w) by inverse CDF over one uniform from rng (w >= 0,
// not necessarily normalized). Returns -1 when sum(w) <= 0.
int32_t sample_weights(std::span<const float> w, core::Rng& rng);

}  // namespace specmoe::verify
