// Checkpoint files (file.hpp).
#include "file.hpp"

#include <cstring>

namespace spsd::detail {

CheckpointIoStats& checkpoint_stats() {
  thread_local CheckpointIoStats stats;
  return stats;
}

std::string errno_text() { return std::strerror(errno); }

void sync_dir(std::string_view op, const std::string& dir) { File(op, dir, O_RDONLY | O_DIRECTORY).sync(op); }

}  // namespace spsd::detail

namespace spsd {

CheckpointIoStats checkpoint_io_stats() { return detail::checkpoint_stats(); }
void reset_checkpoint_io_stats() { detail::checkpoint_stats() = {}; }

}  // namespace spsd
