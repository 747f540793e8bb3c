// A sweep killed with SIGKILL loses nothing (issue 16, items 2 and 3). A real `specmoe run` of a
// small synth sweep (8 runs x 3 prompts) is killed at exact points named by the test-only hook
// SPECMOE_TEST_KILL_AT (experiments/test_hooks.h: after 1, several and all-but-one records, with
// half a journal line written, after a run file is saved, in the middle of writing a report or a
// run file) and at timed moments, then resumed with --resume; the result must equal an
// uninterrupted run's in tokens, texts and counts, record for record, with no record duplicated
// or missing and no temporary, journal or half-written file left. The same with --shard + merge.
// One writer per output folder: a live run (stopped with SPECMOE_TEST_STOP_AT) or a lock held by
// the test blocks a second run and a merge at once; a killed run's lock does not block --resume.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "cli_runner.h"
#include "experiments/json_text.h"
#include "experiments/output_lock.h"
#include "test_data.h"

namespace fs = std::filesystem;
using namespace specmoe;
using nlohmann::json;
using specmoe::testing::CliRun;
using specmoe::testing::Env;
using specmoe::testing::run_cli;

namespace {

constexpr int kRuns = 8, kPrompts = 3, kRecords = kRuns * kPrompts;

fs::path scratch_root() {
  static const fs::path dir = [] {
    fs::path d = specmoe::testing::scratch_dir() / fmt::format("run_recovery_{}", ::getpid());
    fs::remove_all(d);
    fs::create_directories(d);
    return d;
  }();
  return dir;
}

std::string fresh_dir(const std::string& name) {
  static std::atomic<int> counter{0};
  const fs::path d = scratch_root() / fmt::format("{}_{}", counter++, name);
  fs::remove_all(d);
  return d.string();
}

// ar, ngram, model (tiny-draft) and layerskip, at temperatures 0 and 0.8: greedy and sampled
// records, so resumed records must match in the random draws too.
const std::string& config() {
  static const std::string path = [] {
    const std::string p = (scratch_root() / "sweep.toml").string();
    std::ofstream(p) << R"([experiment]
name = "recovery"
seed = 11
repeats = 1
warmup = 0
threads = 1
[models.target]
synth = "tiny"
seed = 3
[models.draft]
synth = "tiny-draft"
seed = 3
[prompts]
list = ["Once upon a time", "abcabcabcabc", "你好，世界 🦙"]
[sampling]
max_tokens = 10
top_k = 0
top_p = 1.0
min_p = 0.0
[[strategy]]
name = "ar"
kind = "autoregressive"
target = "target"
[[strategy]]
name = "ngram"
kind = "speculative"
target = "target"
drafter = "ngram"
draft_max = 3
[[strategy]]
name = "model"
kind = "speculative"
target = "target"
drafter = "model"
draft = "draft"
draft_max = 3
[[strategy]]
name = "skip"
kind = "speculative"
target = "target"
drafter = "layerskip"
exit_layer = 2
draft_max = 2
[sweep]
temperature = [0.0, 0.8]
)";
    return p;
  }();
  return path;
}

Env env(const std::string& kill_at = "", const std::string& stop_at = "") {
  Env e = {{"SPECMOE_CACHE_DIR", (scratch_root() / "synth-cache").string()}};
  if (!kill_at.empty()) e.emplace_back("SPECMOE_TEST_KILL_AT", kill_at);
  if (!stop_at.empty()) e.emplace_back("SPECMOE_TEST_STOP_AT", stop_at);
  return e;
}

std::vector<std::string> run_args(const std::string& out, bool resume, const std::string& shard = "") {
  std::vector<std::string> a = {"run", config(), "-o", out, "-q"};
  if (resume) a.push_back("--resume");
  if (!shard.empty()) a.insert(a.end(), {"--shard", shard});
  return a;
}

// Everything of a record that does not depend on timing.
struct RecordKey {
  std::string run;
  int prompt = 0, repeat = 0;
  bool operator<(const RecordKey& o) const { return std::tie(run, prompt, repeat) < std::tie(o.run, o.prompt, o.repeat); }
};

json deterministic_part(const json& rec) {
  json d;
  for (const char* k : {"tokens", "n_prompt", "n_generated", "n_drafted", "n_accepted", "n_steps", "position_drafted",
                        "position_accepted", "accepted_length_histogram", "stopped_at_eog", "prompt_id", "draft_max"})
    d[k] = rec.at(k);
  d["text"] = *exp::get_text(rec, "text");
  return d;
}

