// Deprecation notes, once per old name: see deprecation.h.
#include "experiments/deprecation.h"

#include <cstdio>
#include <mutex>
#include <set>
#include <string>

namespace specmoe::exp {

void note_deprecated(std::string_view old_name, std::string_view new_name, std::string_view where) {
  static std::mutex mutex;
  static std::set<std::string> noted;
  std::lock_guard lock(mutex);
  if (!noted.insert(std::string(old_name)).second) return;
  std::fprintf(stderr, "specmoe: note: %.*s'%.*s' is deprecated and will be removed in the next release; use '%.*s'\n",
               static_cast<int>(where.size()), where.data(), static_cast<int>(old_name.size()), old_name.data(),
               static_cast<int>(new_name.size()), new_name.data());
}

}  // namespace specmoe::exp
