// The verifier registry: see registry.h.
#include "verify/registry.h"

#include <map>
#include <mutex>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/error.h"
#include "verify/greedy_verifier.h"
#include "verify/speculative_verifier.h"

namespace specmoe::verify {
namespace {

const char* kind_name(Device::Kind k) { return k == Device::Kind::Cpu ? "cpu" : "cuda"; }

struct Registry {
  std::mutex mutex;
  std::map<std::string, std::map<Device::Kind, VerifierFactory>> factories;
};

Registry& registry() {
  static Registry* r = [] {
    auto* reg = new Registry;  // never destroyed: usable during static destruction too
    // greedy: one implementation for every device (the argmax runs where the rows live).
    for (Device::Kind k : {Device::Kind::Cpu, Device::Kind::Cuda})
      reg->factories["greedy"][k] = [](const VerifierOptions&) -> std::unique_ptr<Verifier> {
        return std::make_unique<GreedyVerifier>();
      };
    reg->factories["speculative"][Device::Kind::Cpu] = [](const VerifierOptions&) -> std::unique_ptr<Verifier> {
      return std::make_unique<SpeculativeVerifier>();
    };
    reg->factories["speculative"][Device::Kind::Cuda] = [](const VerifierOptions&) {
      return make_speculative_verifier_cuda();
    };
    return reg;
  }();
  return *r;
}

}  // namespace

void register_verifier(const std::string& name, VerifierFactory factory, Device::Kind kind) {
  if (name.empty() || !factory)
    throw_error(ErrorKind::InvalidArgument, "register_verifier: empty name or factory");
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  r.factories[name][kind] = std::move(factory);
}

bool unregister_verifier(const std::string& name) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  return r.factories.erase(name) > 0;
}

std::vector<std::string> verifier_names() {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  std::vector<std::string> names;
  for (const auto& [name, f] : r.factories) names.push_back(name);
  return names;
}

std::unique_ptr<Verifier> make_verifier(const std::string& name, const VerifierOptions& options) {
  VerifierFactory factory;
  std::vector<std::string> kinds;
  bool known = false;
  {
    Registry& r = registry();
    std::lock_guard lock(r.mutex);
    auto it = r.factories.find(name);
    if (it != r.factories.end()) {
      known = true;
      for (const auto& [k, f] : it->second) kinds.push_back(kind_name(k));
      auto f = it->second.find(options.device.kind);
      if (f != it->second.end()) factory = f->second;
    }
  }
  if (!known)
    throw_error(ErrorKind::InvalidArgument, "unknown verifier '{}' (known: {})", name,
                fmt::join(verifier_names(), ", "));
  if (!factory)
    throw_error(ErrorKind::Unsupported, "verifier '{}' has no implementation for {} (it runs on: {})", name,
                options.device.name(), fmt::join(kinds, ", "));
  return factory(options);
}

}  // namespace specmoe::verify
