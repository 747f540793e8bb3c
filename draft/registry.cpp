// The drafter registry: see registry.h.
#include "draft/registry.h"

#include <map>
#include <mutex>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/error.h"
#include "draft/dflash_drafter.h"
#include "draft/eagle3_drafter.h"
#include "draft/layerskip_drafter.h"
#include "draft/mtp_drafter.h"
#include "draft/model_drafter.h"
#include "draft/ngram_drafter.h"
#include "draft/vocab_check.h"

namespace specmoe::draft {
namespace {

std::unique_ptr<Drafter> make_model_drafter(const DrafterOptions& o) {
  if (o.target == nullptr)
    throw_error(ErrorKind::InvalidArgument, "drafter 'model': the target model is required (vocabulary check)");
  std::shared_ptr<core::Model> model = o.draft_model;
  if (!model) {
    if (o.draft_model_path.empty())
      throw_error(ErrorKind::InvalidArgument, "drafter 'model': no draft model given (draft_model path)");
    core::LoadOptions load;
    load.n_threads = o.n_threads;
    load.device = o.device;
    load.cache_types = o.cache_types;
    model = core::Model::load(o.draft_model_path, load);
  }
  check_vocab_compatible(*o.target, *model);
  auto d = std::make_unique<ModelDrafter>(std::move(model), o.target->config().n_vocab, -1, o.n_ctx);
  d->set_vocabulary_limit(o.draft_vocab);
  return d;
}

std::unique_ptr<Drafter> make_layerskip_drafter(const DrafterOptions& o) {
  if (o.target == nullptr)
    throw_error(ErrorKind::InvalidArgument, "drafter 'layerskip': the target model is required");
  const int exit_layer = o.exit_layer > 0 ? o.exit_layer : std::max(1, o.target->config().n_layer / 2);
  auto d = std::make_unique<LayerSkipDrafter>(*o.target, exit_layer, o.n_ctx);
  d->set_vocabulary_limit(o.draft_vocab);
  return d;
}

// The draft file of DrafterOptions, loaded unless given loaded (null when neither is given).
std::shared_ptr<core::Model> draft_file(const DrafterOptions& o) {
  if (o.draft_model || o.draft_model_path.empty()) return o.draft_model;
  core::LoadOptions load;
  load.n_threads = o.n_threads;
  load.device = o.device;
  load.cache_types = o.cache_types;
  return core::Model::load(o.draft_model_path, load);
}

std::unique_ptr<Drafter> make_mtp_drafter(const DrafterOptions& o) {
  if (o.target == nullptr) throw_error(ErrorKind::InvalidArgument, "drafter 'mtp': the target model is required");
  // The target's own block, or one from a draft file (a file of the block alone, llama.cpp's --mtp
  // export, beside a target converted without it).
  std::shared_ptr<core::Model> block = draft_file(o);
  auto d = block ? std::make_unique<MtpDrafter>(*o.target, std::move(block), o.n_ctx)
                 : std::make_unique<MtpDrafter>(*o.target, o.n_ctx);
  d->set_vocabulary_limit(o.draft_vocab);
  return d;
}

std::unique_ptr<Drafter> make_eagle3_drafter(const DrafterOptions& o) {
  if (o.target == nullptr) throw_error(ErrorKind::InvalidArgument, "drafter 'eagle3': the target model is required");
  std::shared_ptr<core::Model> head = draft_file(o);
  if (!head)
    throw_error(ErrorKind::InvalidArgument, "drafter 'eagle3': no EAGLE-3 head given (draft_model path, -md)");
  auto d = std::make_unique<Eagle3Drafter>(*o.target, std::move(head), o.n_ctx);
  d->set_vocabulary_limit(o.draft_vocab);
  return d;
}

std::unique_ptr<Drafter> make_dflash_drafter(const DrafterOptions& o) {
  if (o.target == nullptr) throw_error(ErrorKind::InvalidArgument, "drafter 'dflash': the target model is required");
  std::shared_ptr<core::Model> draft = draft_file(o);
  if (!draft)
    throw_error(ErrorKind::InvalidArgument, "drafter 'dflash': no DFlash draft given (draft_model path, -md)");
  if (o.draft_vocab != 0)
    throw_error(ErrorKind::InvalidArgument, "drafter 'dflash': a draft vocabulary limit does not apply (the block's "
                "head is the draft's own, or its target's, whole)");
  return std::make_unique<DFlashDrafter>(*o.target, std::move(draft), o.n_ctx);
}

struct Registry {
  std::mutex mutex;
  std::map<std::string, DrafterFactory> factories;
};

Registry& registry() {
  static Registry* r = [] {
    auto* reg = new Registry;  // never destroyed: usable during static destruction too
    reg->factories["model"] = make_model_drafter;
    reg->factories["ngram"] = [](const DrafterOptions& o) -> std::unique_ptr<Drafter> {
      return std::make_unique<NgramDrafter>(o.ngram_min, o.ngram_max);
    };
    reg->factories["layerskip"] = make_layerskip_drafter;
    reg->factories["mtp"] = make_mtp_drafter;
    reg->factories["eagle3"] = make_eagle3_drafter;
    reg->factories["dflash"] = make_dflash_drafter;
    return reg;
  }();
  return *r;
}

}  // namespace

void register_drafter(const std::string& name, DrafterFactory factory) {
  if (name.empty() || !factory)
    throw_error(ErrorKind::InvalidArgument, "register_drafter: empty name or factory");
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  r.factories[name] = std::move(factory);
}

bool unregister_drafter(const std::string& name) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  return r.factories.erase(name) > 0;
}

std::vector<std::string> drafter_names() {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  std::vector<std::string> names;
  for (const auto& [name, f] : r.factories) names.push_back(name);
  return names;
}

std::unique_ptr<Drafter> make_drafter(const std::string& name, const DrafterOptions& options) {
  DrafterFactory factory;
  {
    Registry& r = registry();
    std::lock_guard lock(r.mutex);
    auto it = r.factories.find(name);
    if (it != r.factories.end()) factory = it->second;
  }
  if (!factory)
    throw_error(ErrorKind::InvalidArgument, "unknown drafter '{}' (known: {})", name,
                fmt::join(drafter_names(), ", "));
  return factory(options);
}

}  // namespace specmoe::draft
