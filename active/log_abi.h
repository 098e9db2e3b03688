// Access log ring ABI between isometryd and the owner of a watched
// allocation (version 1).
//
// The daemon creates one log per watched allocation: a sealed memfd the
// owner maps (handed over the local socket with SCM_RIGHTS, like the
// control segment of proto/ring_abi.h) and an eventfd it writes after it
// publishes entries. The memfd holds this header, then `capacity` bytes
// (a power of two) of records at `data_offset`.
//
// Single producer (the daemon), single consumer (the owner). `tail` and
// `head` are free-running byte counts; a record starts at (index &
// (capacity - 1)) and never wraps: where fewer than sizeof(LogEntry) bytes
// are left before the end, or a record of op kPad says so, the reader skips
// to the start. Each record is a LogEntry, then `data_bytes` bytes of data,
// padded to 8 bytes; `record_bytes` is the whole.
//   daemon: writes records, then stores tail (release), then writes the
//           eventfd (the owner sleeps on it).
//   owner:  loads tail (acquire), handles records, then stores head
//           (release): head is also its acknowledgement. An active flush
//           returns once head has reached the tail the flush found.
// The daemon reads `head` from shared memory as untrusted input: a value
// outside [tail - capacity, tail] counts as no progress.
// Nothing is ever dropped: a full log blocks the writing copy or fails it
// (docs/guides/active-access.md, "Active Access").
#pragma once

#include <cstdint>

#include "core/shm_ring.h"

namespace isometry::active {

inline constexpr uint32_t kLogMagic = 0x4c414f49;  // "IOAL"
inline constexpr uint32_t kLogAbiVersion = 1;

enum class LogOp : uint16_t { kPut = 1, kGet = 2, kPad = 0xffff };

// LogEntry::flags
inline constexpr uint16_t kLogApplied = 1;  // the memory effect happened
inline constexpr uint16_t kLogHasData = 2;  // data follows the entry
inline constexpr uint16_t kLogNotify = 4;   // an apply_notify region

struct LogEntry {
  uint32_t record_bytes;  // this entry, its data and padding
  uint16_t op;            // LogOp
  uint16_t flags;
  uint64_t seq;             // 1, 2, ... per log
  uint64_t offset;          // bytes into the allocation
  uint64_t size;            // bytes accessed
  uint64_t transfer;        // the copy's transfer id
  uint64_t region;          // the watched region's id
  uint64_t tag;             // the region's tag (the owner's handler id)
  uint64_t source_session;  // the accessing session's public number
  uint32_t source_node;     // 0: this node
  uint32_t reserved;
  uint64_t data_bytes;  // == size when kLogHasData, else 0
};
static_assert(sizeof(LogEntry) == 80);

using LogIndex = shm::SharedIndex<uint64_t>;  // alone on its cache line

struct LogHeader {
  uint32_t magic;
  uint32_t abi_version;
  uint64_t capacity;     // bytes of records, a power of two
  uint64_t data_offset;  // from the start of the memfd
  uint64_t allocation;   // the watched allocation's id
  LogIndex tail;         // daemon-owned
  LogIndex head;         // owner-owned
};

inline constexpr uint64_t kLogDataOffset = 256;
static_assert(sizeof(LogHeader) <= kLogDataOffset);

// The `file_log` handler's file (docs/guides/active-access.md, "Active Access"): this header,
// written when the daemon finds the file empty, then records appended
// back to back, each a LogEntry followed by its `data_bytes` of data
// (`record_bytes` is both; no padding). Little-endian, as the daemon's
// machine. A reader checks the magic and version: a later version may
// change what follows the header. The daemon appends only to an empty
// file or one that starts with this header (any version: it refuses one
// whose entry size is not its own).
inline constexpr char kFileLogMagic[8] = {'I', 'S', 'O', 'F', 'L', 'O', 'G', '\0'};
inline constexpr uint32_t kFileLogVersion = 1;
struct FileLogHeader {
  char magic[8];         // kFileLogMagic
  uint32_t version;      // kFileLogVersion
  uint32_t entry_bytes;  // sizeof(LogEntry)
  uint64_t allocation;   // the watched allocation's id when the file was started
};
static_assert(sizeof(FileLogHeader) == 24);

}  // namespace isometry::active
