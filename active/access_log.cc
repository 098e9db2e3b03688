#include "active/access_log.h"

#include <cstring>
#include <new>

namespace isometry::active {
namespace {

constexpr uint64_t Pad8(uint64_t n) { return (n + 7) & ~uint64_t{7}; }

}  // namespace

uint64_t LogBytes(uint64_t capacity) { return kLogDataOffset + capacity; }

uint64_t MaxRecordData(uint64_t capacity) { return capacity / 4 - sizeof(LogEntry); }

LogWriter::LogWriter(std::byte* base, uint64_t capacity, uint64_t allocation)
    : header_(new (base) LogHeader{}), data_(base + kLogDataOffset), capacity_(capacity) {
  header_->magic = kLogMagic;
  header_->abi_version = kLogAbiVersion;
  header_->capacity = capacity;
  header_->data_offset = kLogDataOffset;
  header_->allocation = allocation;
  header_->tail.value.store(0, std::memory_order_release);
  header_->head.value.store(0, std::memory_order_release);
}

uint64_t LogWriter::Acknowledged() const {
  const uint64_t h = header_->head.value.load(std::memory_order_acquire);
  // The owner's head is untrusted: one more than a log behind, or ahead of
  // what was published, or going back, is no progress.
  if (shm::Distance(h, published_, capacity_) && h >= last_ack_) last_ack_ = h;
  return last_ack_;
}

uint64_t LogWriter::Free() const { return capacity_ - (tail_ - Acknowledged()); }

bool LogWriter::TryAppend(LogEntry entry, std::string_view data) {
  const uint64_t need = Pad8(sizeof(LogEntry) + data.size());
  const uint64_t at = tail_ & (capacity_ - 1);
  const uint64_t to_end = capacity_ - at;
  // A record never wraps: the rest of the ring before the end is skipped.
  const uint64_t skip = to_end < need ? to_end : 0;
  if (need + skip > Free()) return false;
  if (skip != 0) {
    if (skip >= sizeof(LogEntry)) {
      LogEntry pad{};
      pad.record_bytes = static_cast<uint32_t>(skip);
      pad.op = static_cast<uint16_t>(LogOp::kPad);
      std::memcpy(data_ + at, &pad, sizeof pad);
    }
    tail_ += skip;
  }
  std::byte* out = data_ + (tail_ & (capacity_ - 1));
  entry.record_bytes = static_cast<uint32_t>(need);
  entry.seq = ++seq_;
  entry.data_bytes = data.size();
  std::memcpy(out, &entry, sizeof entry);
  if (!data.empty()) std::memcpy(out + sizeof entry, data.data(), data.size());
  tail_ += need;
  return true;
}

void LogWriter::Publish() {
  published_ = tail_;
  header_->tail.value.store(published_, std::memory_order_release);
}

Result<LogReader> LogReader::Open(std::byte* base, uint64_t bytes) {
  if (bytes < kLogDataOffset) return InvalidArgument("access log mapping too small");
  auto* h = reinterpret_cast<LogHeader*>(base);
  const uint64_t cap = h->capacity;
  if (h->magic != kLogMagic || h->abi_version != kLogAbiVersion || cap < 4096 ||
      (cap & (cap - 1)) != 0 || h->data_offset != kLogDataOffset || bytes < LogBytes(cap)) {
    return InvalidArgument("not an access log of ABI version ", kLogAbiVersion);
  }
  LogReader r(h, base + kLogDataOffset);
  r.head_ = h->head.value.load(std::memory_order_acquire);
  return r;
}

size_t LogReader::Poll(const std::function<void(const LogEntry&, std::string_view)>& fn,
                       uint64_t max_bytes) {
  const uint64_t cap = header_->capacity;
  const uint64_t tail = header_->tail.value.load(std::memory_order_acquire);
  const uint64_t start = head_;
  size_t n = 0;
  while (head_ < tail && (n == 0 || head_ - start < max_bytes)) {
    const uint64_t at = head_ & (cap - 1);
    if (cap - at < sizeof(LogEntry)) {
      head_ += cap - at;
      continue;
    }
    LogEntry e;
    std::memcpy(&e, data_ + at, sizeof e);
    if (e.op == static_cast<uint16_t>(LogOp::kPad)) {
      head_ += cap - at;
      continue;
    }
    const char* d = reinterpret_cast<const char*>(data_ + at + sizeof e);
    fn(e, std::string_view(d, e.data_bytes));
    head_ += e.record_bytes;
    ++n;
  }
  return n;
}

void LogReader::Ack() { header_->head.value.store(head_, std::memory_order_release); }

bool LogReader::Pending() const {
  return head_ < header_->tail.value.load(std::memory_order_acquire);
}

}  // namespace isometry::active
