// What the draft-head tests (model_eagle3_test.cpp, model_dflash_test.cpp) share: a head's tensors
// read as doubles for a reference written from llama.cpp's graph, its small linear algebra, the
// comparison of a head's logits (-inf outside a draft vocabulary) with the reference's, and the
// synth target whose next token the synth heads can guess.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "core/gguf.h"
#include "core/synth.h"
#include "kernels/cpu/quant.h"
#include "recurrent_model_helpers.h"

namespace specmoe::testing {

using Mat = std::vector<std::vector<double>>;

// A draft head's file and its target's: a tensor as doubles, the head's own where it has one.
struct HeadTensors {
  std::shared_ptr<core::GGUFFile> head, target;
  HeadTensors(const std::string& head_path, const std::string& target_path)
      : head(core::GGUFFile::open(head_path)), target(core::GGUFFile::open(target_path)) {}
  std::vector<double> tensor(const std::string& name) const {
    const core::GGUFFile& f = head->find_tensor(name) ? *head : *target;
    const core::GGUFTensorInfo& t = f.tensor(name);
    std::vector<float> v(t.n_elements);
    kernels::cpu::dequantize_row(t.type, t.data, v.data(), t.n_elements);
    return {v.begin(), v.end()};
  }
};

// y = W x for W of n_out rows of x.size().
inline std::vector<double> linear(const std::vector<double>& w, const std::vector<double>& x, size_t n_out) {
  std::vector<double> y(n_out, 0.0);
  for (size_t j = 0; j < n_out; ++j)
    for (size_t i = 0; i < x.size(); ++i) y[j] += w[j * x.size() + i] * x[i];
  return y;
}

// RMSNorm with weights w of the n elements of x from `from` (all of x when n is 0); the rest kept.
inline std::vector<double> rms_norm(const std::vector<double>& x, const std::vector<double>& w, double eps,
                                    size_t from = 0, size_t n = 0) {
  if (n == 0) n = x.size();
  std::vector<double> y = x;
  double ss = 0;
  for (size_t i = 0; i < n; ++i) ss += x[from + i] * x[from + i];
  const double inv = 1.0 / std::sqrt(ss / static_cast<double>(n) + eps);
  for (size_t i = 0; i < n; ++i) y[from + i] = x[from + i] * inv * w[i];
  return y;
}

inline Mat rows_of(const std::vector<float>& flat, int64_t cols) {
  Mat r;
  for (size_t i = 0; i < flat.size(); i += static_cast<size_t>(cols))
    r.emplace_back(flat.begin() + static_cast<std::ptrdiff_t>(i), flat.begin() + static_cast<std::ptrdiff_t>(i + cols));
  return r;
}

// max |got - want| / max |want| over the finite entries; -inf must match -inf.
inline double rel_error(const std::vector<float>& got, const Mat& want) {
  double diff = 0, scale = 0;
  const size_t n = want[0].size();
  EXPECT_EQ(got.size(), want.size() * n);
  for (size_t t = 0; t < want.size(); ++t)
    for (size_t j = 0; j < n; ++j) {
      const double w = want[t][j], g = got[t * n + j];
      if (std::isinf(w)) {
        EXPECT_TRUE(std::isinf(g) && g < 0) << "row " << t << " id " << j;
        continue;
      }
      diff = std::max(diff, std::fabs(g - w));
      scale = std::max(scale, std::fabs(w));
    }
  return diff / scale;
}

// "tiny" with every layer's residual branches scaled down: its next token is then mostly the head
// over the current token's embedding, which the synth heads guess from that same embedding, so
// drafts are accepted often (and rejected often enough).
inline std::string write_agreeing_tiny(const std::string& file) {
  const std::string path = scratch_file(file);
  core::SynthSpec s = core::synth_spec("tiny");
  s.n_full_layers = 0;
  s.deep_residual_scale = 0.05f;
  core::synth_write(s, path, 42);
  return path;
}

}  // namespace specmoe::testing
