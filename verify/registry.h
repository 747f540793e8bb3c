// Verifiers by name, for the CLI and the experiment harness. A name stands for one rule; each
// rule has an implementation per device kind (the distributions it verifies live there), and
// make_verifier picks the one for the device the target runs on. As for drafters, the built-in
// table is built inside one function rather than by static initialisers.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/device.h"
#include "verify/verifier.h"

namespace specmoe::verify {

struct VerifierOptions {
  Device device;  // where the target's distributions live (the target model's device)
};

using VerifierFactory = std::function<std::unique_ptr<Verifier>(const VerifierOptions&)>;

// Adds or replaces the implementation of `name` for one device kind (the CPU by default).
void register_verifier(const std::string& name, VerifierFactory factory, Device::Kind kind = Device::Kind::Cpu);
// Removes every implementation of `name` (built-ins included); false when there was none.
bool unregister_verifier(const std::string& name);
// Throws Error(InvalidArgument) "unknown verifier 'x' (known: greedy, speculative)", or naming the
// device kinds `name` has an implementation for.
std::unique_ptr<Verifier> make_verifier(const std::string& name, const VerifierOptions& options = {});
std::vector<std::string> verifier_names();  // sorted

}  // namespace specmoe::verify
