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

Result<std::vector<std::byte>> EncodeDeltaRecord(const std::byte* image, uint64_t image_bytes,
                                                 uint64_t sequence, std::vector<uint64_t> pages) {
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
  std::vector<std::byte> out(sizeof(DeltaHeader) + index + data);
  std::byte* at = out.data() + sizeof(DeltaHeader);
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
  h.payload_crc = Crc32c(0, out.data() + sizeof h, index + data);
  h.header_crc = Crc32c(0, &h, kHeaderCrcBytes);
  std::memcpy(out.data(), &h, sizeof h);
  return out;
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

Result<std::vector<DeltaRecordView>> ParseDeltaChain(std::span<const std::byte> chain,
                                                     uint64_t image_bytes) {
  std::vector<DeltaRecordView> out;
  uint64_t off = 0;
  while (off < chain.size()) {
    const uint64_t record = out.size() + 1;
    auto h = ParseDeltaHeader(chain.subspan(off));
    if (!h.ok()) {
      if (absl::IsDataLoss(h.status())) return Lost(std::string(h.status().message()), record, off);
      return h.status();
    }
    if (h->image_bytes != image_bytes) {
      return InvalidArgument("checkpoint delta record ", record, " is for a ", h->image_bytes,
                             "-byte image, the base has ", image_bytes, " bytes");
    }
    if (h->sequence != record) {
      return Lost(StrCat("sequence ", h->sequence, " where ", record, " belongs"), record, off);
    }
    const uint64_t payload = off + sizeof(DeltaHeader);
    if (h->payload_bytes > chain.size() - payload) {
      return Lost(StrCat("truncated: ", h->payload_bytes, " payload bytes announced, ",
                         chain.size() - payload, " present"),
                  record, off);
    }
    if (Crc32c(0, chain.data() + payload, h->payload_bytes) != h->payload_crc) {
      return Lost("payload CRC mismatch", record, off);
    }
    DeltaRecordView v;
    v.sequence = h->sequence;
    v.pages.resize(h->page_count);
    if (!v.pages.empty()) {
      std::memcpy(v.pages.data(), chain.data() + payload, h->page_count * sizeof(uint64_t));
    }
    uint64_t data = 0;
    for (size_t i = 0; i < v.pages.size(); ++i) {
      const uint64_t n = PageBytes(image_bytes, v.pages[i]);
      if (n == 0 || (i > 0 && v.pages[i] <= v.pages[i - 1])) {
        return Lost(StrCat("page ", v.pages[i], " out of order or outside the image"), record, off);
      }
      data += n;
    }
    if (h->page_count * sizeof(uint64_t) + data != h->payload_bytes) {
      return Lost("payload length disagrees with its pages", record, off);
    }
    v.data_offset = payload + h->page_count * sizeof(uint64_t);
    out.push_back(std::move(v));
    off = payload + h->payload_bytes;
  }
  return out;
}

uint64_t ApplyDeltaChain(std::span<const std::byte> chain,
                         const std::vector<DeltaRecordView>& records, std::byte* image,
                         uint64_t image_bytes) {
  uint64_t written = 0;
  for (const DeltaRecordView& r : records) {
    const std::byte* at = chain.data() + r.data_offset;
    for (uint64_t p : r.pages) {
      const uint64_t n = PageBytes(image_bytes, p);
      std::memcpy(image + p * kCheckpointPage, at, n);
      at += n;
    }
    written += r.pages.size();
  }
  return written;
}

}  // namespace isometry::active
