#include "channels/disk/disk_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include "channels/disk/direct_io.h"
#include "core/strings.h"

namespace isometry {

Status SyncFile(const FileRange& file) {
  while (::fdatasync(file.fd) != 0) {
    if (errno == EINTR) continue;
    const int err = errno;
    return Status(absl::ErrnoToStatusCode(err),
                  StrCat("fdatasync ", file.path, ": ", ErrnoString(err)));
  }
  return OkStatus();
}

Result<DiskFile> DiskFile::Open(const std::string& path, Mode mode, const std::string& shown) {
  int flags = O_CLOEXEC;
  switch (mode) {
    case Mode::kRead:
      flags |= O_RDONLY;
      break;
    case Mode::kWrite:
      flags |= O_WRONLY | O_CREAT;
      break;
    case Mode::kUpdate:
      flags |= O_RDWR | O_CREAT;
      break;
  }
  auto open = [&](int f) {
    int fd;
    do {
      fd = ::open(path.c_str(), f, 0644);
    } while (fd < 0 && errno == EINTR);
    return UniqueFd(fd);
  };
  UniqueFd fd = open(flags);
  if (!fd.valid()) {
    const int err = errno;
    return Status(absl::ErrnoToStatusCode(err), StrCat("open ", path, ": ", ErrnoString(err)));
  }
  UniqueFd direct = open((flags & ~O_CREAT) | O_DIRECT);
  if (!direct.valid() && errno != EINVAL) {  // EINVAL: no O_DIRECT on this file system
    const int err = errno;
    return Status(absl::ErrnoToStatusCode(err),
                  StrCat("open ", path, " with O_DIRECT: ", ErrnoString(err)));
  }
  return DiskFile(shown.empty() ? path : shown, std::move(fd), std::move(direct));
}

}  // namespace isometry
