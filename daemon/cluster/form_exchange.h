// Exchange-once of canonical forms between peers (FALCON-X's layout
// exchange, docs/guides/cluster.md "Cluster"): a datatype copy across nodes sends the
// far end's canonical form to that node once per (peer, form hash) and
// names it by hash afterwards.
//
//  - Sender: remembers, per peer, which forms the peer has acknowledged
//    (a StartHalf that carried the bytes succeeded). A remembered hash is
//    trusted only when the remembered form equals the one to send (FNV-1a
//    is not collision resistant); otherwise the bytes go again.
//  - Receiver: a bounded LRU memo per peer (entries and bytes) of the forms
//    that peer sent. A request naming an unknown hash (this node restarted,
//    or evicted it) is answered with UnknownFormError, on which the sender
//    forgets the hash and sends the bytes once more.
//
// Thread-safe: one internal mutex; no call blocks on anything else.
#pragma once

#include <atomic>
#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "core/status.h"
#include "daemon/node/cross_copy.h"
#include "layout/datatype_form.h"

namespace isometry::cluster {

// A least-recently-used set of forms by hash, bounded in entries and in
// serialized bytes. Not thread-safe.
class FormMemo {
 public:
  FormMemo(size_t max_entries, uint64_t max_bytes)
      : max_entries_(max_entries), max_bytes_(max_bytes) {}
  // The form under `hash` (now the most recently used), or null.
  std::shared_ptr<const CanonicalForm> Find(uint64_t hash);
  // Keeps `form` under `hash`, replacing what was there, and evicts the
  // least recently used past the bounds; a form over max_bytes alone is
  // not kept.
  void Put(uint64_t hash, std::shared_ptr<const CanonicalForm> form, uint64_t bytes);
  void Erase(uint64_t hash);
  uint64_t bytes() const { return bytes_; }
  size_t size() const { return index_.size(); }

 private:
  struct Entry {
    uint64_t hash;
    std::shared_ptr<const CanonicalForm> form;
    uint64_t bytes;
  };
  const size_t max_entries_;
  const uint64_t max_bytes_;
  std::list<Entry> lru_;  // most recent first
  std::unordered_map<uint64_t, std::list<Entry>::iterator> index_;
  uint64_t bytes_ = 0;
};

// The error a receiver answers a reference to an unknown form with, and
// the hash it names (nullopt for any other status).
Status UnknownFormError(uint64_t hash, std::string_view peer);
std::optional<uint64_t> UnknownFormOf(const Status& s);

class FormExchange {
 public:
  static constexpr size_t kSentEntries = 4096;  // per peer
  static constexpr uint64_t kSentBytes = 64ull << 20;
  static constexpr size_t kMemoEntries = 1024;  // per peer
  static constexpr uint64_t kMemoBytes = 32ull << 20;

  // Sender: whether `peer` is believed to hold `form` (hash `hash`).
  bool Known(const std::string& peer, uint64_t hash, const CanonicalForm& form)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Sender: `peer` accepted a request that carried `form`'s bytes.
  void Acknowledged(const std::string& peer, uint64_t hash,
                    std::shared_ptr<const CanonicalForm> form, uint64_t bytes)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Sender: `peer` said it does not know `hash`.
  void Forget(const std::string& peer, uint64_t hash) ABSL_LOCKS_EXCLUDED(mu_);

  // Receiver: the form `peer` means by `hash`: parsed and checked from
  // `bytes` when it sent them (then memoized), else from the memo, else
  // UnknownFormError. Errors: InvalidArgument for bytes that do not parse
  // or do not hash to `hash`.
  Result<std::shared_ptr<const CanonicalForm>> Resolve(const std::string& peer, uint64_t hash,
                                                       std::string_view bytes)
      ABSL_LOCKS_EXCLUDED(mu_);

  void CountSent(bool with_bytes, bool again);
  FormExchangeStats Stats() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  mutable absl::Mutex mu_;
  std::map<std::string, FormMemo> sent_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, FormMemo> memo_ ABSL_GUARDED_BY(mu_);
  std::atomic<uint64_t> sent_count_{0}, referred_{0}, resent_{0};
  std::atomic<uint64_t> received_{0}, hits_{0}, misses_{0};
};

}  // namespace isometry::cluster
