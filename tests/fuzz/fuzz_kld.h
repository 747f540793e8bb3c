// Fuzz entry point of the KL-divergence base files (target fuzz_kld): llama.cpp's "_logits_"
// log-probability files that `specmoe perplexity --kl-divergence --kl-divergence-base F` reads.
// They come from another program (llama-perplexity), another model, or a copy cut short, so
// every header field, token and record is hostile. Shared by tests/fuzz/kld_fuzz.cpp and the
// regression replay (tests/unit/fuzz_regression_test.cpp); contract as in fuzz_entry.h.
//
// Input: the file, read against the `tiny` synth model (320-token byte vocabulary, F32 cache).
//
// Oracles:
//  - the file is compared or throws one specmoe::Error naming it (never an allocation the header
//    asks for before the file's size backs it, never a read past a record);
//  - a compared file reports its own chunk count, n_chunk * (n_ctx - 1 - n_ctx/2) scored
//    positions, one running mean per chunk, and fractions (same top token) within [0, 1];
//  - the model's perplexity on the file's tokens does not depend on the file's records: it is the
//    same for the input and for the input with every record zeroed.
#pragma once
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "core/kl_divergence.h"
#include "core/synth.h"
#include "fuzz_entry.h"

namespace specmoe::fuzz {

inline constexpr const char* kKldFileName = "fuzz-base.kld";

inline core::Model& kld_model() {
  static const std::unique_ptr<core::Model> m = [] {
    const std::string path = (scratch_dir() / "kld-tiny.gguf").string();
    core::synth_write("tiny", path, 5);
    core::LoadOptions o;
    o.n_threads = 1;
    o.cache_types = {DType::F32, DType::F32};
    return core::Model::load(path, o);
  }();
  return *m;
}

inline Outcome run_kld(std::span<const uint8_t> bytes) {
  core::Model& model = kld_model();
  const std::string path = (scratch_dir() / kKldFileName).string();
  write_file(path, bytes);
  core::KLDivergenceResult r;
  try {
    r = core::compute_kl_divergence(model, path);
  } catch (const Error& e) {
    check_names_input(e, kKldFileName);
    return Outcome::Rejected;
  }
  SPECMOE_FUZZ_CHECK(r.n_ctx >= 4 && r.n_chunks >= 1, "a compared file with no context or chunk");
  SPECMOE_FUZZ_CHECK(r.n_scored == r.n_chunks * (r.n_ctx - 1 - r.n_ctx / 2), "wrong number of scored positions");
  SPECMOE_FUZZ_CHECK(static_cast<int>(r.chunk_kld.size()) == r.n_chunks, "one running KLD per chunk expected");
  SPECMOE_FUZZ_CHECK(r.same_top >= 0 && r.same_top <= 1, "same-top fraction outside [0, 1]");
  SPECMOE_FUZZ_CHECK(std::isfinite(r.ppl) && r.ppl >= 1, "the model's own perplexity is not a number >= 1");

  // Zero every record (the header and tokens stay): the model's side must not move.
  std::vector<uint8_t> zeroed(bytes.begin(), bytes.end());
  const size_t records_at = core::kLogProbHeaderBytes + 4 * static_cast<size_t>(r.n_chunks) * static_cast<size_t>(r.n_ctx);
  for (size_t i = records_at; i < zeroed.size(); ++i) zeroed[i] = 0;
  write_file(path, zeroed);
  const core::KLDivergenceResult z = core::compute_kl_divergence(model, path);
  SPECMOE_FUZZ_CHECK(z.ppl == r.ppl, "the model's perplexity depends on the base's records");
  return Outcome::Accepted;
}

}  // namespace specmoe::fuzz