// records.jsonl of a finished output folder, keyed; a repeated key fails the test.
std::map<RecordKey, json> read_records(const std::string& dir) {
  std::map<RecordKey, json> out;
  std::ifstream in(fs::path(dir) / "records.jsonl", std::ios::binary);
  EXPECT_TRUE(in) << dir << ": no records.jsonl";
  std::string line;
  while (std::getline(in, line)) {
    const json rec = json::parse(line);
    const RecordKey key{rec.at("run"), rec.at("prompt_index"), rec.at("repeat")};
    EXPECT_TRUE(out.emplace(key, deterministic_part(rec)).second)
        << dir << ": duplicate record " << key.run << " prompt " << key.prompt << " repeat " << key.repeat;
  }
  return out;
}

json read_json(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  EXPECT_TRUE(in) << p;
  return json::parse(in);
}

// Per run: what report.json says that does not depend on timing.
std::map<std::string, json> report_runs(const std::string& dir) {
  const json report = read_json(fs::path(dir) / "report.json");
  EXPECT_TRUE(report.at("missing_runs").empty()) << dir << ": " << report.at("missing_runs").dump();
  std::map<std::string, json> out;
  for (const auto& r : report.at("runs")) {
    json d;
    for (const char* k : {"n_records", "n_generated", "n_drafted", "n_accepted", "n_steps", "output_digest",
                          "identical_to_baseline", "acceptance_rate", "mean_accepted_length", "position_drafted",
                          "position_accepted", "baseline", "config_hash"})
      d[k] = r.at(k);
    out[r.at("name")] = d;
  }
  return out;
}

// Files an output folder may hold once a run or merge has finished: nothing temporary, no
// journal, and every JSON file complete.
void expect_clean_folder(const std::string& dir) {
  const std::set<std::string> top = {"experiment.json", ".specmoe.lock", "report.json", "report.md", "report.html",
                                     "runs.csv", "records.jsonl", "runs"};
  std::set<std::string> run_files;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    const fs::path rel = fs::relative(e.path(), dir);
    const std::string name = e.path().filename().string();
    if (rel.parent_path().empty()) {
      EXPECT_TRUE(top.count(name)) << dir << ": unexpected file " << rel;
    } else if (rel.parent_path() == "runs") {
      EXPECT_EQ(e.path().extension(), ".json") << dir << ": unexpected file " << rel;
      EXPECT_NE(name[0], '.') << dir << ": temporary file left " << rel;
      read_json(e.path());  // complete: parses
      run_files.insert(e.path().stem().string());
    } else {
      ADD_FAILURE() << dir << ": unexpected file " << rel;
    }
  }
  EXPECT_EQ(run_files.size(), static_cast<size_t>(kRuns)) << dir;
}

struct Reference {
  std::string dir;
  std::map<RecordKey, json> records;
  std::map<std::string, json> runs;
  double seconds = 0;  // wall time of the uninterrupted run
};

const Reference& reference() {
  static const Reference ref = [] {
    Reference r;
    r.dir = fresh_dir("reference");
    run_cli(run_args(fresh_dir("warm-cache"), false), env());  // synth models built outside the timing
    const auto t0 = std::chrono::steady_clock::now();
    const CliRun run = run_cli(run_args(r.dir, false), env());
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_EQ(run.exit_code, 0) << run.describe();
    r.records = read_records(r.dir);
    r.runs = report_runs(r.dir);
    return r;
  }();
  return ref;
}

void expect_equals_reference(const std::string& dir) {
  const Reference& ref = reference();
  ASSERT_EQ(ref.records.size(), static_cast<size_t>(kRecords));
  const auto records = read_records(dir);
  EXPECT_EQ(records.size(), ref.records.size()) << dir;
  for (const auto& [key, want] : ref.records) {
    auto it = records.find(key);
    if (it == records.end()) {
      ADD_FAILURE() << dir << ": missing record " << key.run << " prompt " << key.prompt;
      continue;
    }
    EXPECT_EQ(it->second, want) << dir << ": record " << key.run << " prompt " << key.prompt;
  }
  EXPECT_EQ(report_runs(dir), ref.runs) << dir;
  expect_clean_folder(dir);
}

// Runs with the kill hook and checks the process died of SIGKILL (not of anything else).
void run_killed(const std::vector<std::string>& args, const std::string& kill_at) {
  const CliRun r = run_cli(args, env(kill_at));
  EXPECT_EQ(r.term_signal, SIGKILL) << "kill at " << kill_at << ": " << r.describe();
}

void resume_to_completion(const std::string& out, const std::string& shard = "") {
  // The killed process's lock file is still there: it must not block.
  EXPECT_TRUE(fs::exists(fs::path(out) / exp::kLockFileName));
  const CliRun r = run_cli(run_args(out, true, shard), env());
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(r.err.find("error"), std::string::npos) << r.err;
}

