// The serve window: shared memory between a process that publishes a
// private range and the processes of its uid that copy out of it, through
// which the publisher packs what a reader asks for in its own process, and
// the reader unpacks it into its own (docs/guides/client-memory.md, "Served reads"). Reading
// another process's fragmented memory through the kernel costs a system
// call a run (or one read of the whole extent); the publisher packs its
// own memory at memcpy speed, as MPI's sender does, while the reader
// unpacks the pieces already packed: a pipeline of two processes with no
// daemon thread and no system call between them.
//
// The publisher makes the window (a sealed memfd) and names it to isometryd
// when it publishes; a reader that gets a direct read lease for a range of
// that process is told the window's fd number, size and token, takes the
// fd with pidfd_getfd (which the kernel allows only where it would allow
// reading the process's memory) and maps it.
//
// Layout: [0, kAreasOffset) this header; then one area per lane, each its
// program (kProgramBytes of hop_window::ProgramRecords) and kSlots slots of
// kSlotBytes.
//
// One lane per reader process, owned while it lives (owner = its pid).
// A copy on a lane (counts tagged with the request, see Tagged):
//   reader: writes the program (when the lane holds another) and the
//           request (its fields, then seq); if the server is idle, bumps
//           the doorbell and wakes it;
//   server: packs piece k of the program cut (layout/packed_pieces.h) into
//           slot k % kSlots once consumed > k - kSlots, stores produced = k+1,
//           wakes a sleeping reader; at the end stores result, then
//           finished = seq, and wakes the reader;
//   reader: unpacks piece k once produced > k, stores consumed = k+1, wakes
//           a sleeping server; the copy is done when finished == seq and
//           result == 0.
// A reader gives up on a request by storing cancel = seq and waits for
// finished == seq before the lane's next request.
//
// Trust: both sides are processes of one uid, each able to read the
// other's memory anyway. Still, neither trusts the window: the server
// copies the program out and checks that it reads only inside the ranges
// it serves and that every piece fits a slot; the reader runs only its own
// program (from its lease) and checks the header before it maps a byte
// past it.
#pragma once

#include <atomic>
#include <cstdint>

#include "core/status.h"

