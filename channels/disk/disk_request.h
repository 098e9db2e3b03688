// How a disk channel's request becomes I/O: the pieces that depend on the
// request alone, not on the ring or the staging memory's state.
//
// 1. The program's runs are mapped to file offsets (FileRange.offset + the
//    run's file-side offset) and host addresses. Two shapes:
//    - Large runs (the normal case: the planner never routes a layout
//      change through a disk channel, converts_layout is false): runs are
//      listed, sorted by file offset and merged where they touch in the
//      file and in memory (ListRuns). I/O goes straight to host memory
//      (zero copy).
//    - Small runs (average < kSmallRun, e.g. AOS on disk <-> SOA in memory)
//      covering a dense file range (FileSideSpan): one I/O per run would be
//      millions of SQEs ("small requests kill channels"), so the whole range
//      goes through staging memory (staging.h) as a few large I/Os, and the
//      copy program runs between staging and host memory (layout/executor).
// 2. Every file range is cut at 4 KiB boundaries (CutRun): the aligned body
//    goes to the O_DIRECT fd in pieces of at most max_io_bytes; an unaligned
//    head and tail (< 4 KiB each) go to the buffered fd. We do not bounce
//    heads and tails through an aligned buffer: for a write that would be a
//    read-modify-write of the whole 4 KiB block, which races with a
//    neighbouring request writing the rest of that block (adjacent chunks
//    of one transfer are written concurrently). The page cache merges such
//    partial writes correctly, and heads and tails never share a block
//    with an O_DIRECT piece (a block is direct only when one piece covers
//    it whole), so the two paths never overlap.
//    A body whose file range is aligned but whose host address is not
//    (O_DIRECT needs both) is bounced through staging memory instead: one
//    memcpy, which the buffered path would cost too, without polluting the
//    page cache or writing back later. Without a direct fd (a file system
//    without O_DIRECT) everything takes the buffered fd, in place.
//
// Internal to channels/disk; the channel's contract is disk_channel.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "channels/channel.h"
#include "layout/copy_program.h"

namespace isometry::disk {

inline constexpr uint64_t kSmallRun = 16ull << 10;      // average run below this: staged
inline constexpr uint64_t kMaxListedRuns = 1ull << 22;  // bounds the run list (~100 MB)
inline constexpr size_t kCancelCheckRuns = 1 << 16;     // runs listed between looks at a cancel

struct Request;

// One read or write of a contiguous file range (resubmitted until done).
struct Io {
  Request* owner = nullptr;
  uint64_t file_offset = 0;  // absolute
  uint64_t length = 0;
  uint64_t done = 0;
  std::byte* mem = nullptr;   // what the kernel reads or writes
  std::byte* host = nullptr;  // bounce: the host memory `mem` stands for
  bool direct = false;        // O_DIRECT fd
  bool bounce = false;        // needs staging at issue time (host unaligned)
  bool in_staging = false;    // mem lies in the registered staging memory
  uint64_t staging_offset = 0;
  int retries = 0;
};

struct Request {
  ChannelRequest req;
  RequestDone done;
  const FileRange* file = nullptr;  // the request's file end (set by Prepare)
  std::byte* host = nullptr;        // its host end's base (set by Prepare)
  std::vector<Io> ios;              // ascending file order; never resized once built
  size_t next = 0;                  // first Io not yet issued
  int in_flight = 0;
  Status status;
  // Small-run programs: the file range [lo, hi) staged at staging_base.
  bool staged = false;
  uint64_t staging_offset = 0, staging_bytes = 0;
  std::byte* staging_base = nullptr;  // holds file byte `lo`
  CopyProgram shifted;                // file-side offsets relative to lo
  int file_slot = -1;                 // fixed-file slot pair, or -1

  bool failed() const { return !status.ok(); }
  bool finished() const { return in_flight == 0 && (failed() || next == ios.size()); }
};

struct FileRun {
  uint64_t file = 0;  // absolute offset
  std::byte* mem = nullptr;
  uint64_t len = 0;
};

// The file-side bytes [lo, hi) a program touches, relative to the instance.
// Wider than 64 bits: strides are two's complement (the compiler walks some
// blocked layouts backwards), so lo may be negative or hi past 2^63, and
// the caller refuses such a program.
struct FileSpan {
  __int128 lo = 0;
  __int128 hi = 0;
};

// The span of `p`'s file side (the destination when `write`, else the
// source); nullopt when `p` moves nothing (empty ops only).
std::optional<FileSpan> FileSideSpan(const CopyProgram& p, bool write);

// The program's runs as (file offset, host address, length), ascending in
// the file, merged where they touch in the file and in memory; nullopt when
// `req` is cancelled meanwhile (looked at every kCancelCheckRuns runs).
std::optional<std::vector<FileRun>> ListRuns(const CopyProgram& p, bool write, uint64_t file_base,
                                             std::byte* host, const ChannelRequest& req);

// Appends the I/Os of one file range to r.ios: buffered head, O_DIRECT body
// pieces of at most `max_io_bytes`, buffered tail.
void CutRun(Request& r, const FileRun& run, bool in_staging, uint64_t max_io_bytes);

}  // namespace isometry::disk
