// Test-only fault injection for the experiment runner, so that tests can stop or kill a real
// `specmoe run` at an exact point instead of racing it with timers:
//   SPECMOE_TEST_KILL_AT=EVENT@N   the process sends itself SIGKILL at the N-th EVENT (N >= 1)
//   SPECMOE_TEST_STOP_AT=EVENT@N   ... SIGSTOP instead (a live process that holds its locks)
// Events, in the order a run meets them:
//   lock              the output folder's lock was taken
//   record            a finished record was appended to its run's journal
//   journal-line      half of a record's journal line is written (a torn line is left behind)
//   run-file          runs/<run>.json was saved (its journal not yet removed, report not rebuilt)
//   write:FILE        half of FILE's temporary copy is written (write_file_atomic, before rename)
// Unset variables cost one getenv per process. Malformed values are ignored (nothing is armed).
#pragma once
#include <string_view>

namespace specmoe::exp {

// True when either variable names an event: writers then split their writes so that the
// "half written" events exist.
bool test_hooks_armed();

// Counts `event` and kills or stops the process when a variable names this occurrence.
void test_hook(std::string_view event);

}  // namespace specmoe::exp
