// Fuzz entry point of the result files specmoe reads back (target fuzz_results): runs/<run>.json
// and experiment.json (`--resume` and `specmoe merge` read them from folders that a crash, a
// full disk or another tool may have damaged), the run journal that `--resume` restores from,
// and the JSON text helpers every output goes through. Shared by tests/fuzz/results_fuzz.cpp and
// the regression replay (tests/unit/fuzz_regression_test.cpp); contract as in fuzz_entry.h.
//
// Input: byte 0 picks the reader (mod 4); the rest is the file (or, for the text helpers, the
// bytes).
//
// Oracles:
//  - a run file or experiment file loads or throws one specmoe::Error naming the path; a loaded
//    file written back and read again gives the same JSON (the writers dump strictly, so a text
//    field that is not UTF-8 would throw here);
//  - a journal restores only records of its run, each (prompt_index, repeat) once, and restoring
//    the journal it rewrote gives the same records again;
//  - utf8_replace_invalid always returns valid UTF-8, replaces nothing exactly when the input is
//    valid (and then returns it unchanged); set_text/get_text give the bytes back through a
//    strict dump and parse; base64 round-trips, and base64_decode accepts only text that
//    base64_encode of its result gives back.
#pragma once
#include <set>
#include <string>
#include <utility>

#include "experiments/json_text.h"
#include "experiments/result_json.h"
#include "experiments/run_journal.h"
#include "fuzz_entry.h"

namespace specmoe::fuzz {

inline constexpr const char* kRunFileName = "fuzz-run.json";
inline constexpr const char* kExperimentFileName = "fuzz-experiment.json";
inline constexpr const char* kJournalName = "fuzz-run.partial.jsonl";

inline std::string strict_dump(const nlohmann::json& j) { return exp::dump_json(j); }

inline Outcome run_results(std::span<const uint8_t> bytes) {
  if (bytes.empty()) return Outcome::Rejected;
  const std::span<const uint8_t> body = bytes.subspan(1);
  const std::string_view text(reinterpret_cast<const char*>(body.data()), body.size());
  switch (bytes[0] % 4) {
    case 0: {
      const std::string path = (scratch_dir() / kRunFileName).string();
      write_file(path, body);
      exp::RunFile f;
      try {
        f = exp::load_run_file(path);
      } catch (const Error& e) {
        check_names_input(e, kRunFileName);
        return Outcome::Rejected;
      }
      const std::string once = strict_dump(exp::run_file_to_json(f));
      const exp::RunFile again = exp::run_file_from_json(nlohmann::json::parse(once), path);
      SPECMOE_FUZZ_CHECK(strict_dump(exp::run_file_to_json(again)) == once, "a run file does not round-trip");
      return Outcome::Accepted;
    }
    case 1: {
      const std::string path = (scratch_dir() / kExperimentFileName).string();
      write_file(path, body);
      exp::ExperimentFile f;
      try {
        f = exp::load_experiment_file(path);
      } catch (const Error& e) {
        check_names_input(e, kExperimentFileName);
        return Outcome::Rejected;
      }
      const std::string once = strict_dump(exp::experiment_file_to_json(f));
      const std::string again_path = (scratch_dir() / "fuzz-experiment-again.json").string();
      write_file(again_path, {reinterpret_cast<const uint8_t*>(once.data()), once.size()});
      SPECMOE_FUZZ_CHECK(strict_dump(exp::experiment_file_to_json(exp::load_experiment_file(again_path))) == once,
                         "an experiment file does not round-trip");
      return Outcome::Accepted;
    }
    case 2: {
      // The journal of run "r" with config hash "h" (the corpus's header lines name them).
      const std::string path = (scratch_dir() / kJournalName).string();
      write_file(path, body);
      std::vector<exp::PromptRecord> restored, again;
      try {
        exp::RunJournal j = exp::RunJournal::start(path, "r", "h", true, &restored);
      } catch (const Error& e) {
        check_names_input(e, kJournalName);
        return Outcome::Rejected;
      }
      std::set<std::pair<int, int>> seen;
      for (const auto& r : restored) {
        SPECMOE_FUZZ_CHECK(r.run == "r", "the journal restored another run's record");
        SPECMOE_FUZZ_CHECK(seen.insert({r.prompt_index, r.repeat}).second, "the journal restored a record twice");
      }
      exp::RunJournal j = exp::RunJournal::start(path, "r", "h", true, &again);
      SPECMOE_FUZZ_CHECK(again.size() == restored.size(), "restoring a rewritten journal changed its record count");
      for (size_t i = 0; i < again.size(); ++i)
        SPECMOE_FUZZ_CHECK(strict_dump(exp::record_to_json(again[i])) == strict_dump(exp::record_to_json(restored[i])),
                           "restoring a rewritten journal changed a record");
      j.remove();
      return restored.empty() ? Outcome::Rejected : Outcome::Accepted;
    }
    default: {
      bool replaced = true;
      const std::string clean = exp::utf8_replace_invalid(text, &replaced);
      const bool valid = exp::is_valid_utf8(text);
      SPECMOE_FUZZ_CHECK(exp::is_valid_utf8(clean), "utf8_replace_invalid returned invalid UTF-8");
      SPECMOE_FUZZ_CHECK(replaced == !valid, "utf8_replace_invalid's flag disagrees with is_valid_utf8");
      SPECMOE_FUZZ_CHECK(!valid || clean == text, "utf8_replace_invalid changed valid UTF-8");
      nlohmann::json j = nlohmann::json::object();
      exp::set_text(j, "text", text);
      const nlohmann::json back = nlohmann::json::parse(strict_dump(j));
      const std::optional<std::string> got = exp::get_text(back, "text");
      SPECMOE_FUZZ_CHECK(got && *got == text, "set_text/get_text lost bytes");
      SPECMOE_FUZZ_CHECK(exp::base64_decode(exp::base64_encode(text)) == std::string(text), "base64 does not round-trip");
      if (const std::optional<std::string> decoded = exp::base64_decode(text))
        SPECMOE_FUZZ_CHECK(exp::base64_encode(*decoded) == text, "base64_decode accepted non-canonical text");
      return Outcome::Accepted;
    }
  }
}

}  // namespace specmoe::fuzz
