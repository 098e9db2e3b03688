// The delta file of an incremental checkpoint (Active Access, issues #19
// and #48).
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
// One record (version 2), all integers little-endian:
//
//   DeltaHeader (64 bytes)
//   mac:    32 bytes, HMAC-SHA256 with the chain's key over the header's
//           64 bytes, the payload, and the previous record's mac (32 zero
//           bytes for the first record)
//   index:  page_count x uint64  page numbers, strictly increasing
//   data:   the pages in index order; each is kCheckpointPage bytes but
//           the image's last page, which may be shorter
//
// `payload_bytes` is the size of index + data, `payload_crc` their CRC-32C,
// `header_crc` the CRC-32C of the header's first 56 bytes. The CRCs find
// damage; the mac finds records the daemon did not write for this chain
// (forged, or taken from another chain): only the daemon holds the key
// (DeltaMac is its interface here; daemon/node/checkpoint_files.h keys it).
// Chaining each mac to the previous one keeps records from being dropped
// from the middle or reordered.
//
// Version 1 (issue #19) had no mac: it is refused (FAILED_PRECONDITION,
// "take a full checkpoint"), never applied. Every length is checked
// against the image's size before a byte is used, so a record can never
// write outside the image; a chain larger than MaxDeltaChainBytes is
// refused from its size alone, before anything is read.
#pragma once

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "core/status.h"

namespace isometry::active {

inline constexpr uint64_t kCheckpointPage = 4096;
inline constexpr uint32_t kDeltaVersion = 2;
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

using DeltaMacValue = std::array<std::byte, 32>;
// Header + mac: what precedes a record's payload.
inline constexpr uint64_t kDeltaRecordHead = sizeof(DeltaHeader) + sizeof(DeltaMacValue);

// A record's authenticator, keyed for one chain by its maker. Start()
// begins a record; Update() feeds bytes; Finish() returns the mac.
// Not thread-safe: one record at a time.
class DeltaMac {
 public:
  virtual ~DeltaMac() = default;
  virtual void Start() = 0;
  virtual void Update(const void* data, size_t n) = 0;
  virtual DeltaMacValue Finish() = 0;
};

// CRC-32C (Castagnoli); `crc` is a previous result to continue from (0 to
// start). Uses SSE4.2 where the CPU has it.
uint32_t Crc32c(uint32_t crc, const void* data, size_t n);

// Bytes of page `page` in an image of `image_bytes` (0 past its end).
uint64_t PageBytes(uint64_t image_bytes, uint64_t page);

// The largest record an image of `image_bytes` can have (every page).
uint64_t MaxDeltaRecordBytes(uint64_t image_bytes);
// The largest chain a checkpoint leaves: a checkpoint appends only to a
// chain no larger than the image, so at most the image plus one record.
uint64_t MaxDeltaChainBytes(uint64_t image_bytes);
// DATA_LOSS (naming the bound) for a delta file of `chain_bytes` that no
// checkpoint of an `image_bytes` image leaves: checked before reading.
Status CheckDeltaChainSize(uint64_t chain_bytes, uint64_t image_bytes);

// One record, ready to append with a single write: header, mac, index and
// a copy of the pages taken from `image` now (so a page written meanwhile
// cannot make the stored CRC disagree with the stored bytes). `pages` is
// sorted and de-duplicated here; a page past the image is refused.
// `previous` is the mac of the chain's last record (zeros for the first).
Result<std::vector<std::byte>> EncodeDeltaRecord(const std::byte* image, uint64_t image_bytes,
                                                 uint64_t sequence, std::vector<uint64_t> pages,
                                                 const DeltaMacValue& previous, DeltaMac& mac);
// The mac stored in an encoded record (to chain the next one).
DeltaMacValue RecordMac(std::span<const std::byte> record);

// Checks a header read from a file (magic, version, page size, CRC, the
// payload's bounds for `page_count`). DATA_LOSS for a damaged header,
// FAILED_PRECONDITION for version 1, INVALID_ARGUMENT for another version
// or page size.
Result<DeltaHeader> ParseDeltaHeader(std::span<const std::byte> bytes);

// Checks a record's index (`page_count` entries) against its header: pages
// strictly increasing, inside the image, and index + their bytes equal to
// payload_bytes. DATA_LOSS (without the record's place: the caller adds it).
Status CheckDeltaIndex(const DeltaHeader& h, std::span<const uint64_t> pages);

// Reads `n` bytes at `offset` of a chain (a file, or bytes in memory);
// DATA_LOSS where the chain ends first.
using DeltaReader = std::function<Status(uint64_t offset, std::byte* out, uint64_t n)>;
// Receives a verified-so-far record's pages as they stream by: `data`
// holds PageBytes(image_bytes, page) bytes. The record's CRC and mac are
// checked only after its last page: a sink must be able to discard what
// it got (write into a private image, or run after a verifying walk).
using DeltaPageSink = std::function<Status(uint64_t page, const std::byte* data, uint64_t n)>;

struct DeltaWalk {
  uint64_t records = 0;
  uint64_t pages = 0;    // entries of every index together
  DeltaMacValue last{};  // the last record's mac (zeros for an empty chain)
};

// Walks a chain of `chain_bytes` for an image of `image_bytes` through
// `read`, in bounded memory (one record's index and a chunk of at most
// `chunk_bytes`): the size bound first (MaxDeltaChainBytes, and at most
// `max_records` records), then every record's header, sequence, index,
// payload CRC and mac, feeding `sink` (may be empty) its pages. DATA_LOSS
// names the record and offset of a truncated, damaged or forged record.
Result<DeltaWalk> WalkDeltaChain(uint64_t chain_bytes, const DeltaReader& read,
                                 uint64_t image_bytes, uint64_t max_records, DeltaMac& mac,
                                 const DeltaPageSink& sink, uint64_t chunk_bytes = 1 << 20);

}  // namespace isometry::active