class RunRecovery : public ::testing::Test {
 protected:
  void SetUp() override {
    SPECMOE_REQUIRE_CLI();
    ASSERT_EQ(reference().records.size(), static_cast<size_t>(kRecords));
    expect_clean_folder(reference().dir);
  }
};

// Number of complete record lines in a run's journal (its header excluded).
int journal_records(const std::string& out, const std::string& run) {
  std::ifstream in(fs::path(out) / "runs" / (run + ".partial.jsonl"), std::ios::binary);
  if (!in) return -1;
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  int lines = 0;
  for (char c : text) lines += c == '\n';
  return lines - 1;
}

TEST_F(RunRecovery, KilledAfterTheFirstRecord) {
  const std::string out = fresh_dir("after-1");
  run_killed(run_args(out, false), "record@1");
  EXPECT_EQ(journal_records(out, "ar-t0"), 1);  // the first record survived the kill
  EXPECT_FALSE(fs::exists(fs::path(out) / "runs" / "ar-t0.json"));
  resume_to_completion(out);
  expect_equals_reference(out);
}

TEST_F(RunRecovery, KilledAfterSeveralRecords) {
  const std::string out = fresh_dir("after-5");
  run_killed(run_args(out, false), "record@5");
  // Runs in order ar-t0 (3 records, saved), ar-t0.8 (2 of 3 so far).
  EXPECT_TRUE(fs::exists(fs::path(out) / "runs" / "ar-t0.json"));
  EXPECT_EQ(journal_records(out, "ar-t0.8"), 2);
  resume_to_completion(out);
  expect_equals_reference(out);
}

TEST_F(RunRecovery, KilledBeforeTheLastRecord) {
  const std::string out = fresh_dir("after-23");
  run_killed(run_args(out, false), fmt::format("record@{}", kRecords - 1));
  const CliRun r = run_cli(run_args(out, true), env("record@2"));  // only one record is left
  EXPECT_EQ(r.exit_code, 0) << "the resume ran more than the one missing record: " << r.describe();
  expect_equals_reference(out);
}

TEST_F(RunRecovery, KilledWithHalfAJournalLineWritten) {
  const std::string out = fresh_dir("torn-line");
  run_killed(run_args(out, false), "journal-line@4");
  // Record 4 is the first of ar-t0.8: its journal holds the header and half a line.
  EXPECT_EQ(journal_records(out, "ar-t0.8"), 0);
  resume_to_completion(out);
  expect_equals_reference(out);
}

TEST_F(RunRecovery, KilledBetweenSavingARunAndRemovingItsJournal) {
  const std::string out = fresh_dir("run-file");
  run_killed(run_args(out, false), "run-file@3");
  EXPECT_TRUE(fs::exists(fs::path(out) / "runs" / "ngram-t0.json"));
  EXPECT_EQ(journal_records(out, "ngram-t0"), 3);
  resume_to_completion(out);
  expect_equals_reference(out);
}

TEST_F(RunRecovery, KilledWhileWritingReportsAndRunFiles) {
  for (const std::string point : {"write:report.json@2", "write:records.jsonl@1", "write:report.html@3",
                                  "write:model-t0.8.json@1", "write:experiment.json@1"}) {
    SCOPED_TRACE(point);
    const std::string out = fresh_dir("write");
    run_killed(run_args(out, false), point);
    bool temp_left = false;
    for (const auto& e : fs::recursive_directory_iterator(out))
      temp_left |= e.path().filename().string().find(".tmp-") != std::string::npos;
    EXPECT_TRUE(temp_left) << "the kill did not land inside a write";
    resume_to_completion(out);
    expect_equals_reference(out);
  }
}

TEST_F(RunRecovery, KilledRepeatedlyWhileResuming) {
  const std::string out = fresh_dir("chain");
  run_killed(run_args(out, false), "record@2");
  run_killed(run_args(out, true), "record@3");
  run_killed(run_args(out, true), "write:report.json@1");
  run_killed(run_args(out, true), "journal-line@5");
  run_killed(run_args(out, true), "run-file@2");
  resume_to_completion(out);
  expect_equals_reference(out);
}

