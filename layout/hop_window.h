// The hop window: shared memory between isometryd and one local client
// through which the client runs, in its own process, the hops of its
// copies that touch its own private memory (docs/guides/client-memory.md, "Hops the client runs
// itself"). Moving a run between another process and the daemon costs a
// system call per run (channels/cma/); the client copies its own memory
// at memcpy speed.
//
// Layout of the window (all offsets from its first byte):
//   [0, sizeof(HopWindowHeader))  this header, with the two rings;
//   [data_offset, +data_bytes)    intermediate buffers of one transfer at
//                                 a time (the daemon's ring slots);
//   [arena_offset, +arena_bytes)  one program slot per work ring entry,
//                                 arena_slot_bytes each, of ProgramRecords.
//
// Work ring (daemon -> client): the daemon writes work[work_tail % kHopEntries]
// and the program into its arena slot, then advances work_tail (release) and
// wakes the client through its completion eventfd. The client runs the
// program between the window and its own memory, advances work_head, writes
// done[done_tail % kHopEntries], advances done_tail (release) and wakes the
// daemon with FUTEX_WAKE on done_tail.
//
// Trust: the client may write anything into the window. The daemon never
// reads its own programs back, treats every index and done entry as
// untrusted input, and only ever hurts the client itself by trusting the
// bytes of the data area (they are that client's transfer's bytes). The
// client bounds-checks every program against the data area before running
// it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include "core/shm_ring.h"
#include "core/status.h"
#include "layout/copy_program.h"

namespace isometry::hop_window {

inline constexpr uint32_t kMagic = 0x504f4849;  // "IHOP"
inline constexpr uint32_t kVersion = 1;
// Work in flight per window: the CMA channel has a few requests of one
// transfer out at a time, so a few entries, each with a large program slot.
inline constexpr uint32_t kHopEntries = 8;

// Which way a work entry copies: out of the window into the client's
// memory (the hop's destination is the client's), or out of the client's
// memory into the window.
enum class Direction : uint32_t { kIntoClient = 0, kFromClient = 1 };

struct WorkEntry {
  uint64_t id;             // echoed in the done entry
  uint64_t window_offset;  // the slot's first byte, from the window's start
  uint64_t address;        // the client's end, in its address space
  uint32_t program_slot;   // arena slot holding program_ops records
  uint32_t program_ops;
  uint32_t direction;      // Direction
  uint32_t reserved;       // 0
  uint64_t bytes;          // what the program moves (a check)
  uint64_t program_bytes;  // the records' length in the slot
};
static_assert(sizeof(WorkEntry) == 56);

struct DoneEntry {
  uint64_t id;
  int32_t code;  // google.rpc.Code: 0 = the program ran
  uint32_t reserved;
};
static_assert(sizeof(DoneEntry) == 16);

using Index = shm::SharedIndex<uint32_t>;  // alone on its cache line

struct HopWindowHeader {
  uint32_t magic;
  uint32_t version;
  uint64_t data_offset;
  uint64_t data_bytes;
  uint64_t arena_offset;
  uint64_t arena_bytes;
  uint64_t arena_slot_bytes;
  uint32_t entries;  // kHopEntries
  uint32_t reserved;
  Index work_tail;  // daemon-owned
  Index work_head;  // client-owned
  Index done_tail;  // client-owned; the futex word the daemon sleeps on
  Index done_head;  // daemon-owned
  WorkEntry work[kHopEntries];
  DoneEntry done[kHopEntries];
};

// One CopyOp as it lies in the arena: this header, then its num_loops
// CopyLoops (outermost first), so an op of a single run takes 32 bytes.
// No padding is left uninitialized: every byte is written.
struct ProgramRecord {
  uint64_t src_offset;
  uint64_t dst_offset;
  uint64_t run_bytes;
  uint32_t num_loops;
  uint32_t reserved;
};
static_assert(sizeof(ProgramRecord) == 32 && sizeof(CopyLoop) == 24);

// The window's layout for `window_bytes` in all: the header, then
// `arena_bytes` of programs (kHopEntries slots), then the data area, each
// 4 KiB-aligned. Nullopt when that leaves no data area.
struct Geometry {
  uint64_t data_offset = 0, data_bytes = 0;
  uint64_t arena_offset = 0, arena_bytes = 0, arena_slot_bytes = 0;
};
std::optional<Geometry> GeometryFor(uint64_t window_bytes, uint64_t arena_bytes);

// Writes the header of a fresh window (zeroed memory) of that geometry.
void InitHeader(HopWindowHeader& h, const Geometry& g);

// Checks a header the other side wrote against the window's size: magic,
// version, entries and areas that lie inside the window without overlap.
Status CheckHeader(const HopWindowHeader& h, uint64_t window_bytes);

// What EncodeProgram writes for `program`, in bytes.
uint64_t EncodedBytes(const CopyProgram& program);

// Writes `program`'s ops as records to `out` (room for `capacity` bytes);
// the bytes written, or nullopt when they do not fit.
std::optional<uint64_t> EncodeProgram(const CopyProgram& program, std::byte* out,
                                      uint64_t capacity);

// Reads `ops` records back from `bytes` bytes, validating each (within
// the bytes, num_loops <= kMaxCopyLoops, nonzero counts) and that they
// fill the bytes exactly; INVALID_ARGUMENT otherwise.
Result<CopyProgram> DecodeProgram(const std::byte* in, uint64_t ops, uint64_t bytes);

// [lo, hi) of the offsets `program` touches on one side, from its base
// (negative strides included: lo may be negative). Nullopt on overflow.
struct Span {
  __int128 lo = 0;
  __int128 hi = 0;
};
std::optional<Span> SideSpan(const CopyProgram& program, bool source);

}  // namespace isometry::hop_window
