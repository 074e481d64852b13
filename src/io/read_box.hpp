#pragma once
// Reading a box of a stored tensor: only the checksummed chunks that hold its bytes, each
// verified; each data file opened once per load.
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "file.hpp"
#include "manifest.hpp"

namespace spsd::detail {

// The data files one load opens, each once, its size checked against the manifest first.
class Readers {
 public:
  Readers(std::string_view op, const Manifest& m) : op_(op), m_(m) {}
  const File& get(const std::string& name);

 private:
  std::string_view op_;
  const Manifest& m_;
  std::map<std::string, std::unique_ptr<File>> files_;
};

// Fills the target box (row-major at out) from the stored boxes it meets, reading only the
// checksummed chunks that hold those bytes, and verifying each chunk read.
void read_box(std::string_view op, const std::string& name, const StoredTensor& t, const Manifest& m, Readers& files,
              const Box& target, char* out);

}  // namespace spsd::detail
