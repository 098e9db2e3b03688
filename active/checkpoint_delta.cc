#include "active/checkpoint_delta.h"

#include <absl/status/status.h>

#include <algorithm>
#include <array>
#include <cstring>

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

namespace isometry::active {
namespace {

constexpr uint64_t kHeaderCrcBytes = offsetof(DeltaHeader, header_crc);

std::array<uint32_t, 256> MakeTable() {
  std::array<uint32_t, 256> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) != 0 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    t[i] = c;
  }
  return t;
}

uint32_t Crc32cTable(uint32_t crc, const unsigned char* p, size_t n) {
  static const std::array<uint32_t, 256> table = MakeTable();
  for (size_t i = 0; i < n; ++i) crc = table[(crc ^ p[i]) & 0xFF] ^ (crc >> 8);
  return crc;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) uint32_t Crc32cSse(uint32_t crc, const unsigned char* p,
                                                     size_t n) {
  uint64_t c = crc;
  while (n >= 8) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    c = _mm_crc32_u64(c, v);
    p += 8;
    n -= 8;
  }
  uint32_t c32 = static_cast<uint32_t>(c);
  while (n > 0) {
    c32 = _mm_crc32_u8(c32, *p++);
    --n;
  }
  return c32;
}
#endif

Status Lost(const std::string& what, uint64_t record, uint64_t offset) {
  return absl::DataLossError(StrCat("checkpoint delta record ", record, " at offset ", offset, ": ",
                                    what, "; the delta file is damaged (take a full ",
                                    "checkpoint to start a new chain)"));
}

}  // namespace

uint32_t Crc32c(uint32_t crc, const void* data, size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  crc = ~crc;
#if defined(__x86_64__)
  static const bool have_sse42 = __builtin_cpu_supports("sse4.2");
  crc = have_sse42 ? Crc32cSse(crc, p, n) : Crc32cTable(crc, p, n);
#else
  crc = Crc32cTable(crc, p, n);
#endif
  return ~crc;
}

uint64_t PageBytes(uint64_t image_bytes, uint64_t page) {
  if (page > image_bytes / kCheckpointPage) return 0;  // also keeps page * size from overflowing
  const uint64_t off = page * kCheckpointPage;
  return off >= image_bytes ? 0 : std::min(kCheckpointPage, image_bytes - off);
}

uint64_t MaxDeltaRecordBytes(uint64_t image_bytes) {
  const uint64_t pages = image_bytes / kCheckpointPage + 1;
  // Images are far below 2^60 bytes; saturate rather than wrap anyway.
  if (image_bytes > (uint64_t{1} << 60)) return UINT64_MAX / 4;
  return kDeltaRecordHead + pages * sizeof(uint64_t) + image_bytes;
}

uint64_t MaxDeltaChainBytes(uint64_t image_bytes) {
  const uint64_t record = MaxDeltaRecordBytes(image_bytes);
  return record >= UINT64_MAX / 4 ? UINT64_MAX / 2 : image_bytes + record;
}

Status CheckDeltaChainSize(uint64_t chain_bytes, uint64_t image_bytes) {
  const uint64_t max_bytes = MaxDeltaChainBytes(image_bytes);
  if (chain_bytes <= max_bytes) return OkStatus();
  return absl::DataLossError(StrCat(
      "the delta file holds ", chain_bytes, " bytes; a chain for a ", image_bytes,
      "-byte image holds at most ", max_bytes,
      " (the image plus one record of every page): refused unread (take a full checkpoint to "
      "start a new chain)"));
}

