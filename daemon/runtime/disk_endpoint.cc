#include "daemon/runtime/disk_endpoint.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>

#include "core/random.h"
#include "core/unique_fd.h"

namespace isometry {

namespace {

Status Errno(const std::string& what, int err) {
  return Status(absl::ErrnoToStatusCode(err), StrCat(what, ": ", std::strerror(err)));
}

// openat2 confined to `dir_fd`: the kernel refuses escapes through `..` or
// symbolic links (RESOLVE_BENEATH).
int OpenBeneath(int dir_fd, const std::string& rel, uint64_t flags, uint64_t mode) {
  open_how how{};
  how.flags = flags | O_CLOEXEC;
  how.mode = mode;
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;
  return static_cast<int>(syscall(SYS_openat2, dir_fd, rel.c_str(), &how, sizeof how));
}

std::string Dirname(const std::string& rel) {
  const size_t slash = rel.rfind('/');
  return slash == std::string::npos ? "." : rel.substr(0, slash);
}
std::string Basename(const std::string& rel) {
  const size_t slash = rel.rfind('/');
  return slash == std::string::npos ? rel : rel.substr(slash + 1);
}

// Reopens an O_PATH descriptor as a real file through /proc, so the file
// checked by openat2 is the file used (no race with a renamed symlink).
Result<DiskFile> Reopen(int path_fd, const std::string& shown, DiskFile::Mode mode) {
  auto f = DiskFile::Open("/proc/self/fd/" + std::to_string(path_fd), mode, shown);
  if (!f.ok()) return Status(f.status().code(), StrCat(shown, ": ", f.status().message()));
  return f;
}

}  // namespace

Status CheckRelativePath(const std::string& relative) {
  if (relative.empty()) return InvalidArgument("DSK instance: empty file name");
  if (relative.front() == '/') {
    return absl::PermissionDeniedError(StrCat("DSK instance: '", relative,
                                              "' is absolute; name files relative to the memory's directory"));
  }
  size_t start = 0;
  while (start <= relative.size()) {
    const size_t end = std::min(relative.find('/', start), relative.size());
    if (relative.compare(start, end - start, "..") == 0) {
      return absl::PermissionDeniedError(
          StrCat("DSK instance: '", relative, "' leaves the memory's directory ('..')"));
    }
    start = end + 1;
  }
  return OkStatus();
}

Result<std::unique_ptr<DiskEndpoint>> DiskEndpoint::OpenForRead(const std::string& directory,
                                                                const std::string& relative,
                                                                uint64_t offset, uint64_t bytes) {
  ISO_RETURN_IF_ERROR(CheckRelativePath(relative));
  const std::string shown = directory + "/" + relative;
  const int dir = ::open(directory.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) return Errno("DSK directory " + directory, errno);
  const int path_fd = OpenBeneath(dir, relative, O_PATH, 0);
  const int err = errno;
  ::close(dir);
  if (path_fd < 0) {
    return err == EXDEV ? absl::PermissionDeniedError(StrCat(shown, " leaves the memory's directory"))
                        : Errno(shown, err);
  }
  struct stat st{};
  if (fstat(path_fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(path_fd);
    return InvalidArgument(shown, " is not a regular file");
  }
  if (static_cast<uint64_t>(st.st_size) < offset + bytes) {
    ::close(path_fd);
    return OutOfRange(shown, " holds ", st.st_size, " bytes; the instance needs ", bytes,
                      " bytes at offset ", offset);
  }
  auto file = Reopen(path_fd, shown, DiskFile::Mode::kRead);
  ::close(path_fd);
  if (!file.ok()) return file.status();
  return std::unique_ptr<DiskEndpoint>(new DiskEndpoint(*std::move(file), shown, -1, ""));
}

namespace {

// An unpredictable name for the moment between linkat and renameat.
std::string RandomName(const std::string& base) {
  return StrCat(".", base.substr(0, 200), ".isometry-", RandomHex(16));
}

// Copies all of `from` into `to` (both at offset 0): shared extents where
// the file system has them, an in-kernel copy otherwise.
Status CopyContent(int from, int to, uint64_t size, const std::string& shown) {
  if (size == 0 || ::ioctl(to, FICLONE, from) == 0) return OkStatus();
  loff_t in = 0, out = 0;
  while (static_cast<uint64_t>(in) < size) {
    const ssize_t n = ::copy_file_range(from, &in, to, &out, size - static_cast<uint64_t>(in), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Errno("copying the old content of " + shown, errno);
    if (n == 0) return Internal(shown, " shrank while its old content was copied");
  }
  return OkStatus();
}

}  // namespace

Result<std::unique_ptr<DiskEndpoint>> DiskEndpoint::OpenForWrite(const std::string& directory,
                                                                 const std::string& relative,
                                                                 uint64_t offset, uint64_t bytes,
                                                                 bool covers_instance) {
  ISO_RETURN_IF_ERROR(CheckRelativePath(relative));
  const std::string shown = directory + "/" + relative;
  const std::string base = Basename(relative);
  if (base.empty() || base == ".") return InvalidArgument("DSK instance: '", relative, "' names a directory");
  if (offset > std::numeric_limits<uint64_t>::max() - bytes ||
      offset + bytes > static_cast<uint64_t>(std::numeric_limits<off_t>::max())) {
    return InvalidArgument(shown, ": offset ", offset, " + ", bytes, " bytes is past the largest file size");
  }
  const uint64_t end = offset + bytes;
  UniqueFd top(::open(directory.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (top.get() < 0) return Errno("DSK directory " + directory, errno);
  const std::string parent = Dirname(relative);
  UniqueFd dir(OpenBeneath(top.get(), parent, O_DIRECTORY | O_RDONLY, 0));
  if (dir.get() < 0) {
    const int err = errno;
    return err == EXDEV ? absl::PermissionDeniedError(StrCat(shown, " leaves the memory's directory"))
                        : Errno(directory + "/" + parent, err);
  }
  // The target as it is now, without following a link in its last name
  // and without opening anything but a regular file (O_PATH first: opening
  // a device or FIFO someone planted could have effects).
  UniqueFd old(::openat(dir.get(), base.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC));
  uint64_t old_size = 0;
  if (old.get() < 0) {
    if (errno != ENOENT) return Errno(shown, errno);
  } else {
    struct stat st{};
    if (fstat(old.get(), &st) != 0) return Errno(shown, errno);
    if (S_ISLNK(st.st_mode)) {
      return absl::PermissionDeniedError(
          StrCat(shown, " is a symbolic link; DSK writes replace files, not links"));
    }
    if (!S_ISREG(st.st_mode)) return InvalidArgument(shown, " is not a regular file");
    old_size = static_cast<uint64_t>(st.st_size);
  }
  const bool keep_old = old.get() >= 0 && !(covers_instance && offset == 0 && old_size <= end);

  UniqueFd fd(::openat(dir.get(), ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0644));
  if (fd.get() < 0) {
    return Errno(StrCat(shown, ": an unnamed temporary file (O_TMPFILE) in its directory"), errno);
  }
  if (keep_old) {
    UniqueFd content(::open(StrCat("/proc/self/fd/", old.get()).c_str(), O_RDONLY | O_CLOEXEC));
    if (content.get() < 0) return Errno(shown, errno);
    ISO_RETURN_IF_ERROR(CopyContent(content.get(), fd.get(), old_size, shown));
  }
  if (ftruncate(fd.get(), static_cast<off_t>(std::max(old_size, end))) != 0) {
    return Errno(shown, errno);
  }
  ISO_ASSIGN_OR_RETURN(DiskFile file, Reopen(fd.get(), shown, DiskFile::Mode::kUpdate));
  return std::unique_ptr<DiskEndpoint>(
      new DiskEndpoint(std::move(file), shown, dir.release(), base));
}

Status DiskEndpoint::Commit(bool durable) {
  if (name_.empty()) return OkStatus();
  if (durable) ISO_RETURN_IF_ERROR(SyncFile(file_.Ref(0)));
  // Give the unnamed file a name nobody can predict, then move it over the
  // target: rename is atomic, linkat cannot replace.
  const std::string proc = StrCat("/proc/self/fd/", file_.fd());
  std::string temp;
  for (int attempt = 0;; ++attempt) {
    temp = RandomName(name_);
    if (::linkat(AT_FDCWD, proc.c_str(), dir_fd_, temp.c_str(), AT_SYMLINK_FOLLOW) == 0) break;
    if (errno != EEXIST || attempt == 3) return Errno("naming the new content of " + target_, errno);
  }
  if (::renameat(dir_fd_, temp.c_str(), dir_fd_, name_.c_str()) != 0) {
    const int err = errno;
    ::unlinkat(dir_fd_, temp.c_str(), 0);
    return Errno("rename to " + target_, err);
  }
  name_.clear();
  if (durable && fsync(dir_fd_) != 0) return Errno("fsync of the directory of " + target_, errno);
  return OkStatus();
}

DiskEndpoint::~DiskEndpoint() {
  // An uncommitted write is an unnamed file: closing it frees it.
  if (dir_fd_ >= 0) ::close(dir_fd_);
}

}  // namespace isometry
