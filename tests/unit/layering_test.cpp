// The layering of DESIGN.md at include level: base <- kernels <- moe <- core <- draft <- verify
// <- experiments. A file includes only from its own folder or folders to its left, and nothing
// above core/ names the CUDA backend except per-device implementations in files named for their
// device (*_cuda.cpp). Read from the source tree, so a stray include fails the suite.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

const std::vector<std::string> kOrder = {"base", "kernels", "moe", "core", "draft", "verify", "experiments"};

int rank_of(const std::string& folder) {
  for (size_t i = 0; i < kOrder.size(); ++i)
    if (kOrder[i] == folder) return static_cast<int>(i);
  return -1;
}

struct Include {
  std::string file, target;
  int line;
};

std::vector<Include> project_includes() {
  std::vector<Include> out;
  const std::regex inc(R"re(^\s*#\s*include\s*"([a-z_]+)/([^"]+)")re");
  const fs::path root(SPECMOE_SOURCE_DIR);
  for (const std::string& folder : kOrder) {
    for (const auto& e : fs::recursive_directory_iterator(root / folder)) {
      const std::string ext = e.path().extension().string();
      if (ext != ".h" && ext != ".cpp" && ext != ".cu") continue;
      std::ifstream in(e.path());
      std::string line;
      int n = 0;
      while (std::getline(in, line)) {
        ++n;
        std::smatch m;
        if (std::regex_search(line, m, inc))
          out.push_back({fs::relative(e.path(), root).string(), m[1].str() + "/" + m[2].str(), n});
      }
    }
  }
  return out;
}

TEST(Layering, IncludesPointOnlyDownTheLayers) {
  const std::vector<Include> all = project_includes();
  ASSERT_GT(all.size(), 200u) << "the scan found the sources";
  int checked = 0;
  for (const Include& i : all) {
    const std::string from = i.file.substr(0, i.file.find('/'));
    const std::string to = i.target.substr(0, i.target.find('/'));
    if (rank_of(to) < 0) continue;  // a header of the tests or a third party
    ++checked;
    EXPECT_LE(rank_of(to), rank_of(from)) << i.file << ":" << i.line << " includes " << i.target << " (" << to
                                          << " sits above " << from << ")";
  }
  EXPECT_GT(checked, 200);
}

TEST(Layering, OnlyDeviceFilesAboveCoreNameTheCudaBackend) {
  for (const Include& i : project_includes()) {
    const std::string from = i.file.substr(0, i.file.find('/'));
    if (rank_of(from) <= rank_of("core")) continue;
    const bool cuda = i.target.starts_with("kernels/cuda/") || i.target == "core/backend_cuda.h";
    if (!cuda) continue;
    EXPECT_TRUE(i.file.ends_with("_cuda.cpp")) << i.file << ":" << i.line << " includes " << i.target
                                               << ": only a per-device file (*_cuda.cpp) may";
  }
}

}  // namespace
