// Verifier: decides how many drafted tokens the target accepts and which token it emits next
// (the correction at the first rejection, or the bonus token after a full acceptance). A verifier
// runs where the target's distributions live: each rule has an implementation per device,
// registered under one name (verify/registry.h), and the same rule draws its random numbers in
// the same layout on every device.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/backend.h"
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
  // distributions [g + 1, n_vocab] (row i predicts x_{i+1}; row g gives the bonus token). Throws
  // Error(InvalidArgument) on mismatched sizes, out-of-range draft tokens, or p rows on a device
  // this implementation does not run on.
  virtual VerifyResult verify(const draft::Draft& draft, const core::Rows& p, core::Rng& rng) const = 0;
};

// Shared argument checks for verifiers.
void check_verify_inputs(const char* verifier, const draft::Draft& draft, const core::Rows& p);

// Draws an index with probability w[i] / sum(w) by inverse CDF over one uniform from rng (w >= 0,
// not necessarily normalized). Returns -1 when sum(w) <= 0.
int32_t sample_weights(std::span<const float> w, core::Rng& rng);

}  // namespace specmoe::verify
