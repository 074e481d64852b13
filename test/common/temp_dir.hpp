#pragma once
// A fresh folder under the system's temporary one, removed at the end of the test (Catch's
// REQUIRE: create it on the test's thread, not on a rank thread).
#include <catch2/catch.hpp>
#include <filesystem>
#include <stdlib.h>
#include <string>

namespace spsd_test {

struct TempDir {
  std::string path;
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "spsd-checkpoint-XXXXXX").string();
    REQUIRE(mkdtemp(pattern.data()) != nullptr);
    path = pattern;
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
};

}  // namespace spsd_test
