#include "daemon/node/checkpoint_files.h"

#include <absl/status/status.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/strings.h"
#include "daemon/runtime/beneath.h"
#include "daemon/runtime/disk_memory.h"

namespace isometry {
namespace {

Result<UniqueFd> OpenOne(const DiskMemory& disk, const std::string& file, bool create,
                         const std::string& shown, uint64_t& bytes) {
  const int flags = O_RDWR | O_NONBLOCK | (create ? O_CREAT : 0);
  ISO_ASSIGN_OR_RETURN(UniqueFd fd, OpenBeneath(disk.dir_fd(), file, flags, shown));
  struct stat st {};
  if (fstat(fd.get(), &st) != 0) return Internal("fstat ", shown, ": ", ErrnoString(errno));
  if (!S_ISREG(st.st_mode) || (st.st_nlink > 1 && !disk.allow_hard_links())) {
    return PermissionDenied(shown, " is not a regular file with one link");
  }
  bytes = static_cast<uint64_t>(st.st_size);
  return fd;
}

}  // namespace

Result<CheckpointFiles> CheckpointFiles::Open(const DiskMemory& disk, const std::string& file,
                                              bool create) {
  CheckpointFiles f;
  f.shown = StrCat(disk.name(), ":", file);
  f.shown_delta = f.shown + ".delta";
  ISO_ASSIGN_OR_RETURN(f.base, OpenOne(disk, file, create, f.shown, f.base_bytes));
  // A base without a chain is a valid checkpoint (a full one, or one
  // written before chains existed): the chain is created empty.
  ISO_ASSIGN_OR_RETURN(f.delta, OpenOne(disk, file + ".delta", true, f.shown_delta, f.delta_bytes));
  return f;
}

Status PWriteAll(int fd, const std::byte* data, uint64_t n, uint64_t offset,
                 const std::string& shown) {
  while (n > 0) {
    const ssize_t w = ::pwrite(fd, data, n, static_cast<off_t>(offset));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      return Internal("checkpoint write of ", n, " bytes at offset ", offset, " of ", shown, ": ",
                      w < 0 ? ErrnoString(errno) : std::string("no progress"));
    }
    data += w;
    offset += static_cast<uint64_t>(w);
    n -= static_cast<uint64_t>(w);
  }
  return OkStatus();
}

Status PReadAll(int fd, std::byte* data, uint64_t n, uint64_t offset, const std::string& shown) {
  while (n > 0) {
    const ssize_t r = ::pread(fd, data, n, static_cast<off_t>(offset));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      return Internal("checkpoint read at offset ", offset, " of ", shown, ": ",
                      ErrnoString(errno));
    }
    if (r == 0) {
      return absl::DataLossError(
          StrCat(shown, " ends at offset ", offset, " with ", n, " bytes still expected"));
    }
    data += r;
    offset += static_cast<uint64_t>(r);
    n -= static_cast<uint64_t>(r);
  }
  return OkStatus();
}

Status SyncData(int fd, const std::string& shown) {
  if (::fdatasync(fd) != 0) return Internal("fdatasync ", shown, ": ", ErrnoString(errno));
  return OkStatus();
}

Result<DeltaTail> ScanDeltaHeaders(int fd, uint64_t file_bytes, uint64_t image_bytes,
                                   const std::string& shown) {
  DeltaTail t;
  while (t.end < file_bytes) {
    std::byte raw[sizeof(active::DeltaHeader)];
    if (file_bytes - t.end < sizeof raw) {
      return absl::DataLossError(StrCat(shown, ": truncated record header at offset ", t.end));
    }
    ISO_RETURN_IF_ERROR(PReadAll(fd, raw, sizeof raw, t.end, shown));
    auto h = active::ParseDeltaHeader(raw);
    if (!h.ok()) return Status(h.status().code(), StrCat(shown, ": ", h.status().message()));
    if (h->image_bytes != image_bytes || h->sequence != t.records + 1) {
      return absl::DataLossError(StrCat(shown, ": record at offset ", t.end, " (sequence ",
                                        h->sequence, ", image ", h->image_bytes,
                                        " bytes) does not continue the chain"));
    }
    if (h->payload_bytes > file_bytes - t.end - sizeof raw) {
      return absl::DataLossError(
          StrCat(shown, ": record ", h->sequence, " at offset ", t.end, " is truncated"));
    }
    t.end += sizeof raw + h->payload_bytes;
    ++t.records;
  }
  return t;
}

Result<DeltaChain> ReadDeltaChain(const CheckpointFiles& f, uint64_t image_bytes) {
  DeltaChain c;
  c.bytes.resize(f.delta_bytes);
  ISO_RETURN_IF_ERROR(PReadAll(f.delta.get(), c.bytes.data(), f.delta_bytes, 0, f.shown_delta));
  auto records = active::ParseDeltaChain(c.bytes, image_bytes);
  if (!records.ok()) {
    return Status(records.status().code(), StrCat(f.shown_delta, ": ", records.status().message()));
  }
  c.records = *std::move(records);
  return c;
}

Result<uint64_t> CompactDeltaChain(CheckpointFiles& f) {
  if (f.delta_bytes == 0) return uint64_t{0};
  ISO_ASSIGN_OR_RETURN(DeltaChain c, ReadDeltaChain(f, f.base_bytes));
  uint64_t pages = 0;
  for (const active::DeltaRecordView& r : c.records) {
    const std::byte* at = c.bytes.data() + r.data_offset;
    for (uint64_t p : r.pages) {
      const uint64_t n = active::PageBytes(f.base_bytes, p);
      ISO_RETURN_IF_ERROR(PWriteAll(f.base.get(), at, n, p * active::kCheckpointPage, f.shown));
      at += n;
      ++pages;
    }
  }
  ISO_RETURN_IF_ERROR(SyncData(f.base.get(), f.shown));
  if (::ftruncate(f.delta.get(), 0) != 0) {
    return Internal("truncate ", f.shown_delta, ": ", ErrnoString(errno));
  }
  ISO_RETURN_IF_ERROR(SyncData(f.delta.get(), f.shown_delta));
  f.delta_bytes = 0;
  return pages;
}

}  // namespace isometry