namespace isometry::serve_window {

inline constexpr uint32_t kMagic = 0x56524553;  // "SERV"
inline constexpr uint32_t kVersion = 2;
inline constexpr uint32_t kLanes = 4;
// Sixteen slots: a copy of 2 MiB or more (pieces of 128 KiB) goes round
// 2 MiB of them, so a slot is packed again only after the reader has
// unpacked 2 MiB (and written as much of its own memory); its lines have
// then left the reader's cache, and packing straight into the slot can
// beat packing aside first (client/cpp/pack_chooser.h).
inline constexpr uint32_t kSlots = 16;
inline constexpr uint64_t kSlotBytes = uint64_t{256} << 10;
// Room for the largest lease program isometryd grants (768 KiB).
inline constexpr uint64_t kProgramBytes = uint64_t{1} << 20;
inline constexpr uint64_t kAreasOffset = 16 << 10;
inline constexpr uint64_t kAreaBytes = kProgramBytes + kSlots * kSlotBytes;
inline constexpr uint64_t kWindowBytes = kAreasOffset + kLanes * kAreaBytes;

struct alignas(64) Word {
  std::atomic<uint32_t> value;
};
static_assert(std::atomic<uint32_t>::is_always_lock_free &&
              std::atomic<uint64_t>::is_always_lock_free);

// Progress words carry their request's tag (the low 16 bits of its
// sequence number) above a count, so nobody resets them between requests
// (a reset would be one more cache line moved between the two cores).
inline constexpr uint32_t kMaxPieces = 0xffff;  // pieces a request may have
// The piece size for a copy of `bytes`: a few pieces in flight even for
// small copies, so that packing and unpacking overlap, and at most 128 KiB
// (half a slot). Each piece costs both sides a handover (a few cache
// lines crossing cores), so larger pieces ran faster, up to 128 KiB
// (docs/benchmarks/design-measurements.md, "Direct and served reads").
inline uint64_t PieceBytesFor(uint64_t bytes) {
  const uint64_t eighth = (bytes / 8 + 4095) / 4096 * 4096;
  return eighth < (8 << 10) ? (8 << 10) : eighth > (128 << 10) ? (128 << 10) : eighth;
}
inline uint32_t Tagged(uint32_t seq, uint32_t count) { return (seq << 16) | count; }
// The count `word` holds for request `seq`: 0 when it is another's.
inline uint32_t CountFor(uint32_t word, uint32_t seq) {
  return (word >> 16) == (seq & 0xffff) ? word & 0xffff : 0;
}

// Written by the lane's reader when it posts: one cache line, so the
// server reads the request and what it asks in one transfer.
struct alignas(64) Request {
  std::atomic<uint64_t> program_id;  // nonzero; names what the program area holds
  std::atomic<uint64_t> program_ops;
  std::atomic<uint64_t> program_bytes;
  std::atomic<uint64_t> remote_address;  // the program's source offset 0, in the server
  std::atomic<uint64_t> piece_bytes;     // <= kSlotBytes
  std::atomic<uint64_t> bytes;           // what the program moves (a check)
  std::atomic<uint32_t> reader_cpu;      // where the reader runs (sched_getcpu): see LeaveCpu
  std::atomic<uint32_t> seq;             // the last request posted
};
static_assert(sizeof(Request) == 64);

// Written by the server.
struct alignas(64) Progress {
  std::atomic<uint32_t> produced;       // Tagged(seq, pieces packed): the reader sleeps on it
  std::atomic<uint32_t> finished;       // the last request ended
  std::atomic<uint32_t> result;         // its google.rpc code (0: every piece packed)
  std::atomic<uint32_t> server_cpu;     // where the server runs
  std::atomic<uint32_t> server_sleeps;  // 1 while it sleeps on Drain::consumed
};

// Written by the reader during a copy.
struct alignas(64) Drain {
  std::atomic<uint32_t> consumed;       // Tagged(seq, pieces unpacked): the server sleeps on it
  std::atomic<uint32_t> cancel;         // a request the reader gave up on
  std::atomic<uint32_t> reader_sleeps;  // 1 while it sleeps on Progress::produced
};

struct Lane {
  alignas(64) std::atomic<uint64_t> owner;  // 0: free; else the reader's pid
  Request request;
  Progress progress;
  Drain drain;
};

struct Header {
  uint32_t magic;
  uint32_t version;
  uint64_t window_bytes;
  uint64_t token;  // random: tells a reader it mapped the window the lease named
  uint32_t lanes, slots;
  uint64_t slot_bytes, program_bytes, areas_offset;
  uint64_t header_bytes;  // sizeof(Header): another build's layout differs
  Word doorbell;          // readers add one after posting
  Word server_idle;       // 1 while the server sleeps on `doorbell`
  Lane lanes_[kLanes];
};
static_assert(sizeof(Header) <= kAreasOffset);

// Writes the header of a fresh (zeroed) window.
void InitHeader(Header& h, uint64_t token);

// Checks what a reader mapped: this library's magic, version and geometry,
// the window's size and the lease's token. INVALID_ARGUMENT otherwise.
Status CheckHeader(const Header& h, uint64_t window_bytes, uint64_t token);

// Lane `lane`'s program area and slot `slot` (window = the mapping's start).
std::byte* ProgramArea(std::byte* window, uint32_t lane);
std::byte* Slot(std::byte* window, uint32_t lane, uint32_t slot);

// One step of a spin-wait: a pause. Not sched_yield: on a core another
// program keeps busy, a yield hands it the rest of the time slice
// (milliseconds), and a copy whose two sides yielded that way ran far
// below the kernel's speed (docs/benchmarks/design-measurements.md,
// "Direct and served reads"); a spin that ends in a futex sleep is woken
// as soon as the other side moves.
void Relax();

// Moves the calling thread off `cpu` when it runs there, keeping its
// affinity. A reader and the server spin on each other's words; on one
// core they take turns a time slice at a time. The scheduler puts them
// there when one wakes the other (wake-affine placement) and may take
// milliseconds to spread them again, and copies ran several times slower
// meanwhile (docs/benchmarks/design-measurements.md, "Direct and served
// reads"). A thread allowed on that core alone stays.
void LeaveCpu(uint32_t cpu);

// Shared futexes (both processes wait and wake on the window's words).
void Wake(std::atomic<uint32_t>& w);
// Sleeps while w == seen, at most `timeout_us`.
void Wait(std::atomic<uint32_t>& w, uint32_t seen, uint32_t timeout_us);

}  // namespace isometry::serve_window
