// The files of one checkpoint (Active Access, issues #19 and #48): the
// base image and its delta chain (active/checkpoint_delta.h), both opened
// beneath a DSK memory's directory. Blocking I/O on the calling thread;
// every short read or write is resumed, every error names the file and
// offset.
//
// Ownership: a checkpoint's files belong to the uid of the session that
// made them. They are created with mode 0600 (never readable by another
// user, not even for an instant) and, where the daemon runs as root, given
// to the session's uid (a session without a uid, gRPC's, keeps the
// daemon's). Opening refuses (PERMISSION_DENIED) a file owned by anyone
// but the session's uid or the daemon's. Records are authenticated with a
// key derived from the daemon's checkpoint secret and the chain's identity
// (memory, file name, the uid owning the base), so a record the daemon did
// not write for this chain fails DATA_LOSS.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "active/checkpoint_delta.h"
#include "core/status.h"
#include "core/unique_fd.h"

namespace isometry {

class DiskMemory;

// Who asks: the session's uid, none for gRPC sessions (the daemon's then).
struct CheckpointOwner {
  std::optional<uid_t> uid;
};

struct CheckpointFiles {
  UniqueFd base, delta;
  std::string shown, shown_delta;  // "memory:file" for messages
  std::string memory, name;        // the memory and the file name, normalised ("a//./b" = "a/b")
  uint64_t base_bytes = 0, delta_bytes = 0;
  uid_t owner_uid = 0;  // the base's owner: part of the chain's identity

  // Opens (creating with `create`) `file` and `file`.delta under the
  // memory's directory for `owner`: each must be a regular file with one
  // link (unless the memory allows hard links), not a symbolic link, owned
  // by the owner's uid or the daemon's. NOT_FOUND for a missing base
  // without `create`; PERMISSION_DENIED for `..`, an absolute name or
  // another uid's file. The delta file is locked (flock; `exclusive` for
  // writers, shared for readers): ABORTED when another checkpoint call on
  // the same files holds it.
  static Result<CheckpointFiles> Open(const DiskMemory& disk, const std::string& file, bool create,
                                      const CheckpointOwner& owner, bool exclusive);
};

// The daemon's checkpoint secret: 32 random bytes in
// `<state_dir>/checkpoint.key` (mode 0600), created at the first
// checkpoint, read once per process. FAILED_PRECONDITION for a key file
// others may read or of the wrong size. Thread-safe.
Result<std::shared_ptr<const std::string>> CheckpointSecret(const std::string& state_dir);

// HMAC-SHA256 keyed for the chain of `f` (its memory, name and owner).
std::unique_ptr<active::DeltaMac> MakeChainMac(const std::string& secret, const CheckpointFiles& f);

// Walks the whole chain (active::WalkDeltaChain) for an image of
// `image_bytes`, in bounded memory: refused from the file's size first,
// then every record's header, payload CRC and mac. `sink` may be empty.
Result<active::DeltaWalk> WalkChain(const CheckpointFiles& f, uint64_t image_bytes,
                                    uint64_t max_records, active::DeltaMac& mac,
                                    const active::DeltaPageSink& sink = {});

Status PWriteAll(int fd, const std::byte* data, uint64_t n, uint64_t offset,
                 const std::string& shown);
// DATA_LOSS where the file ends before `n` bytes.
Status PReadAll(int fd, std::byte* data, uint64_t n, uint64_t offset, const std::string& shown);
Status SyncData(int fd, const std::string& shown);

// Verifies the whole chain, then writes it into the base (streaming, a
// second pass), syncs it, then empties the chain and syncs that: a crash
// in between leaves a chain that replays to the same image. A damaged
// chain leaves the base untouched. Returns the chain walked. `base_written`
// (may be null) says whether the base was written to, whatever the outcome.
Result<active::DeltaWalk> CompactDeltaChain(CheckpointFiles& f, uint64_t max_records,
                                            active::DeltaMac& mac, bool* base_written = nullptr);

// Which checkpoint this daemon last wrote into each pair of files (by
// memory and normalised name, with the base's inode), so that a dirty set
// counting from an older checkpoint of them, or from another allocation's,
// is never appended to them (WatchState::TakeDirty). Forgotten past
// kMaxMarks files: their next checkpoint is then full. Thread-safe.
class CheckpointMarks {
 public:
  static constexpr size_t kMaxMarks = 65536;
  // The name a dirty set keeps for the files, and that name for messages
  // ("memory:name").
  static std::string KeyOf(const CheckpointFiles& f);
  static std::string Shown(const std::string& key);
  // The generation of the last checkpoint written into `f`; 0 when none,
  // forgotten or the base is another inode now.
  uint64_t Last(const CheckpointFiles& f) const;
  // `f` holds a new checkpoint: its generation (never 0).
  uint64_t Wrote(const CheckpointFiles& f);
  // `f` may hold part of a write: no checkpoint's image any more.
  void Forget(const CheckpointFiles& f);

 private:
  struct Mark {
    uint64_t generation = 0;
    dev_t dev = 0;
    ino_t ino = 0;
  };
  mutable absl::Mutex mu_;
  std::map<std::string, Mark> marks_ ABSL_GUARDED_BY(mu_);
  uint64_t next_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace isometry
