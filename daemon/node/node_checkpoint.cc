// Incremental checkpoints of a watched allocation (Active Access, issue
// #19): a base image in a file of a DSK memory, written in full the first
// time, and a delta chain beside it (active/checkpoint_delta.h) to which
// every later checkpoint appends the pages written since as one record:
// one sequential write and one fdatasync, instead of a scattered write per
// page. Restore reads base + chain; compaction merges the chain into the
// base. Issue #48: chains are read streaming and bounded by the image's
// size and daemon.checkpoint_max_deltas, their records authenticated with
// the chain's key, their files the session's uid's (checkpoint_files.h).
#include <absl/status/status.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <optional>

#include "core/log_escape.h"
#include "core/strings.h"
#include "daemon/node/checkpoint_files.h"
#include "daemon/node/node_impl.h"
#include "daemon/runtime/disk_memory.h"

namespace isometry {
namespace {

constexpr uint64_t kPage = active::kCheckpointPage;
// The most page ranges a client may list with one checkpoint.
constexpr size_t kMaxClientRanges = 262144;

// The client's page ranges as page numbers, each checked against the image.
Result<std::vector<uint64_t>> ClientPages(const CheckpointOptions& o, uint64_t bytes) {
  if (o.client_pages.size() > kMaxClientRanges) {
    return InvalidArgument(o.client_pages.size(), " client page ranges: at most ", kMaxClientRanges,
                           " (send a full checkpoint instead)");
  }
  const uint64_t pages = (bytes + kPage - 1) / kPage;
  std::vector<uint64_t> out;
  for (const auto& [first, n] : o.client_pages) {
    if (n == 0 || first >= pages || n > pages - first) {
      return InvalidArgument("client page range [", first, ", +", n, ") is outside the ", pages,
                             "-page allocation");
    }
    if (out.size() + n > pages * 2) {
      return InvalidArgument("client page ranges list more pages than the allocation has twice");
    }
    for (uint64_t p = first; p < first + n; ++p) out.push_back(p);
  }
  return out;
}

Status WriteFull(CheckpointFiles& f, const std::byte* image, uint64_t bytes,
                 CheckpointReport& rep) {
  // The chain goes first: a crash while the base is rewritten must not
  // leave old records that would be replayed over the new base.
  if (f.delta_bytes > 0) {
    if (::ftruncate(f.delta.get(), 0) != 0) {
      return Internal("truncate ", f.shown_delta, ": ", ErrnoString(errno));
    }
    ISO_RETURN_IF_ERROR(SyncData(f.delta.get(), f.shown_delta));
    f.delta_bytes = 0;
  }
  ISO_RETURN_IF_ERROR(PWriteAll(f.base.get(), image, bytes, 0, f.shown));
  if (f.base_bytes > bytes && ::ftruncate(f.base.get(), static_cast<off_t>(bytes)) != 0) {
    return Internal("truncate ", f.shown, ": ", ErrnoString(errno));
  }
  ISO_RETURN_IF_ERROR(SyncData(f.base.get(), f.shown));
  f.base_bytes = bytes;
  rep.full = true;
  rep.bytes_written = bytes;
  rep.pages_written = (bytes + kPage - 1) / kPage;
  return OkStatus();
}

// The checkpoint's owner: the session's uid where the daemon knows it.
CheckpointOwner CheckpointOwnerOf(const Session& s) {
  CheckpointOwner o;
  if (s.creds.known()) o.uid = s.creds.uid;
  return o;
}

// The chain's bound on records: a checkpoint merges a chain longer than
// daemon.checkpoint_max_deltas, so none holds more than one past it.
uint64_t MaxRecords(const DaemonConfig& d) { return uint64_t{d.checkpoint_max_deltas} + 1; }

Status Prefixed(const Status& s, const std::string& shown) {
  return s.ok() ? s : Status(s.code(), StrCat(shown, ": ", s.message()));
}

// Why the dirty set `take` may miss a write since the last checkpoint
// into `f` ("" where it holds every one); `last`: that checkpoint's
// generation (CheckpointMarks).
std::string UntrackedReason(const WatchState::DirtyTake& take, const CheckpointFiles& f,
                            uint64_t last) {
  if (!take.untracked.empty()) return take.untracked;
  if (take.since.empty()) {
    return StrCat("the daemon's dirty set does not hold every write since the last checkpoint: ",
                  take.since_why);
  }
  if (take.since != CheckpointMarks::KeyOf(f)) {
    return StrCat("the daemon's dirty set counts from the allocation's last checkpoint, into ",
                  CheckpointMarks::Shown(take.since), ", not into ", f.shown);
  }
  if (take.generation != last) {
    return StrCat(f.shown, " holds another checkpoint than this allocation's last one into it");
  }
  return "";
}

// Why this checkpoint must write the whole image before its chain is
// even looked at ("" where an incremental one may do). `take`: the
// watch's dirty set, null without a watch.
std::string FullReason(const CheckpointOptions& options, const WatchState::DirtyTake* take,
                       const CheckpointFiles& f, uint64_t bytes, uint64_t last) {
  if (options.full) return "asked for (full)";
  if (!take) return "the allocation has no watch: the daemon does not know which pages changed";
  if (f.base_bytes != bytes) {
    return f.base_bytes == 0 && f.delta_bytes == 0
               ? std::string("the first checkpoint into this file")
               : StrCat("the base holds ", f.base_bytes, " bytes, the allocation ", bytes);
  }
  return UntrackedReason(*take, f, last);
}

// Why the chain of `f` cannot take one more record ("" where it can; its
// end is then in `tail`).
std::string ChainReason(const CheckpointFiles& f, uint64_t bytes, const DaemonConfig& d,
                        active::DeltaMac& mac, active::DeltaWalk& tail) {
  auto t = WalkChain(f, bytes, MaxRecords(d), mac);
  if (!t.ok()) {
    return StrCat("the delta chain cannot be extended (", t.status().message(), "): started over");
  }
  if (t->records > d.checkpoint_max_deltas || f.delta_bytes > bytes) {
    return StrCat("the delta chain (", t->records, " records, ", f.delta_bytes,
                  " bytes) was never merged into its base: started over");
  }
  tail = *t;
  return "";
}

// Appends one record of `pages` of `image` to the chain `tail` ends:
// one write and one fdatasync, charged to `owner` while it is written.
Status AppendRecord(CheckpointFiles& f, DiskMemory& disk, const std::string& owner,
                    const std::byte* image, uint64_t bytes, const std::vector<uint64_t>& pages,
                    active::DeltaWalk& tail, active::DeltaMac& mac, CheckpointReport& rep) {
  ISO_ASSIGN_OR_RETURN(
      std::vector<std::byte> record,
      active::EncodeDeltaRecord(image, bytes, tail.records + 1, pages, tail.last, mac));
  if (f.delta_bytes + record.size() > disk.max_file_bytes()) {
    return ResourceExhausted(f.shown_delta, " would grow past the memory's ", disk.max_file_bytes(),
                             "-byte file limit (take a full checkpoint)");
  }
  ISO_ASSIGN_OR_RETURN(DiskCharge charge,
                       disk.Charge(owner, bytes + f.delta_bytes + record.size()));
  ISO_RETURN_IF_ERROR(
      PWriteAll(f.delta.get(), record.data(), record.size(), f.delta_bytes, f.shown_delta));
  ISO_RETURN_IF_ERROR(SyncData(f.delta.get(), f.shown_delta));
  f.delta_bytes += record.size();
  ++tail.records;
  rep.pages_written = pages.size();
  rep.bytes_written = record.size() - active::kDeltaRecordHead - pages.size() * 8;
  return OkStatus();
}

}  // namespace

Result<CheckpointReport> node::Watches::Checkpoint(SessionRef session, uint64_t allocation,
                                                   const std::string& memory,
                                                   const std::string& file,
                                                   const CheckpointOptions& options) {
  std::shared_ptr<Allocation> a;
  std::shared_ptr<WatchState> watch;
  std::string owner;
  CheckpointOwner who;
  {
    absl::MutexLock lock(&impl_->mu);
    ISO_ASSIGN_OR_RETURN(Session * s, impl_->FindSession(session));
    auto it = impl_->allocations.find(allocation);
    if (it == impl_->allocations.end() || it->second->owner != s->id) {
      return PermissionDenied("allocation ", allocation,
                              " is not this session's: only its owner checkpoints it");
    }
    a = it->second;
    watch = a->watch;
    owner = s->disk_owner;
    who = CheckpointOwnerOf(*s);
  }
  ISO_ASSIGN_OR_RETURN(std::shared_ptr<DiskMemory> disk, impl_->runtime->FindDisk(memory));
  const uint64_t bytes = a->shm.size();
  if (bytes > disk->max_file_bytes()) {
    return ResourceExhausted("checkpoint of ", bytes, " bytes: memory '", memory,
                             "' takes files of at most ", disk->max_file_bytes(), " bytes");
  }
  ISO_ASSIGN_OR_RETURN(std::vector<uint64_t> pages, ClientPages(options, bytes));
  ISO_ASSIGN_OR_RETURN(std::shared_ptr<const std::string> secret,
                       CheckpointSecret(impl_->config.daemon.state_dir));
  ISO_ASSIGN_OR_RETURN(CheckpointFiles f, CheckpointFiles::Open(*disk, file, /*create=*/true, who,
                                                                /*exclusive=*/true));
  std::unique_ptr<active::DeltaMac> mac = MakeChainMac(*secret, f);
  const uint64_t max_deltas = impl_->config.daemon.checkpoint_max_deltas;
  CheckpointMarks& marks = impl_->checkpoint_marks;
  // The dirty set is taken (and cleared) before the pages are copied, so
  // a write landing meanwhile is in this image or marked for the next.
  std::optional<WatchState::DirtyTake> take;
  if (watch) take = watch->TakeDirty();
  // Incremental only over a base of this size whose chain is whole (every
  // record's CRC and MAC), with the daemon's dirty set holding every write
  // into the allocation since the checkpoint these files hold; otherwise
  // full, and the report says why.
  std::string reason = FullReason(options, take ? &*take : nullptr, f, bytes, marks.Last(f));
  if (!reason.empty() && take && !options.full && f.base_bytes == bytes) {
    spdlog::info("checkpoint of allocation {} into {} is full: {}", allocation, ForLog(f.shown),
                 ForLog(reason));
  }
  active::DeltaWalk tail;
  if (reason.empty()) reason = ChainReason(f, bytes, impl_->config.daemon, *mac, tail);
  const bool full = !reason.empty();
  if (take) pages.insert(pages.end(), take->pages.begin(), take->pages.end());
  std::sort(pages.begin(), pages.end());
  pages.erase(std::unique(pages.begin(), pages.end()), pages.end());
  CheckpointReport rep;
  rep.full_reason = reason;
  Status done = [&]() -> Status {
    if (full) {
      ISO_ASSIGN_OR_RETURN(DiskCharge charge, disk->Charge(owner, bytes));
      return WriteFull(f, a->shm.data(), bytes, rep);
    }
    return AppendRecord(f, *disk, owner, a->shm.data(), bytes, pages, tail, *mac, rep);
  }();
  if (!done.ok()) {
    // Nothing of this checkpoint may be relied on: the files may hold
    // part of it, and the pages it took stay dirty for the next one.
    marks.Forget(f);
    if (watch) {
      watch->MarkDirty(pages);
      watch->CountFrom(take->epoch, take->since, take->generation, take->since_why);
    }
    return done;
  }
  const uint64_t generation = marks.Wrote(f);
  if (watch) watch->CountFrom(take->epoch, CheckpointMarks::KeyOf(f), generation, "");
  rep.file_bytes = bytes;
  rep.deltas = full ? 0 : tail.records;
  if (!full && (options.compact || tail.records > max_deltas || f.delta_bytes > bytes)) {
    ISO_ASSIGN_OR_RETURN(DiskCharge charge, disk->Charge(owner, bytes + f.delta_bytes));
    // The record is durable and the chain whole either way: a failed merge
    // is retried by the next checkpoint.
    bool written = false;
    Status merged = CompactDeltaChain(f, MaxRecords(impl_->config.daemon), *mac, &written).status();
    if (!merged.ok()) {
      if (written) marks.Forget(f);  // the base may hold part of a chain that changed meanwhile
      return Status(merged.code(), StrCat("checkpoint appended to ", f.shown_delta,
                                          ", but merging the chain failed: ", merged.message()));
    }
    rep.compacted = true;
    rep.deltas = 0;
  }
  rep.delta_file_bytes = f.delta_bytes;
  return rep;
}

Result<RestoreReport> node::Watches::Restore(SessionRef session, uint64_t allocation,
                                             const std::string& memory, const std::string& file) {
  std::shared_ptr<Allocation> a;
  std::shared_ptr<WatchState> watch;
  CheckpointOwner who;
  {
    absl::MutexLock lock(&impl_->mu);
    ISO_ASSIGN_OR_RETURN(Session * s, impl_->FindSession(session));
    auto it = impl_->allocations.find(allocation);
    if (it == impl_->allocations.end() || it->second->owner != s->id) {
      return PermissionDenied("allocation ", allocation,
                              " is not this session's: only its owner restores into it");
    }
    a = it->second;
    watch = a->watch;
    who = CheckpointOwnerOf(*s);
  }
  ISO_ASSIGN_OR_RETURN(std::shared_ptr<DiskMemory> disk, impl_->runtime->FindDisk(memory));
  ISO_ASSIGN_OR_RETURN(std::shared_ptr<const std::string> secret,
                       CheckpointSecret(impl_->config.daemon.state_dir));
  ISO_ASSIGN_OR_RETURN(CheckpointFiles f, CheckpointFiles::Open(*disk, file, /*create=*/false, who,
                                                                /*exclusive=*/false));
  const uint64_t bytes = a->shm.size();
  if (f.base_bytes != bytes) {
    return InvalidArgument(f.shown, " holds a ", f.base_bytes, "-byte image; allocation ",
                           allocation, " has ", bytes, " bytes");
  }
  // A chain no checkpoint leaves is refused from its size, unread.
  ISO_RETURN_IF_ERROR(Prefixed(active::CheckDeltaChainSize(f.delta_bytes, bytes), f.shown_delta));
  // Base and chain go to a private image first, streamed (a chunk at a
  // time), so a damaged, forged or short record, or a base cut meanwhile,
  // changes nothing in the allocation.
  std::vector<std::byte> image(bytes);
  ISO_RETURN_IF_ERROR(PReadAll(f.base.get(), image.data(), bytes, 0, f.shown));
  std::unique_ptr<active::DeltaMac> mac = MakeChainMac(*secret, f);
  auto apply = [&](uint64_t page, const std::byte* data, uint64_t n) {
    std::memcpy(image.data() + page * kPage, data, n);  // inside: WalkDeltaChain checked it
    return OkStatus();
  };
  ISO_ASSIGN_OR_RETURN(active::DeltaWalk walk,
                       WalkChain(f, bytes, MaxRecords(impl_->config.daemon), *mac, apply));
  RestoreReport rep;
  rep.image_bytes = bytes;
  rep.deltas = walk.records;
  rep.pages_applied = walk.pages;
  // The pages the restore changes are writes like any other: the next
  // checkpoint of the allocation, into any file, must hold them.
  std::vector<uint64_t> changed;
  if (watch) {
    for (uint64_t at = 0; at < bytes; at += kPage) {
      const uint64_t n = std::min(kPage, bytes - at);
      if (std::memcmp(image.data() + at, a->shm.data() + at, n) != 0) changed.push_back(at / kPage);
    }
  }
  std::copy(image.begin(), image.end(), a->shm.data());
  if (watch) watch->MarkDirty(changed);
  return rep;
}

Result<RestoreReport> node::Watches::CompactCheckpoint(SessionRef session,
                                                       const std::string& memory,
                                                       const std::string& file) {
  std::string owner;
  CheckpointOwner who;
  {
    absl::MutexLock lock(&impl_->mu);
    ISO_ASSIGN_OR_RETURN(Session * s, impl_->FindSession(session));
    owner = s->disk_owner;
    who = CheckpointOwnerOf(*s);
  }
  ISO_ASSIGN_OR_RETURN(std::shared_ptr<DiskMemory> disk, impl_->runtime->FindDisk(memory));
  ISO_ASSIGN_OR_RETURN(std::shared_ptr<const std::string> secret,
                       CheckpointSecret(impl_->config.daemon.state_dir));
  ISO_ASSIGN_OR_RETURN(CheckpointFiles f, CheckpointFiles::Open(*disk, file, /*create=*/false, who,
                                                                /*exclusive=*/true));
  // No checkpoint makes a base past the memory's file limit, nor a chain
  // past MaxDeltaChainBytes of its base: both refused before a byte is read.
  if (f.base_bytes > disk->max_file_bytes()) {
    return absl::DataLossError(StrCat(f.shown, " holds ", f.base_bytes, " bytes, past memory '",
                                      memory, "''s max_file_bytes (", disk->max_file_bytes(),
                                      "): no checkpoint made it"));
  }
  ISO_RETURN_IF_ERROR(
      Prefixed(active::CheckDeltaChainSize(f.delta_bytes, f.base_bytes), f.shown_delta));
  ISO_ASSIGN_OR_RETURN(DiskCharge charge, disk->Charge(owner, f.base_bytes + f.delta_bytes));
  std::unique_ptr<active::DeltaMac> mac = MakeChainMac(*secret, f);
  bool written = false;
  auto walk = CompactDeltaChain(f, MaxRecords(impl_->config.daemon), *mac, &written);
  if (!walk.ok()) {
    // The base may hold part of a chain that changed meanwhile.
    if (written) impl_->checkpoint_marks.Forget(f);
    return walk.status();
  }
  RestoreReport rep;
  rep.image_bytes = f.base_bytes;
  rep.deltas = walk->records;
  rep.pages_applied = walk->pages;
  return rep;
}

}  // namespace isometry
