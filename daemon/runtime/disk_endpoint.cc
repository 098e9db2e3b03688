#include "daemon/runtime/disk_endpoint.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

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
  auto f = DiskFile::Open("/proc/self/fd/" + std::to_string(path_fd), mode);
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
  return std::unique_ptr<DiskEndpoint>(new DiskEndpoint(*std::move(file), shown, "", -1));
}

Result<std::unique_ptr<DiskEndpoint>> DiskEndpoint::OpenForWrite(const std::string& directory,
                                                                 const std::string& relative,
                                                                 uint64_t size) {
  ISO_RETURN_IF_ERROR(CheckRelativePath(relative));
  const std::string shown = directory + "/" + relative;
  const int top = ::open(directory.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (top < 0) return Errno("DSK directory " + directory, errno);
  const std::string parent = Dirname(relative);
  const int dir = OpenBeneath(top, parent, O_DIRECTORY | O_RDONLY, 0);
  const int err = errno;
  ::close(top);
  if (dir < 0) {
    return err == EXDEV ? absl::PermissionDeniedError(StrCat(shown, " leaves the memory's directory"))
                        : Errno(directory + "/" + parent, err);
  }
  static std::atomic<uint64_t> counter{0};
  const std::string temp_name =
      StrCat(".", Basename(relative), ".isometry-", getpid(), "-", counter.fetch_add(1));
  const int fd = OpenBeneath(dir, temp_name, O_CREAT | O_EXCL | O_RDWR, 0644);
  if (fd < 0) {
    const int e = errno;
    ::close(dir);
    return Errno(shown, e);
  }
  const std::string temp = directory + "/" + (parent == "." ? "" : parent + "/") + temp_name;
  if (ftruncate(fd, static_cast<off_t>(size)) != 0) {
    const int e = errno;
    ::close(fd);
    ::unlink(temp.c_str());
    ::close(dir);
    return Errno(shown, e);
  }
  auto file = Reopen(fd, shown, DiskFile::Mode::kUpdate);
  ::close(fd);
  if (!file.ok()) {
    ::unlink(temp.c_str());
    ::close(dir);
    return file.status();
  }
  return std::unique_ptr<DiskEndpoint>(new DiskEndpoint(*std::move(file), shown, temp, dir));
}

Status DiskEndpoint::Commit(bool durable) {
  if (temp_.empty()) return OkStatus();
  if (durable) ISO_RETURN_IF_ERROR(SyncFile(file_.Ref(0)));
  if (std::rename(temp_.c_str(), target_.c_str()) != 0) return Errno("rename to " + target_, errno);
  temp_.clear();
  if (durable && fsync(dir_fd_) != 0) return Errno("fsync of the directory of " + target_, errno);
  return OkStatus();
}

DiskEndpoint::~DiskEndpoint() {
  if (!temp_.empty()) ::unlink(temp_.c_str());
  if (dir_fd_ >= 0) ::close(dir_fd_);
}

}  // namespace isometry
