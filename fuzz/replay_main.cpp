// The corpus replayer: a main() for a fuzz target without libFuzzer, so that `make test` (and
// `ctest --preset asan`) runs every committed input through the target with the compiler and
// sanitizers of that build. A fixed crash whose reproducer is in fuzz/corpus/ stays fixed.
//
// Usage: fuzz_<target>_replay PATH...  (files, or directories whose regular files are read in
// name order). Exits 1 when a path cannot be read or no input was found at all, so a corpus
// that went missing fails the test instead of passing vacuously.

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <system_error>
#include <vector>

#include "support.hpp"

namespace {

bool read_whole(const std::filesystem::path& path, std::string& out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return false;
  }
  out.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return !in.bad();
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::filesystem::path> inputs;
  for (int i = 1; i < argc; ++i) {
    const std::filesystem::path path(argv[i]);
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec)) {
      std::vector<std::filesystem::path> files;
      for (const auto& entry : std::filesystem::directory_iterator(path, ec)) {
        if (entry.is_regular_file()) {
          files.push_back(entry.path());
        }
      }
      std::sort(files.begin(), files.end());
      inputs.insert(inputs.end(), files.begin(), files.end());
    } else {
      inputs.push_back(path);
    }
    if (ec) {
      std::fprintf(stderr, "cannot list %s: %s\n", argv[i], ec.message().c_str());
      return 1;
    }
  }
  if (inputs.empty()) {
    std::fprintf(stderr, "no inputs found (usage: %s FILE-OR-DIRECTORY...)\n", argv[0]);
    return 1;
  }
  std::string data;
  for (const auto& path : inputs) {
    if (!read_whole(path, data)) {
      std::fprintf(stderr, "cannot read %s\n", path.c_str());
      return 1;
    }
    // Printed before the run, so that the input of a crash is the last one named.
    std::fprintf(stderr, "running %s (%zu bytes)\n", path.c_str(), data.size());
    // An exactly sized copy, as libFuzzer passes it, so that ASan sees a read past the end.
    const auto copy = std::make_unique<std::uint8_t[]>(data.size());
    std::copy(data.begin(), data.end(), copy.get());
    LLVMFuzzerTestOneInput(copy.get(), data.size());
  }
  std::fprintf(stderr, "replayed %zu inputs\n", inputs.size());
  return 0;
}
