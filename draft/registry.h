// Drafters by name, so the CLI and the experiment harness pick one from a string. The built-in
// table is built inside one function (not by static initialisers, which a static library's
// linker may drop); register_drafter adds more at run time.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/model.h"
#include "draft/drafter.h"

namespace specmoe::draft {

// Everything any built-in drafter may need; each uses only its own fields.
struct DrafterOptions {
  core::Model* target = nullptr;             // "model" (vocabulary check, vocab size), "layerskip",
                                             // "mtp" (draft with it), "eagle3" and "dflash" (its features); not owned
  std::shared_ptr<core::Model> draft_model;  // "model": an already loaded draft model ("mtp": a file
                                             // with the block, e.g. llama.cpp's --mtp export; "eagle3":
                                             // the EAGLE-3 head, required; "dflash": the
                                             // DFlash draft, required), or
  std::string draft_model_path;              // "model": a GGUF file to load
  int n_threads = 0;                         // "model": threads when loading (0 = all)
  std::string device = "cpu";                // "model": device when loading (cpu, cuda, cuda:N)
  core::KVCacheTypes cache_types;            // "model": KV cache types when loading (the
                                             // layer-skip draft uses the target's cache)
  int n_ctx = 0;                             // draft KV cache capacity (<= 0: the model's context)
  int ngram_min = 1;                         // "ngram": shortest n-gram matched
  int ngram_max = 3;                         // "ngram": longest n-gram matched
  int exit_layer = 0;                        // "layerskip": blocks run (0 = half the target's)
  int64_t draft_vocab = 0;                   // "model", "layerskip", "mtp", "eagle3": draft from the first
                                             // draft_vocab ids only (0 = all; model_drafter.h)
};

using DrafterFactory = std::function<std::unique_ptr<Drafter>(const DrafterOptions&)>;

// Adds or replaces a drafter.
void register_drafter(const std::string& name, DrafterFactory factory);
// Removes a drafter registered by name (built-ins included); false when there was none.
bool unregister_drafter(const std::string& name);
// Throws Error(InvalidArgument) "unknown drafter 'x' (known: dflash, eagle3, layerskip, model, mtp, ngram)" for an
// unknown name; the factory throws Error for missing or bad options.
std::unique_ptr<Drafter> make_drafter(const std::string& name, const DrafterOptions& options);
std::vector<std::string> drafter_names();  // sorted

}  // namespace specmoe::draft
