// Deprecated spellings of CLI flags and TOML keys: they keep working for one release and print
// a note once per process, so scripts and configs can be updated before the old names go.
#pragma once
#include <string_view>

namespace specmoe::exp {

// "specmoe: note: <where>'<old_name>' is deprecated and will be removed in the next release; use
// '<new_name>'" on stderr, the first time `old_name` is used (later uses print nothing).
// `where` locates the use ("FILE:LINE: ", or "" for a flag).
void note_deprecated(std::string_view old_name, std::string_view new_name, std::string_view where = "");

}  // namespace specmoe::exp
