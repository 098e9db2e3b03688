#include "daemon/cluster/form_exchange.h"

#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "core/strings.h"

namespace isometry::cluster {
namespace {

constexpr char kUnknownFormPayload[] = "type.isometry/unknown-form";

FormMemo& MemoOf(std::map<std::string, FormMemo>& memos, const std::string& peer, size_t entries,
                 uint64_t bytes) {
  return memos.try_emplace(peer, entries, bytes).first->second;
}

}  // namespace

std::shared_ptr<const CanonicalForm> FormMemo::Find(uint64_t hash) {
  auto it = index_.find(hash);
  if (it == index_.end()) return nullptr;
  lru_.splice(lru_.begin(), lru_, it->second);
  return it->second->form;
}

void FormMemo::Erase(uint64_t hash) {
  auto it = index_.find(hash);
  if (it == index_.end()) return;
  bytes_ -= it->second->bytes;
  lru_.erase(it->second);
  index_.erase(it);
}

void FormMemo::Put(uint64_t hash, std::shared_ptr<const CanonicalForm> form, uint64_t bytes) {
  Erase(hash);
  if (bytes > max_bytes_ || max_entries_ == 0) return;
  lru_.push_front({hash, std::move(form), bytes});
  index_[hash] = lru_.begin();
  bytes_ += bytes;
  while (index_.size() > max_entries_ || bytes_ > max_bytes_) Erase(lru_.back().hash);
}

Status UnknownFormError(uint64_t hash, std::string_view peer) {
  Status s = FailedPrecondition("node does not hold canonical form ", hash, " of node '", peer,
                                "' (restarted or evicted); send its bytes");
  s.SetPayload(kUnknownFormPayload, absl::Cord(std::to_string(hash)));
  return s;
}

std::optional<uint64_t> UnknownFormOf(const Status& s) {
  auto p = s.GetPayload(kUnknownFormPayload);
  if (!p) return std::nullopt;
  uint64_t hash = 0;
  if (!absl::SimpleAtoi(std::string(*p), &hash)) return std::nullopt;
  return hash;
}

bool FormExchange::Known(const std::string& peer, uint64_t hash, const CanonicalForm& form) {
  absl::MutexLock lock(&mu_);
  auto it = sent_.find(peer);
  if (it == sent_.end()) return false;
  std::shared_ptr<const CanonicalForm> had = it->second.Find(hash);
  return had && *had == form;
}

void FormExchange::Acknowledged(const std::string& peer, uint64_t hash,
                                std::shared_ptr<const CanonicalForm> form, uint64_t bytes) {
  absl::MutexLock lock(&mu_);
  MemoOf(sent_, peer, kSentEntries, kSentBytes).Put(hash, std::move(form), bytes);
}

void FormExchange::Forget(const std::string& peer, uint64_t hash) {
  absl::MutexLock lock(&mu_);
  if (auto it = sent_.find(peer); it != sent_.end()) it->second.Erase(hash);
}

Result<std::shared_ptr<const CanonicalForm>> FormExchange::Resolve(const std::string& peer,
                                                                   uint64_t hash,
                                                                   std::string_view bytes) {
  if (bytes.empty()) {
    absl::MutexLock lock(&mu_);
    std::shared_ptr<const CanonicalForm> form =
        MemoOf(memo_, peer, kMemoEntries, kMemoBytes).Find(hash);
    ++(form ? hits_ : misses_);
    if (!form) return UnknownFormError(hash, peer);
    return form;
  }
  // Parsed outside the lock: a large form takes a while.
  ISO_ASSIGN_OR_RETURN(CanonicalForm parsed, ParseForm(bytes));
  const uint64_t actual = SerializedFormHash(bytes);
  if (actual != hash) {
    return InvalidArgument("canonical form from node '", peer, "' hashes to ", actual, ", not the ",
                           hash, " it was sent as");
  }
  auto form = std::make_shared<const CanonicalForm>(std::move(parsed));
  ++received_;
  absl::MutexLock lock(&mu_);
  MemoOf(memo_, peer, kMemoEntries, kMemoBytes).Put(hash, form, bytes.size());
  return std::shared_ptr<const CanonicalForm>(form);
}

void FormExchange::CountSent(bool with_bytes, bool again) {
  if (again) ++resent_;
  ++(with_bytes ? sent_count_ : referred_);
}

FormExchangeStats FormExchange::Stats() const {
  FormExchangeStats s;
  s.sent = sent_count_;
  s.referred = referred_;
  s.resent = resent_;
  s.received = received_;
  s.memo_hits = hits_;
  s.memo_misses = misses_;
  absl::MutexLock lock(&mu_);
  for (const auto& [peer, memo] : memo_) s.memo_bytes += memo.bytes();
  return s;
}

}  // namespace isometry::cluster
