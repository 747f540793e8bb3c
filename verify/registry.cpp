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

struct Registry {
  std::mutex mutex;
  std::map<std::string, VerifierFactory> factories;
};

Registry& registry() {
  static Registry* r = [] {
    auto* reg = new Registry;  // never destroyed: usable during static destruction too
    reg->factories["greedy"] = [](const VerifierOptions&) -> std::unique_ptr<Verifier> {
      return std::make_unique<GreedyVerifier>();
    };
    reg->factories["speculative"] = [](const VerifierOptions&) -> std::unique_ptr<Verifier> {
      return std::make_unique<SpeculativeVerifier>();
    };
    return reg;
  }();
  return *r;
}

}  // namespace

void register_verifier(const std::string& name, VerifierFactory factory) {
  if (name.empty() || !factory)
    throw_error(ErrorKind::InvalidArgument, "register_verifier: empty name or factory");
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  r.factories[name] = std::move(factory);
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
  {
    Registry& r = registry();
    std::lock_guard lock(r.mutex);
    auto it = r.factories.find(name);
    if (it != r.factories.end()) factory = it->second;
  }
  if (!factory)
    throw_error(ErrorKind::InvalidArgument, "unknown verifier '{}' (known: {})", name,
                fmt::join(verifier_names(), ", "));
  return factory(options);
}

}  // namespace specmoe::verify
