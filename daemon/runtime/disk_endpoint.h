// Files of a DSK memory as transfer endpoints.
//
// A DSK instance names a file by a path relative to the memory's
// directory. Paths that could leave it are refused: absolute paths, `..`
// components, and (checked by the kernel, openat2 RESOLVE_BENEATH) symbolic
// links that point outside.
//
// Reads open the file as it is. Writes go to a temporary file next to the
// target; Commit() makes the data durable (fdatasync, unless the copy opted
// out), renames it over the target and syncs the directory, so a transfer
// that fails or is cancelled never leaves a file that looks complete: the
// target keeps its old content (or stays absent) and the temporary file is
// removed. A written file holds exactly the destination instance's storage
// (offset bytes of zeros first, when the instance has an offset).
#pragma once

#include <memory>
#include <string>

#include "channels/disk/disk_channel.h"
#include "core/status.h"

namespace isometry {

class DiskEndpoint {
 public:
  // Opens `relative` under `directory` for reading; the file must hold at
  // least `offset + bytes` bytes.
  static Result<std::unique_ptr<DiskEndpoint>> OpenForRead(const std::string& directory,
                                                           const std::string& relative,
                                                           uint64_t offset, uint64_t bytes);
  // Creates a temporary file of `size` bytes for `relative` (its directory
  // must exist).
  static Result<std::unique_ptr<DiskEndpoint>> OpenForWrite(const std::string& directory,
                                                            const std::string& relative,
                                                            uint64_t size);
  ~DiskEndpoint();  // removes an uncommitted temporary file

  FileRef Ref(uint64_t offset) const { return file_.Ref(offset); }
  // Durable (when asked), then renamed over the target.
  Status Commit(bool durable);
  const std::string& path() const { return target_; }

 private:
  DiskEndpoint(DiskFile file, std::string target, std::string temp, int dir_fd)
      : file_(std::move(file)), target_(std::move(target)), temp_(std::move(temp)), dir_fd_(dir_fd) {}
  DiskFile file_;
  std::string target_;  // absolute path of the target
  std::string temp_;    // absolute path of the temporary file; empty for reads or once committed
  int dir_fd_ = -1;     // the target's directory (fsync after rename)
};

// Lexical checks of a relative path (no I/O): non-empty, relative, no `..`.
Status CheckRelativePath(const std::string& relative);

}  // namespace isometry
