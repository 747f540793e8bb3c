// Verifiers by name, for the CLI and the experiment harness. As for drafters, the built-in table
// is built inside one function rather than by static initialisers.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "verify/verifier.h"

namespace specmoe::verify {

struct VerifierOptions {};  // no built-in verifier takes options yet (typical acceptance will)

using VerifierFactory = std::function<std::unique_ptr<Verifier>(const VerifierOptions&)>;

void register_verifier(const std::string& name, VerifierFactory factory);  // adds or replaces
// Throws Error(InvalidArgument) "unknown verifier 'x' (known: greedy, speculative)".
std::unique_ptr<Verifier> make_verifier(const std::string& name, const VerifierOptions& options = {});
std::vector<std::string> verifier_names();  // sorted

}  // namespace specmoe::verify