TEST_F(RunRecovery, KilledAtTimedMoments) {
  // Delays spread over the uninterrupted run's duration; fixed seed, so the same delays each time
  // (where a delay lands still varies with the machine's load: that is the point).
  std::mt19937 rng(2016);
  const double span_ms = std::max(50.0, 1000.0 * reference().seconds);
  std::uniform_real_distribution<double> delay(0.0, span_ms);
  const std::string out = fresh_dir("timed");
  int kills = 0;
  for (int attempt = 0; attempt < 12; ++attempt) {
    const auto args = run_args(out, attempt > 0);
    const pid_t pid = specmoe::testing::spawn_cli(args, env(), -1, -1);
    std::this_thread::sleep_for(std::chrono::microseconds(static_cast<int64_t>(1000 * delay(rng))));
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    kills += WIFSIGNALED(status);
  }
  RecordProperty("timed_kills_that_landed", kills);
  EXPECT_GT(kills, 0) << "every run finished before its kill";
  const CliRun r = run_cli(run_args(out, true), env());
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  expect_equals_reference(out);
}

TEST_F(RunRecovery, ShardsKilledResumedAndMerged) {
  const std::string a = fresh_dir("shard1"), b = fresh_dir("shard2"), merged = fresh_dir("merged");
  run_killed(run_args(a, false, "1/2"), "record@2");
  run_killed(run_args(b, false, "2/2"), "run-file@1");
  resume_to_completion(a, "1/2");
  resume_to_completion(b, "2/2");
  // A merge killed in the middle of writing the merged report is simply run again.
  run_killed({"merge", a, b, "-o", merged}, "write:report.json@1");
  const CliRun m = run_cli({"merge", a, b, "-o", merged}, env());
  ASSERT_EQ(m.exit_code, 0) << m.describe();
  expect_equals_reference(merged);
}

// ---------------------------------------------------------------------------------------------
// One writer per output folder.

TEST(OutputLock, SecondHolderInTheSameFolderIsRefusedUntilTheFirstReleases) {
  const std::string dir = fresh_dir("lock");
  fs::create_directories(dir);
  {
    exp::OutputLock first = exp::OutputLock::acquire(dir, "test holder");
    try {
      exp::OutputLock::acquire(dir, "second");
      FAIL() << "a second lock on a held folder";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::Runtime);
      const std::string msg = e.what();
      EXPECT_NE(msg.find(dir), std::string::npos) << msg;
      EXPECT_NE(msg.find(fmt::format("pid {}: test holder", ::getpid())), std::string::npos) << msg;
    }
  }
  EXPECT_TRUE(exp::OutputLock::acquire(dir, "after release").held());
}

TEST_F(RunRecovery, RunAndMergeOnAFolderAnotherProcessHoldsFailAtOnce) {
  const std::string out = fresh_dir("held");
  fs::create_directories(out);
  const exp::OutputLock lock = exp::OutputLock::acquire(out, "specmoe run (held by the test)");
  const auto t0 = std::chrono::steady_clock::now();
  for (const auto& args : {run_args(out, false), run_args(out, true),
                           std::vector<std::string>{"merge", reference().dir, "-o", out}}) {
    const CliRun r = run_cli(args, env());
    EXPECT_EQ(r.exit_code, 1) << r.describe();
    EXPECT_EQ(r.err, fmt::format("specmoe: error: {}: another specmoe process (pid {}: specmoe run (held by the test)) "
                                 "is writing to this output folder; wait for it to finish or choose another output "
                                 "folder\n",
                                 out, ::getpid()));
  }
  // Refused before any model was loaded or anything was written.
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 30.0);
  for (const auto& e : fs::directory_iterator(out))
    EXPECT_EQ(e.path().filename(), exp::kLockFileName) << "written despite the lock: " << e.path();
}

TEST_F(RunRecovery, LiveRunBlocksASecondRunThenItsStaleLockDoesNot) {
  const std::string out = fresh_dir("live");
  const pid_t pid = specmoe::testing::spawn_cli(run_args(out, false), env("", "record@2"), -1, -1);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, WUNTRACED), pid);
  ASSERT_TRUE(WIFSTOPPED(status)) << "the run did not stop at its second record";
  // The first run is alive (stopped) and holds the folder.
  const CliRun second = run_cli(run_args(out, true), env());
  EXPECT_EQ(second.exit_code, 1) << second.describe();
  EXPECT_NE(second.err.find(fmt::format("another specmoe process (pid {}: ", pid)), std::string::npos) << second.err;
  const CliRun merge = run_cli({"merge", reference().dir, "-o", out}, env());
  EXPECT_EQ(merge.exit_code, 1) << merge.describe();
  EXPECT_EQ(journal_records(out, "ar-t0"), 2) << "the refused processes touched the live run's files";
  // Killed while it holds the lock: the lock goes with the process, the file stays.
  ::kill(pid, SIGKILL);
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFSIGNALED(status));
  resume_to_completion(out);
  expect_equals_reference(out);
}

}  // namespace
