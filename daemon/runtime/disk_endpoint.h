// Files of a DSK memory as transfer endpoints.
//
// A DSK instance names a file by a path relative to the memory's
// directory. Paths that could leave it are refused: absolute paths, `..`
// components, and (checked by the kernel, openat2 RESOLVE_BENEATH) symbolic
// links that point outside.
//
// Reads open the file as it is.
//
// Writes never touch the target until they have all succeeded: they go to
// an unnamed file (O_TMPFILE) in the target's directory. A write that
// covers only part of the target (a sub-box, an instance at an offset, an
// instance smaller than the file, a layout with padding) starts from a copy
// of the target (FICLONE where the file system shares extents, else
// copy_file_range), so every byte outside the destination's elements keeps
// its old value. Commit() makes the data durable (fdatasync, unless the
// copy opted out), links the file under an unpredictable name and renames
// it over the target, then syncs the directory, all relative to the
// directory's fd. A transfer that fails, is cancelled or dies with the
// daemon leaves the target as it was (or absent) and no temporary file.
// Targets that are symbolic links or not regular files are refused.
// Cost: a partial write first copies the whole target (on ext4 ~ the
// disk's read+write rate; free on XFS/btrfs with reflinks).
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
  // Prepares a write of the instance at `offset` (`bytes` of storage) of
  // `relative` (its directory must exist). `covers_instance`: the copy
  // writes every byte of the instance's storage; only then (with offset 0
  // and no longer target) may the old content be dropped instead of
  // copied. The file ends up max(old size, offset + bytes) long.
  static Result<std::unique_ptr<DiskEndpoint>> OpenForWrite(const std::string& directory,
                                                            const std::string& relative,
                                                            uint64_t offset, uint64_t bytes,
                                                            bool covers_instance);
  ~DiskEndpoint();  // removes an uncommitted temporary file

  FileRef Ref(uint64_t offset) const { return file_.Ref(offset); }
  // Durable (when asked), then renamed over the target.
  Status Commit(bool durable);
  const std::string& path() const { return target_; }

 private:
  DiskEndpoint(DiskFile file, std::string target, int dir_fd, std::string name)
      : file_(std::move(file)), target_(std::move(target)), dir_fd_(dir_fd), name_(std::move(name)) {}
  DiskFile file_;
  std::string target_;  // directory + "/" + relative, for messages
  int dir_fd_ = -1;     // writes: the target's directory (linkat, renameat, fsync)
  std::string name_;    // writes: the target's name in dir_fd_; empty once committed
};

// Lexical checks of a relative path (no I/O): non-empty, relative, no `..`.
Status CheckRelativePath(const std::string& relative);

}  // namespace isometry
