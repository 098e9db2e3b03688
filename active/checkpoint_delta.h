// The delta file of an incremental checkpoint (Active Access, issue #19).
//
// A checkpoint of an allocation is a base image `F` (the allocation's bytes,
// nothing else, so `RegisterFile` + `Copy` still reads it) and a delta file
// `F.delta` beside it: a chain of records, each appended by one incremental
// checkpoint with one write and one fdatasync. Restoring reads the base and
// applies the records in order; applying a record twice is harmless (each
// carries whole pages), which is what makes compaction crash-safe: the
// records are written into the base, the base is synced, and only then is
// the delta file cut to zero.
//
// One record, all integers little-endian:
//
//   DeltaHeader (64 bytes)
//   index:  page_count x uint64  page numbers, strictly increasing
//   data:   the pages in index order; each is kCheckpointPage bytes but
//           the image's last page, which may be shorter
//
// `payload_bytes` is the size of index + data, `payload_crc` their CRC-32C,
// `header_crc` the CRC-32C of the header's first 56 bytes. Version 1 is the
// only one; a reader refuses any other. Every length is checked against the
// image's size before a byte is used, so a record can never write outside
// the image, and a chain is parsed whole before anything is applied.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "core/status.h"

namespace isometry::active {

inline constexpr uint64_t kCheckpointPage = 4096;
inline constexpr uint32_t kDeltaVersion = 1;
inline constexpr char kDeltaMagic[8] = {'I', 'S', 'O', 'D', 'E', 'L', 'T', 'A'};

struct DeltaHeader {
  char magic[8];
  uint32_t version;
  uint32_t page_bytes;     // kCheckpointPage
  uint64_t image_bytes;    // the base image's size: every record of a chain agrees
  uint64_t sequence;       // 1, 2, ... in file order
  uint64_t page_count;     // entries of the index
  uint64_t payload_bytes;  // index + data
  uint32_t reserved;       // 0
  uint32_t payload_crc;
  uint32_t header_crc;  // of the 56 bytes before it
  uint32_t pad;         // 0
};
static_assert(sizeof(DeltaHeader) == 64);
static_assert(std::endian::native == std::endian::little, "the delta format is little-endian");

// CRC-32C (Castagnoli); `crc` is a previous result to continue from (0 to
// start). Uses SSE4.2 where the CPU has it.
uint32_t Crc32c(uint32_t crc, const void* data, size_t n);

// Bytes of page `page` in an image of `image_bytes` (0 past its end).
uint64_t PageBytes(uint64_t image_bytes, uint64_t page);

// One record, ready to append with a single write: header, index and a
// copy of the pages taken from `image` now (so a page written meanwhile
// cannot make the stored CRC disagree with the stored bytes). `pages` is
// sorted and de-duplicated here; a page past the image is refused.
Result<std::vector<std::byte>> EncodeDeltaRecord(const std::byte* image, uint64_t image_bytes,
                                                 uint64_t sequence, std::vector<uint64_t> pages);

// Checks a header read from a file (magic, version, page size, CRC, the
// payload's bounds for `page_count`). DATA_LOSS for a damaged header,
// INVALID_ARGUMENT for another version or page size.
Result<DeltaHeader> ParseDeltaHeader(std::span<const std::byte> bytes);

// A parsed record: where its index and data lie in the chain's bytes.
struct DeltaRecordView {
  uint64_t sequence = 0;
  std::vector<uint64_t> pages;
  uint64_t data_offset = 0;  // in the chain's bytes
};

// Parses a whole delta file for an image of `image_bytes`: every record's
// header and payload CRC, the sequence (1, 2, ...), every page inside the
// image. DATA_LOSS names the record and offset of a truncated or damaged
// record; INVALID_ARGUMENT a chain made for an image of another size.
Result<std::vector<DeltaRecordView>> ParseDeltaChain(std::span<const std::byte> chain,
                                                     uint64_t image_bytes);

// Writes the records (parsed from `chain` for `image_bytes`) into `image`,
// in order. Returns the pages written.
uint64_t ApplyDeltaChain(std::span<const std::byte> chain,
                         const std::vector<DeltaRecordView>& records, std::byte* image,
                         uint64_t image_bytes);

}  // namespace isometry::active
