// The DiskRead and DiskWrite channels (Isometry table 2): a file (DSK
// memory) to host memory (SYS/REG/ZCM) and back, on io_uring.
//
// A request's copy program is executed as file I/O: every contiguous run is
// a read or write at file offset FileRange.offset + (the run's offset in the
// program) into or from host memory. DiskRead takes a FileRange source and a
// HostBytes destination; DiskWrite a HostBytes source and a FileRange
// destination (channels/endpoint.h).
//
// Contract (besides channels/channel.h):
//  - The channel never opens, closes, truncates or syncs a file it is given:
//    the FileRange's fds must stay open until `done` runs. Durability is the
//    caller's: call SyncFile() (disk_file.h) once a write transfer has
//    finished.
//  - A DiskWrite program must write each file byte at most once
//    (CompileCopy's programs do); a DiskRead program may read bytes twice.
//  - A failure (ENOSPC, EIO, EBADF, a file shorter than the instance, ...)
//    completes the request with a Status naming the channel, the path, the
//    file offset, the length and the cause, e.g.
//      disk_read 'dsk0': /data/a.bin at offset 8192 (+4096): Input/output error
//    Host bytes of a failed DiskRead (and file bytes of a failed DiskWrite)
//    are unspecified. Every staging buffer is back in the pool before `done`
//    runs, and the channel serves later requests normally.
//  - `done` runs on the channel's one worker thread: it must not block for
//    long (it delays every other request) nor destroy the channel.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "channels/channel.h"
#include "channels/channel_backend.h"
#include "config/runtime_config.h"

namespace isometry {

// One I/O as it completes, shown to DiskChannelOptions::io_hook.
struct DiskIoEvent {
  uint64_t sequence = 0;  // 0, 1, 2, ... per channel, in completion order
  bool write = false;
  bool direct = false;  // issued on the O_DIRECT fd
  uint64_t file_offset = 0;
  uint64_t length = 0;
  const std::string* path = nullptr;
  int result = 0;  // what the kernel returned: bytes, or -errno
};

// The fault-injection seam (tests only): called on the channel's worker
// thread for every completed I/O; returns the result the channel acts on:
// event.result to pass it through, or e.g. -EIO to fail it, or a smaller
// byte count to simulate a short transfer. Must not call into the channel.
using DiskIoHook = std::function<int(const DiskIoEvent&)>;

struct DiskChannelOptions {
  // SQEs in flight (0: kDefaultQueueDepth). A virtio disk saturates at a
  // depth of about 4 (fio figures: docs/benchmarks/design-measurements.md,
  // "Disk"). The default is twice
  // the knee, so one worker thread's wake-up latency between a completion
  // and the next submit does not drain the device (deeper gained nothing
  // there, same page). NVMe wants 32+, hence the knob.
  unsigned queue_depth = 0;
  // Largest single read or write; bigger runs are split (in file order).
  uint64_t max_io_bytes = 1ull << 20;
  // Registered staging memory for bounce buffers and small-run programs
  // (0: max(8 MiB, 2 x request_bytes)). Allocated and pinned at creation.
  uint64_t staging_bytes = 0;
  bool register_buffers = true;  // READ_FIXED/WRITE_FIXED on staging memory
  bool register_files = true;    // fixed files for requests of several I/Os
  DiskIoHook io_hook;            // tests only
};

inline constexpr unsigned kDefaultQueueDepth = 8;

// Sets up the ring and the staging memory and starts the worker thread. Fails
// on a config that is not kDiskRead/kDiskWrite, or when io_uring cannot be
// set up (the message says why).
Result<std::unique_ptr<Channel>> MakeDiskChannel(const ChannelConfig& config);
Result<std::unique_ptr<Channel>> MakeDiskChannel(const ChannelConfig& config,
                                                 const DiskChannelOptions& options);

// What a disk channel chose at run time (ring set-up, registrations, queue
// depth, staging), for the log; "" for a channel that is not a disk channel.
std::string DescribeDiskChannel(const Channel& channel);

// The disk_read and disk_write kinds' descriptors (channel_backend.h).
const ChannelBackend& DiskReadBackend();
const ChannelBackend& DiskWriteBackend();

}  // namespace isometry
