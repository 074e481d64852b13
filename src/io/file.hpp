#pragma once
// The files of a checkpoint: POSIX reads and writes that throw spsd::Error naming the file and
// errno, and count their bytes in this rank's checkpoint_io_stats().
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <string>
#include <string_view>

#include "spsd/io/checkpoint.hpp"

namespace spsd::detail {

// This rank's counters (a simulated rank is a thread).
CheckpointIoStats& checkpoint_stats();
std::string errno_text();

class File {
 public:
  File(std::string_view op, const std::string& path, int flags) : path_(path) {
    fd_ = ::open(path.c_str(), flags | O_CLOEXEC, 0644);
    SPSD_CHECK(fd_ >= 0, op, "cannot open ", path, ": ", errno_text());
  }
  ~File() {
    if (fd_ >= 0) ::close(fd_);
  }
  File(const File&) = delete;
  File& operator=(const File&) = delete;

  int64_t size(std::string_view op) const {
    struct stat st {};
    SPSD_CHECK(::fstat(fd_, &st) == 0, op, "cannot stat ", path_, ": ", errno_text());
    return st.st_size;
  }
  void write(std::string_view op, const void* data, int64_t bytes) {
    const char* p = static_cast<const char*>(data);
    while (bytes > 0) {
      const ssize_t n = ::write(fd_, p, static_cast<size_t>(bytes));
      if (n < 0 && errno == EINTR) continue;
      SPSD_CHECK(n > 0, op, "cannot write ", path_, ": ", errno_text());
      p += n, bytes -= n;
      checkpoint_stats().bytes_written += n;
    }
  }
  void read_at(std::string_view op, void* data, int64_t bytes, int64_t offset) const {
    char* p = static_cast<char*>(data);
    while (bytes > 0) {
      const ssize_t n = ::pread(fd_, p, static_cast<size_t>(bytes), offset);
      if (n < 0 && errno == EINTR) continue;
      SPSD_CHECK(n >= 0, op, "cannot read ", path_, ": ", errno_text());
      SPSD_CHECK(n > 0, op, "file ", path_, " is truncated: it ends before byte ", offset + bytes);
      p += n, bytes -= n, offset += n;
      checkpoint_stats().bytes_read += n;
    }
  }
  void sync(std::string_view op) { SPSD_CHECK(::fsync(fd_) == 0, op, "cannot fsync ", path_, ": ", errno_text()); }

 private:
  std::string path_;
  int fd_ = -1;
};

// A rename is durable only once the folder holding it is synced.
void sync_dir(std::string_view op, const std::string& dir);

}  // namespace spsd::detail