Result<std::vector<std::byte>> EncodeDeltaRecord(const std::byte* image, uint64_t image_bytes,
                                                 uint64_t sequence, std::vector<uint64_t> pages,
                                                 const DeltaMacValue& previous, DeltaMac& mac) {
  std::sort(pages.begin(), pages.end());
  pages.erase(std::unique(pages.begin(), pages.end()), pages.end());
  uint64_t data = 0;
  for (uint64_t p : pages) {
    const uint64_t n = PageBytes(image_bytes, p);
    if (n == 0) {
      return InvalidArgument("page ", p, " is past the end of a ", image_bytes, "-byte image");
    }
    data += n;
  }
  const uint64_t index = pages.size() * sizeof(uint64_t);
  std::vector<std::byte> out(kDeltaRecordHead + index + data);
  std::byte* const payload = out.data() + kDeltaRecordHead;
  std::byte* at = payload;
  if (index > 0) std::memcpy(at, pages.data(), index);  // an empty vector's data() may be null
  at += index;
  for (uint64_t p : pages) {
    const uint64_t n = PageBytes(image_bytes, p);
    std::memcpy(at, image + p * kCheckpointPage, n);
    at += n;
  }
  DeltaHeader h{};
  std::memcpy(h.magic, kDeltaMagic, sizeof h.magic);
  h.version = kDeltaVersion;
  h.page_bytes = kCheckpointPage;
  h.image_bytes = image_bytes;
  h.sequence = sequence;
  h.page_count = pages.size();
  h.payload_bytes = index + data;
  h.payload_crc = Crc32c(0, payload, index + data);
  h.header_crc = Crc32c(0, &h, kHeaderCrcBytes);
  std::memcpy(out.data(), &h, sizeof h);
  mac.Start();
  mac.Update(&h, sizeof h);
  mac.Update(payload, index + data);
  mac.Update(previous.data(), previous.size());
  const DeltaMacValue m = mac.Finish();
  std::memcpy(out.data() + sizeof h, m.data(), m.size());
  return out;
}

DeltaMacValue RecordMac(std::span<const std::byte> record) {
  DeltaMacValue m{};
  if (record.size() >= kDeltaRecordHead) {
    std::memcpy(m.data(), record.data() + sizeof(DeltaHeader), m.size());
  }
  return m;
}

Result<DeltaHeader> ParseDeltaHeader(std::span<const std::byte> bytes) {
  if (bytes.size() < sizeof(DeltaHeader)) {
    return absl::DataLossError(StrCat("checkpoint delta header of ", bytes.size(),
                                      " bytes: a header has ", sizeof(DeltaHeader)));
  }
  DeltaHeader h;
  std::memcpy(&h, bytes.data(), sizeof h);
  if (std::memcmp(h.magic, kDeltaMagic, sizeof h.magic) != 0) {
    return absl::DataLossError("not a checkpoint delta record (bad magic)");
  }
  if (Crc32c(0, &h, kHeaderCrcBytes) != h.header_crc) {
    return absl::DataLossError("checkpoint delta header CRC mismatch");
  }
  if (h.version == 1) {
    return absl::FailedPreconditionError(
        "checkpoint delta of version 1, whose records are not authenticated: this daemon "
        "applies only version 2 (take a full checkpoint to start a new chain)");
  }
  if (h.version != kDeltaVersion || h.page_bytes != kCheckpointPage) {
    return InvalidArgument("checkpoint delta of version ", h.version, " with ", h.page_bytes,
                           "-byte pages: this daemon reads version ", kDeltaVersion, " with ",
                           kCheckpointPage, "-byte pages");
  }
  const uint64_t max_pages = (h.image_bytes + kCheckpointPage - 1) / kCheckpointPage;
  if (h.page_count > max_pages || h.payload_bytes < h.page_count * sizeof(uint64_t) ||
      h.payload_bytes > h.page_count * (sizeof(uint64_t) + kCheckpointPage)) {
    return absl::DataLossError(StrCat("checkpoint delta header: ", h.page_count, " pages in ",
                                      h.payload_bytes, " payload bytes for a ", h.image_bytes,
                                      "-byte image"));
  }
  return h;
}

Status CheckDeltaIndex(const DeltaHeader& h, std::span<const uint64_t> pages) {
  uint64_t data = 0;
  for (size_t i = 0; i < pages.size(); ++i) {
    const uint64_t n = PageBytes(h.image_bytes, pages[i]);
    if (n == 0 || (i > 0 && pages[i] <= pages[i - 1])) {
      return absl::DataLossError(StrCat("page ", pages[i], " out of order or outside the image"));
    }
    data += n;
  }
  if (pages.size() * sizeof(uint64_t) + data != h.payload_bytes) {
    return absl::DataLossError("payload length disagrees with its pages");
  }
  return OkStatus();
}

