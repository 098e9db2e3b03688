// Incremental checkpoints of a watched allocation (Active Access, issue
// #19): the allocation's image in a file of a DSK memory, rewritten in
// full the first time and afterwards only in the pages its dirty_pages
// regions saw written since the last checkpoint.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/strings.h"
#include "daemon/node/node_impl.h"
#include "daemon/runtime/beneath.h"
#include "daemon/runtime/disk_memory.h"

namespace isometry {
namespace {

constexpr uint64_t kPage = 4096;

Status PWriteAll(int fd, const std::byte* data, uint64_t n, uint64_t offset,
                 const std::string& shown) {
  while (n > 0) {
    const ssize_t w = ::pwrite(fd, data, n, static_cast<off_t>(offset));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return Internal("checkpoint write to ", shown, ": ", ErrnoString(errno));
    data += w;
    offset += static_cast<uint64_t>(w);
    n -= static_cast<uint64_t>(w);
  }
  return OkStatus();
}

}  // namespace

Result<CheckpointReport> Node::Checkpoint(const std::string& session, uint64_t allocation,
                                          const std::string& memory, const std::string& file,
                                          bool full) {
  std::shared_ptr<Allocation> a;
  std::string owner;
  {
    absl::MutexLock lock(&impl_->mu);
    ISO_ASSIGN_OR_RETURN(Session * s, impl_->FindSession(session));
    auto it = impl_->allocations.find(allocation);
    if (it == impl_->allocations.end() || it->second->owner != s->id) {
      return PermissionDenied("allocation ", allocation,
                              " is not this session's: only its owner checkpoints it");
    }
    a = it->second;
    owner = Impl::DiskOwnerOf(*s);
  }
  ISO_ASSIGN_OR_RETURN(std::shared_ptr<DiskMemory> disk, impl_->runtime->FindDisk(memory));
  const uint64_t bytes = a->shm.size();
  if (bytes > disk->max_file_bytes()) {
    return ResourceExhausted("checkpoint of ", bytes, " bytes: memory '", memory,
                             "' takes files of at most ", disk->max_file_bytes(), " bytes");
  }
  const std::string shown = StrCat(memory, ":", file);
  ISO_ASSIGN_OR_RETURN(UniqueFd fd,
                       OpenBeneath(disk->dir_fd(), file, O_RDWR | O_CREAT | O_NONBLOCK, shown));
  struct stat st {};
  if (fstat(fd.get(), &st) != 0) return Internal("fstat ", shown, ": ", ErrnoString(errno));
  if (!S_ISREG(st.st_mode) || (st.st_nlink > 1 && !disk->allow_hard_links())) {
    return PermissionDenied(shown, " is not a regular file with one link");
  }
  ISO_ASSIGN_OR_RETURN(DiskCharge charge, disk->Charge(owner, bytes));
  std::shared_ptr<WatchState> watch;
  {
    absl::MutexLock lock(&impl_->mu);
    watch = a->watch;
  }
  CheckpointReport rep;
  // Incremental only over an image of this size and pages being tracked;
  // the dirty set is taken (and cleared) before the pages are read, so a
  // write landing meanwhile is in this image or marked for the next.
  rep.full = full || !watch || static_cast<uint64_t>(st.st_size) != bytes;
  std::vector<uint64_t> pages;
  if (watch) pages = watch->DirtyPages(/*clear=*/true);
  if (rep.full) {
    ISO_RETURN_IF_ERROR(PWriteAll(fd.get(), a->shm.data(), bytes, 0, shown));
    rep.bytes_written = bytes;
    rep.pages_written = (bytes + kPage - 1) / kPage;
  } else {
    for (uint64_t p : pages) {
      const uint64_t off = p * kPage;
      if (off >= bytes) continue;
      const uint64_t n = std::min(kPage, bytes - off);
      ISO_RETURN_IF_ERROR(PWriteAll(fd.get(), a->shm.data() + off, n, off, shown));
      rep.bytes_written += n;
      ++rep.pages_written;
    }
  }
  if (::fdatasync(fd.get()) != 0) return Internal("fdatasync ", shown, ": ", ErrnoString(errno));
  rep.file_bytes = bytes;
  return rep;
}

}  // namespace isometry
