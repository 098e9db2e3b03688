// The files the disk channels read and write, and their durability.
//
// The channels (disk_channel.h) never open, close or sync a file: the caller
// owns it, usually through a DiskFile, and hands the channel a FileRange,
// a non-owning view of the fds (channels/endpoint.h). Once a write transfer
// has finished, the caller makes it durable with SyncFile().
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include "channels/endpoint.h"
#include "core/status.h"
#include "core/unique_fd.h"

namespace isometry {

// fdatasync(file.fd), retrying EINTR; the error names the path.
Status SyncFile(const FileRange& file);

// Owner of the two fds a FileRange names: the file opened buffered and, where
// the file system supports it, again with O_DIRECT. Move-only; closes both.
// Closing does not sync: call SyncFile() first where the bytes must last.
class DiskFile {
 public:
  enum class Mode {
    kRead,    // O_RDONLY
    kWrite,   // O_WRONLY | O_CREAT (mode 0644), never truncates
    kUpdate,  // O_RDWR | O_CREAT
  };
  // Fails with the path and strerror (ENOENT, EACCES, EISDIR, ...). A file
  // system without O_DIRECT (EINVAL) is not an error: direct_fd() is -1 and
  // every I/O takes the buffered fd.
  // `shown`, when given, is the name errors and FileRange::path use instead
  // of `path` (e.g. the file's name when `path` is /proc/self/fd/N).
  static Result<DiskFile> Open(const std::string& path, Mode mode, const std::string& shown = "");

  // The FileRange of an instance starting at `offset` of this file; valid
  // while this object lives.
  FileRange Ref(uint64_t offset = 0) const { return {fd(), direct_fd(), offset, path_}; }
  int fd() const { return fd_.get(); }
  int direct_fd() const { return direct_fd_.get(); }
  const std::string& path() const { return path_; }

 private:
  DiskFile(std::string path, UniqueFd fd, UniqueFd direct_fd)
      : path_(std::move(path)), fd_(std::move(fd)), direct_fd_(std::move(direct_fd)) {}

  std::string path_;
  UniqueFd fd_;
  UniqueFd direct_fd_;  // invalid where the file system has no O_DIRECT
};

}  // namespace isometry