Result<DeltaWalk> WalkDeltaChain(uint64_t chain_bytes, const DeltaReader& read,
                                 uint64_t image_bytes, uint64_t max_records, DeltaMac& mac,
                                 const DeltaPageSink& sink, uint64_t chunk_bytes) {
  ISO_RETURN_IF_ERROR(CheckDeltaChainSize(chain_bytes, image_bytes));
  chunk_bytes = std::max(chunk_bytes / kCheckpointPage, uint64_t{1}) * kCheckpointPage;
  DeltaWalk w;
  std::vector<uint64_t> index;
  std::vector<std::byte> chunk;
  uint64_t off = 0;
  while (off < chain_bytes) {
    const uint64_t record = w.records + 1;
    if (w.records == max_records) {
      return Lost(StrCat("a chain holds at most ", max_records,
                         " records (daemon.checkpoint_max_deltas + 1); more bytes follow"),
                  record, off);
    }
    if (chain_bytes - off < kDeltaRecordHead) {
      return Lost(StrCat("truncated header: ", chain_bytes - off, " bytes left"), record, off);
    }
    std::byte head[kDeltaRecordHead];
    ISO_RETURN_IF_ERROR(read(off, head, sizeof head));
    auto h = ParseDeltaHeader(std::span<const std::byte>(head, sizeof(DeltaHeader)));
    if (!h.ok()) {
      if (absl::IsDataLoss(h.status()) || record > 1) {
        return Lost(std::string(h.status().message()), record, off);
      }
      return h.status();  // a version-1 chain, or another version
    }
    if (h->image_bytes != image_bytes) {
      return Lost(StrCat("made for a ", h->image_bytes, "-byte image, the base has ", image_bytes,
                         " bytes"),
                  record, off);
    }
    if (h->sequence != record) {
      return Lost(StrCat("sequence ", h->sequence, " where ", record, " belongs"), record, off);
    }
    const uint64_t payload = off + kDeltaRecordHead;
    if (h->payload_bytes > chain_bytes - payload) {
      return Lost(StrCat("truncated: ", h->payload_bytes, " payload bytes announced, ",
                         chain_bytes - payload, " present"),
                  record, off);
    }
    // The index: bounded by the image's pages (ParseDeltaHeader).
    index.resize(h->page_count);
    const uint64_t index_bytes = h->page_count * sizeof(uint64_t);
    if (index_bytes > 0) {
      ISO_RETURN_IF_ERROR(read(payload, reinterpret_cast<std::byte*>(index.data()), index_bytes));
    }
    if (Status s = CheckDeltaIndex(*h, index); !s.ok()) {
      return Lost(std::string(s.message()), record, off);
    }
    uint32_t crc = Crc32c(0, index.data(), index_bytes);
    mac.Start();
    mac.Update(&*h, sizeof(DeltaHeader));
    mac.Update(index.data(), index_bytes);
    // The data, a chunk of whole pages at a time.
    uint64_t at = payload + index_bytes;
    size_t i = 0;
    while (i < index.size()) {
      size_t j = i;
      uint64_t n = 0;
      while (j < index.size() && n + kCheckpointPage <= chunk_bytes) {
        n += PageBytes(image_bytes, index[j]);
        ++j;
      }
      chunk.resize(std::max<uint64_t>(chunk.size(), n));
      ISO_RETURN_IF_ERROR(read(at, chunk.data(), n));
      crc = Crc32c(crc, chunk.data(), n);
      mac.Update(chunk.data(), n);
      if (sink) {
        const std::byte* p = chunk.data();
        for (size_t k = i; k < j; ++k) {
          const uint64_t bytes = PageBytes(image_bytes, index[k]);
          ISO_RETURN_IF_ERROR(sink(index[k], p, bytes));
          p += bytes;
        }
      }
      at += n;
      i = j;
    }
    if (crc != h->payload_crc) return Lost("payload CRC mismatch", record, off);
    mac.Update(w.last.data(), w.last.size());
    const DeltaMacValue want = mac.Finish();
    // Constant time: a forger learns nothing from how long the compare took.
    unsigned char diff = 0;
    for (size_t k = 0; k < want.size(); ++k) {
      diff |= static_cast<unsigned char>(want[k] ^ head[sizeof(DeltaHeader) + k]);
    }
    if (diff != 0) {
      return Lost(
          "its MAC does not match this chain's key: the daemon did not write it for this "
          "checkpoint (forged, copied from another chain or owner, or written by another daemon)",
          record, off);
    }
    std::memcpy(w.last.data(), head + sizeof(DeltaHeader), w.last.size());
    ++w.records;
    w.pages += index.size();
    off = payload + h->payload_bytes;
  }
  return w;
}

}  // namespace isometry::active
