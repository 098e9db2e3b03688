// One DSK memory as the runtime holds it: the directory's fd, opened once
// at start, its limits, and what each client is writing into it.
//
// The fd is the root of every file step (daemon/runtime/beneath.h): the
// configured path is resolved once, so replacing the directory (or one of
// its parents) by a link later redirects nothing.
//
// Bounds (config keys of the [[memory]] table, docs/reference/config.md "Configuration reference"):
// - max_file_bytes: the largest file a DSK write may produce, that is
//   max(old size, instance offset + instance bytes). Checked before
//   anything is created.
// - quota_bytes: per owner (a client uid; cross-node halves share one
//   owner), the sum of the sizes of the files its copies are writing at
//   once into this memory (each counted at its final size from the moment
//   the write opens until it commits or fails). Sparse or reflinked files
//   count at their full size.
// - allow_hard_links: whether a file with more than one hard link may be
//   read or replaced (off: a link to a file outside the directory would
//   let clients read it through the daemon).
//
// Thread-safety: every method may be called from any thread.
// Lifetime: held by shared_ptr; endpoints and charges keep it alive.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "config/runtime_config.h"
#include "core/status.h"
#include "core/unique_fd.h"

namespace isometry {

class DiskMemory;

// Bytes charged to one owner's quota; given back when destroyed.
class DiskCharge {
 public:
  DiskCharge() = default;
  DiskCharge(DiskCharge&& o) noexcept;
  DiskCharge& operator=(DiskCharge&& o) noexcept;
  DiskCharge(const DiskCharge&) = delete;
  DiskCharge& operator=(const DiskCharge&) = delete;
  ~DiskCharge();
  void Release();

 private:
  friend class DiskMemory;
  std::shared_ptr<DiskMemory> memory_;
  std::string owner_;
  uint64_t bytes_ = 0;
};

class DiskMemory : public std::enable_shared_from_this<DiskMemory> {
 public:
  // Opens the directory (it must exist and be a directory).
  static Result<std::shared_ptr<DiskMemory>> Open(const MemoryConfig& config);
  // How names are resolved on this kernel, for the start-up log:
  // "openat2" or the fallback walk (daemon/runtime/beneath.h).
  static const char* Resolution();

  const std::string& name() const { return name_; }
  const std::string& directory() const { return directory_; }
  int dir_fd() const { return dir_.get(); }
  uint64_t max_file_bytes() const { return max_file_bytes_; }
  bool allow_hard_links() const { return allow_hard_links_; }

  // Charges `bytes` to `owner` ("" = cross-node copies); ResourceExhausted
  // when its quota_bytes would be passed.
  Result<DiskCharge> Charge(const std::string& owner, uint64_t bytes) ABSL_LOCKS_EXCLUDED(mu_);
  uint64_t charged(const std::string& owner) const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  friend class DiskCharge;
  DiskMemory(const MemoryConfig& config, UniqueFd dir);
  void Give(const std::string& owner, uint64_t bytes) ABSL_LOCKS_EXCLUDED(mu_);

  const std::string name_, directory_;
  const UniqueFd dir_;  // O_PATH | O_DIRECTORY
  const uint64_t max_file_bytes_, quota_bytes_;
  const bool allow_hard_links_;
  mutable absl::Mutex mu_;
  std::map<std::string, uint64_t> charged_ ABSL_GUARDED_BY(mu_);  // owners with bytes > 0
};

}  // namespace isometry
