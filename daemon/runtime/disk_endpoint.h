// Files of a DSK memory as transfer endpoints.
//
// A DSK instance names a file by a path relative to the memory's
// directory. Every step is relative to the directory's fd, opened once at
// start (DiskMemory), through openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS
// | RESOLVE_NO_MAGICLINKS) (daemon/runtime/beneath.h): absolute paths,
// `..` and symbolic links anywhere in the name are refused, also links
// that stay inside, so a directory swapped for a link mid-copy cannot
// redirect a later step. Files that are not regular, and files with more
// than one hard link (unless the memory's allow_hard_links), are refused
// for reading and writing.
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
// copy opted out), checks that the target's directory is still the one
// found beneath the memory's directory (it fails if it was moved or
// replaced meanwhile), links the file under an unpredictable name and
// renames it over the target, then syncs the directory, all relative to
// the directory's fd. A transfer that fails, is cancelled or dies with the
// daemon leaves the target as it was (or absent) and no temporary file.
// Targets that are symbolic links or not regular files are refused.
// Bounds: the file a write produces (max(old size, offset + bytes)) is at
// most the memory's max_file_bytes, and it is charged at that size to the
// writer's quota_bytes until the write ends; both are checked before
// anything is created.
// Cost: a partial write first copies the whole target (on ext4 ~ the
// disk's read+write rate; free on XFS/btrfs with reflinks).
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>

#include "channels/disk/disk_file.h"
#include "core/status.h"
#include "core/unique_fd.h"
#include "daemon/runtime/disk_memory.h"

namespace isometry {

// Who may open a file. Every open acts for `as`, the uid of the session
// that asked (none: a session without one, gRPC's, or another node's
// half, which act as the daemon's own uid), and is let through as the
// kernel would let that uid through the file's owner and mode: a file of
// its own, one whose mode lets others read (or write), and, for writes, an
// ordinary file of the daemon's (world-readable: what DSK copies make).
// So a checkpoint (0600, given to its session's uid, or kept by the
// daemon) is neither read nor replaced by another uid's copies. A local
// session of uid 0 opens anything. Refused: PERMISSION_DENIED naming the
// owner and mode.
class DiskEndpoint {
 public:
  // Opens `relative` in `memory` for reading; the file must hold at least
  // `offset + bytes` bytes.
  static Result<std::unique_ptr<DiskEndpoint>> OpenForRead(
      const std::shared_ptr<DiskMemory>& memory, const std::string& relative, uint64_t offset,
      uint64_t bytes, std::optional<uid_t> as);
  // Prepares a write of the instance at `offset` (`bytes` of storage) of
  // `relative` (its directory must exist), charged to `owner`'s quota.
  // `covers_instance`: the copy writes every byte of the instance's
  // storage; only then (with offset 0 and no longer target) may the old
  // content be dropped instead of copied. The file ends up
  // max(old size, offset + bytes) long.
  static Result<std::unique_ptr<DiskEndpoint>> OpenForWrite(
      std::shared_ptr<DiskMemory> memory, const std::string& relative, uint64_t offset,
      uint64_t bytes, bool covers_instance, const std::string& owner, std::optional<uid_t> as);
  // Opens an existing file of at least `offset + bytes` bytes for writing
  // in place (a redistribution's pieces, each writing its own elements):
  // no temporary file, no rename, nothing charged; Commit only syncs. A
  // copy that fails leaves the file partly written.
  static Result<std::unique_ptr<DiskEndpoint>> OpenInPlace(
      const std::shared_ptr<DiskMemory>& memory, const std::string& relative, uint64_t offset,
      uint64_t bytes, std::optional<uid_t> as);
  ~DiskEndpoint();  // an uncommitted temporary file is unnamed: closing frees it

  FileRange Ref(uint64_t offset) const { return file_.Ref(offset); }
  // Durable (when asked), then renamed over the target.
  Status Commit(bool durable);
  const std::string& path() const { return target_; }

 private:
  DiskEndpoint(DiskFile file, std::string target)
      : file_(std::move(file)), target_(std::move(target)) {}
  static Result<std::unique_ptr<DiskEndpoint>> OpenExisting(
      const std::shared_ptr<DiskMemory>& memory, const std::string& relative, uint64_t offset,
      uint64_t bytes, DiskFile::Mode mode, std::optional<uid_t> as);
  DiskFile file_;
  std::string target_;  // directory + "/" + relative, for messages
  bool in_place_ = false;
  // Writes only:
  std::shared_ptr<DiskMemory> memory_;
  std::string parent_;  // the target's directory, relative to the memory's
  UniqueFd dir_;        // that directory (linkat, renameat, fsync)
  std::string name_;    // the target's name in dir_; empty once committed
  DiskCharge charge_;   // the file's bytes on the writer's quota
};

// "Who may open a file" above, for a file `st` describes, opened to read
// or (`write`) to write; `shown` names it. Also used for Active Access's
// file logs.
Status CheckDiskAccess(const struct stat& st, std::optional<uid_t> as, bool write,
                       const std::string& shown);

// Lexical checks of a relative path (no I/O): non-empty, relative, no `..`.
Status CheckRelativePath(const std::string& relative);

}  // namespace isometry
