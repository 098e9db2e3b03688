#include "daemon/runtime/disk_endpoint.h"

#include <fcntl.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>

#include "absl/strings/str_format.h"
#include "core/checked.h"
#include "core/random.h"
#include "core/strings.h"
#include "core/unique_fd.h"
#include "daemon/runtime/beneath.h"

namespace isometry {

namespace {

Status Errno(const std::string& what, int err) {
  return Status(absl::ErrnoToStatusCode(err), StrCat(what, ": ", ErrnoString(err)));
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

// Refuses what DSK endpoints never open: non-regular files and (unless
// the memory allows them) files with more than one hard link, which may
// be links to files outside the directory.
Status CheckFile(const struct stat& st, const DiskMemory& memory, const std::string& shown) {
  if (S_ISLNK(st.st_mode)) {
    return absl::PermissionDeniedError(
        StrCat(shown, " is a symbolic link; DSK writes replace files, not links"));
  }
  if (!S_ISREG(st.st_mode)) return InvalidArgument(shown, " is not a regular file");
  if (st.st_nlink > 1 && !memory.allow_hard_links()) {
    return absl::PermissionDeniedError(
        StrCat(shown, " has ", st.st_nlink, " hard links; DSK memory '", memory.name(),
               "' refuses files with more than one (memory.allow_hard_links)"));
  }
  return OkStatus();
}

}  // namespace

// "Who may open a file" (disk_endpoint.h).
Status CheckDiskAccess(const struct stat& st, std::optional<uid_t> as, bool write,
                       const std::string& shown) {
  const uid_t daemon = ::geteuid();
  const uid_t who = as.value_or(daemon);
  if ((as && who == 0) || st.st_uid == who) return OkStatus();
  const bool shared = st.st_uid == daemon && (st.st_mode & S_IROTH) != 0;
  const bool allowed = write ? (st.st_mode & S_IWOTH) != 0 || shared : (st.st_mode & S_IROTH) != 0;
  if (allowed) return OkStatus();
  return absl::PermissionDeniedError(StrCat(
      shown, " belongs to uid ", st.st_uid, " (mode ", absl::StrFormat("%04o", st.st_mode & 07777),
      "): ", as ? StrCat("uid ", who) : std::string("a session without a uid (gRPC)"), " may not ",
      write ? "write" : "read", " it"));
}

Status CheckRelativePath(const std::string& relative) {
  if (relative.empty()) return InvalidArgument("DSK instance: empty file name");
  if (relative.front() == '/') {
    return absl::PermissionDeniedError(
        StrCat("DSK instance: '", relative,
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

Result<std::unique_ptr<DiskEndpoint>> DiskEndpoint::OpenForRead(
    const std::shared_ptr<DiskMemory>& memory, const std::string& relative, uint64_t offset,
    uint64_t bytes, std::optional<uid_t> as) {
  return OpenExisting(memory, relative, offset, bytes, DiskFile::Mode::kRead, as);
}

Result<std::unique_ptr<DiskEndpoint>> DiskEndpoint::OpenInPlace(
    const std::shared_ptr<DiskMemory>& memory, const std::string& relative, uint64_t offset,
    uint64_t bytes, std::optional<uid_t> as) {
  ISO_ASSIGN_OR_RETURN(std::unique_ptr<DiskEndpoint> e,
                       OpenExisting(memory, relative, offset, bytes, DiskFile::Mode::kUpdate, as));
  e->in_place_ = true;
  return e;
}

Result<std::unique_ptr<DiskEndpoint>> DiskEndpoint::OpenExisting(
    const std::shared_ptr<DiskMemory>& memory, const std::string& relative, uint64_t offset,
    uint64_t bytes, DiskFile::Mode mode, std::optional<uid_t> as) {
  ISO_RETURN_IF_ERROR(CheckRelativePath(relative));
  const std::string shown = memory->directory() + "/" + relative;
  const std::optional<uint64_t> end = CheckedAdd(offset, bytes);
  if (!end) {
    return InvalidArgument(shown, ": offset ", offset, " + ", bytes, " bytes wraps past 2^64");
  }
  // O_PATH first: opening a FIFO or device someone planted could block or
  // have effects; only a regular file is reopened for reading.
  ISO_ASSIGN_OR_RETURN(UniqueFd path_fd, OpenBeneath(memory->dir_fd(), relative, O_PATH, shown));
  struct stat st {};
  if (fstat(path_fd.get(), &st) != 0) return Errno(shown, errno);
  ISO_RETURN_IF_ERROR(CheckFile(st, *memory, shown));
  ISO_RETURN_IF_ERROR(CheckDiskAccess(st, as, mode != DiskFile::Mode::kRead, shown));
  if (static_cast<uint64_t>(st.st_size) < *end) {
    return OutOfRange(shown, " holds ", st.st_size, " bytes; the instance needs ", bytes,
                      " bytes at offset ", offset);
  }
  ISO_ASSIGN_OR_RETURN(DiskFile file, Reopen(path_fd.get(), shown, mode));
  return std::unique_ptr<DiskEndpoint>(new DiskEndpoint(std::move(file), shown));
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

Result<std::unique_ptr<DiskEndpoint>> DiskEndpoint::OpenForWrite(
    std::shared_ptr<DiskMemory> memory, const std::string& relative, uint64_t offset,
    uint64_t bytes, bool covers_instance, const std::string& owner, std::optional<uid_t> as) {
  ISO_RETURN_IF_ERROR(CheckRelativePath(relative));
  const std::string shown = memory->directory() + "/" + relative;
  const std::string base = Basename(relative);
  if (base.empty() || base == ".") {
    return InvalidArgument("DSK instance: '", relative, "' names a directory");
  }
  // Bounds first: nothing is opened or created for a write refused here.
  const std::optional<uint64_t> end = CheckedAdd(offset, bytes);
  if (!end) {
    return InvalidArgument(shown, ": offset ", offset, " + ", bytes, " bytes wraps past 2^64");
  }
  if (*end > memory->max_file_bytes()) {
    return OutOfRange(shown, ": an instance of ", bytes, " bytes at offset ", offset,
                      " ends at byte ", *end, ", past max_file_bytes of DSK memory '",
                      memory->name(), "' (", memory->max_file_bytes(), ")");
  }
  const std::string parent = Dirname(relative);
  Result<UniqueFd> opened = OpenBeneath(memory->dir_fd(), parent, O_DIRECTORY | O_RDONLY,
                                        memory->directory() + "/" + parent);
  if (absl::IsNotFound(opened.status())) {
    // Named as the client named it: the daemon's own paths are not its
    // business, and what it can do about it is.
    return NotFound("DSK memory '", memory->name(), "': the directory '", parent, "' of '",
                    relative,
                    "' does not exist; DSK copies create files, never directories (make it "
                    "first, in the memory's directory on this node)");
  }
  ISO_ASSIGN_OR_RETURN(UniqueFd dir, std::move(opened));
  // The target as it is now, without following a link in its last name
  // and without opening anything but a regular file (O_PATH first: opening
  // a device or FIFO someone planted could have effects). One component
  // relative to the directory's fd: nothing to resolve but the name.
  UniqueFd old(::openat(dir.get(), base.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC));
  uint64_t old_size = 0;
  if (!old.valid()) {
    if (errno != ENOENT) return Errno(shown, errno);
  } else {
    struct stat st {};
    if (fstat(old.get(), &st) != 0) return Errno(shown, errno);
    ISO_RETURN_IF_ERROR(CheckFile(st, *memory, shown));
    ISO_RETURN_IF_ERROR(CheckDiskAccess(st, as, true, shown));
    old_size = static_cast<uint64_t>(st.st_size);
  }
  const uint64_t size = std::max(old_size, *end);
  if (size > memory->max_file_bytes()) {
    return OutOfRange(shown, " holds ", old_size, " bytes, past max_file_bytes of DSK memory '",
                      memory->name(), "' (", memory->max_file_bytes(), "); it cannot be rewritten");
  }
  ISO_ASSIGN_OR_RETURN(DiskCharge charge, memory->Charge(owner, size));
  const bool keep_old = old.valid() && !(covers_instance && offset == 0 && old_size <= *end);

  UniqueFd fd(::openat(dir.get(), ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0644));
  if (!fd.valid()) {
    return Errno(StrCat(shown, ": an unnamed temporary file (O_TMPFILE) in its directory"), errno);
  }
  if (keep_old) {
    UniqueFd content(::open(StrCat("/proc/self/fd/", old.get()).c_str(), O_RDONLY | O_CLOEXEC));
    if (!content.valid()) return Errno(shown, errno);
    ISO_RETURN_IF_ERROR(CopyContent(content.get(), fd.get(), old_size, shown));
  }
  if (ftruncate(fd.get(), static_cast<off_t>(size)) != 0) return Errno(shown, errno);
  ISO_ASSIGN_OR_RETURN(DiskFile file, Reopen(fd.get(), shown, DiskFile::Mode::kUpdate));
  std::unique_ptr<DiskEndpoint> e(new DiskEndpoint(std::move(file), shown));
  e->memory_ = std::move(memory);
  e->parent_ = parent;
  e->dir_ = std::move(dir);
  e->name_ = base;
  e->charge_ = std::move(charge);
  return e;
}

Status DiskEndpoint::Commit(bool durable) {
  if (in_place_) return durable ? SyncFile(file_.Ref(0)) : OkStatus();
  if (name_.empty()) return OkStatus();
  if (durable) ISO_RETURN_IF_ERROR(SyncFile(file_.Ref(0)));
  // The directory must still be the one beneath the memory's: one moved
  // out (or swapped for a link) while the copy ran gets nothing.
  // (A narrow race stays: a directory moved between this check and the
  // rename below still gets the file; see SECURITY_NOTES.md.)
  Result<UniqueFd> now = OpenBeneath(memory_->dir_fd(), parent_, O_PATH | O_DIRECTORY,
                                     memory_->directory() + "/" + parent_);
  struct stat was {
  }, is{};
  if (!now.ok() || fstat(dir_.get(), &was) != 0 || fstat(now->get(), &is) != 0 ||
      was.st_dev != is.st_dev || was.st_ino != is.st_ino) {
    return absl::AbortedError(StrCat("the directory of ", target_,
                                     " was moved or replaced during the copy; nothing was written",
                                     now.ok() ? "" : StrCat(" (", now.status().message(), ")")));
  }
  // Give the unnamed file a name nobody can predict, then move it over the
  // target: rename is atomic, linkat cannot replace.
  const std::string proc = StrCat("/proc/self/fd/", file_.fd());
  std::string temp;
  for (int attempt = 0;; ++attempt) {
    temp = RandomName(name_);
    if (::linkat(AT_FDCWD, proc.c_str(), dir_.get(), temp.c_str(), AT_SYMLINK_FOLLOW) == 0) break;
    if (errno != EEXIST || attempt == 3) {
      return Errno("naming the new content of " + target_, errno);
    }
  }
  if (::renameat(dir_.get(), temp.c_str(), dir_.get(), name_.c_str()) != 0) {
    const int err = errno;
    ::unlinkat(dir_.get(), temp.c_str(), 0);
    return Errno("rename to " + target_, err);
  }
  name_.clear();
  charge_.Release();
  if (durable && fsync(dir_.get()) != 0) {
    return Errno("fsync of the directory of " + target_, errno);
  }
  return OkStatus();
}

DiskEndpoint::~DiskEndpoint() = default;

}  // namespace isometry
