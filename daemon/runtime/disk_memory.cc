#include "daemon/runtime/disk_memory.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "core/checked.h"
#include "core/strings.h"
#include "daemon/runtime/beneath.h"

namespace isometry {

DiskCharge::DiskCharge(DiskCharge&& o) noexcept
    : memory_(std::move(o.memory_)),
      owner_(std::move(o.owner_)),
      bytes_(std::exchange(o.bytes_, 0)) {}

DiskCharge& DiskCharge::operator=(DiskCharge&& o) noexcept {
  if (this != &o) {
    Release();
    memory_ = std::move(o.memory_);
    owner_ = std::move(o.owner_);
    bytes_ = std::exchange(o.bytes_, 0);
  }
  return *this;
}

DiskCharge::~DiskCharge() { Release(); }

void DiskCharge::Release() {
  if (memory_ && bytes_) memory_->Give(owner_, bytes_);
  memory_.reset();
  bytes_ = 0;
}

DiskMemory::DiskMemory(const MemoryConfig& config, UniqueFd dir)
    : name_(config.name),
      directory_(config.directory),
      dir_(std::move(dir)),
      max_file_bytes_(config.max_file_bytes),
      quota_bytes_(config.quota_bytes),
      allow_hard_links_(config.allow_hard_links) {}

Result<std::shared_ptr<DiskMemory>> DiskMemory::Open(const MemoryConfig& config) {
  UniqueFd dir(::open(config.directory.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!dir.valid()) {
    const int err = errno;
    if (err == ENOENT) {
      return FailedPrecondition("DSK memory '", config.name, "': directory '", config.directory,
                                "' does not exist");
    }
    return FailedPrecondition("DSK memory '", config.name, "': directory '", config.directory,
                              "': ", ErrnoString(err));
  }
  // The first resolution probes for openat2 (and logs a fallback).
  (void)OpenBeneath(dir.get(), ".", O_PATH | O_DIRECTORY, config.directory);
  return std::shared_ptr<DiskMemory>(new DiskMemory(config, std::move(dir)));
}

const char* DiskMemory::Resolution() {
  return HaveOpenat2() ? "openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)"
                       : "a walk of one component at a time (O_NOFOLLOW; no openat2)";
}

namespace {
std::string OwnerName(const std::string& owner) {
  return owner.empty() ? std::string("cross-node copies") : owner;
}
}  // namespace

Result<DiskCharge> DiskMemory::Charge(const std::string& owner, uint64_t bytes) {
  absl::MutexLock lock(&mu_);
  uint64_t& used = charged_[owner];
  const std::optional<uint64_t> after = CheckedAdd(used, bytes);
  if (!after || *after > quota_bytes_) {
    const uint64_t now = used;
    if (now == 0) charged_.erase(owner);
    return ResourceExhausted("DSK memory '", name_, "': ", OwnerName(owner), " is writing ", now,
                             " bytes of files already; a write of a ", bytes,
                             "-byte file would pass its quota_bytes of ", quota_bytes_,
                             " (wait for those copies to finish)");
  }
  used = *after;
  DiskCharge c;
  c.memory_ = shared_from_this();
  c.owner_ = owner;
  c.bytes_ = bytes;
  return c;
}

uint64_t DiskMemory::charged(const std::string& owner) const {
  absl::MutexLock lock(&mu_);
  auto it = charged_.find(owner);
  return it == charged_.end() ? 0 : it->second;
}

void DiskMemory::Give(const std::string& owner, uint64_t bytes) {
  absl::MutexLock lock(&mu_);
  auto it = charged_.find(owner);
  if (it == charged_.end()) return;
  it->second -= std::min(it->second, bytes);
  if (it->second == 0) charged_.erase(it);
}

}  // namespace isometry
