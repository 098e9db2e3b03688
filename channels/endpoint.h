// One end of a channel request: where a request reads its bytes from or
// writes them to. Each kind of memory a channel can reach is one
// alternative; a new kind of channel adds one alternative here (and its
// channel takes it), and the runtime, which only passes endpoints through,
// does not grow a field per kind.
//
// An endpoint names the first byte of an instance or of an intermediate
// buffer's slot; the request's CopyProgram holds the offsets from there.
// Endpoints are plain values that do not own what they name: the runtime
// keeps the memory, the file or the cross-node transfer alive until the
// request's `done` has run.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <variant>

#include "core/status.h"

namespace isometry {

class OwnHops;  // channels/cma/own_hops.h

// Bytes in this process's address space (SYS, REG and ZCM memories, and
// every intermediate buffer): the instance's or slot's first byte. A
// source is only read.
struct HostBytes {
  std::byte* base = nullptr;
};

// A range of a file (DSK memory): the instance's first byte is at `offset`.
// `direct_fd`, when >= 0, is the same file opened with O_DIRECT, for
// aligned runs.
struct FileRange {
  int fd = -1;
  int direct_fd = -1;
  uint64_t offset = 0;
  std::string path;  // for error messages
};

// The network half of a cross-node hop (RemoteMemcpy): chunk `chunk` of the
// cross-node transfer `transfer`, linearized densely in the receiving
// side's layout. As a destination it is the sending half, as a source the
// receiving half.
struct NetHalf {
  uint64_t transfer = 0;
  uint64_t chunk = 0;
  std::string peer;  // the other node (a channel shared by peers picks its link by it)
};

// Memory of a GPU (FBM): a device pointer on device `device` (the CUDA
// runtime's device number); the GPU channels (channels/cuda/) take it.
struct DeviceBytes {
  int device = 0;
  uint64_t address = 0;
};

// Memory of another process on this node (reached by CMA,
// channels/cma/): an address in process `pid`. `pidfd` pins the process's
// identity: a pidfd the caller took when the process registered
// (channels/cma/client_process.h) and keeps open until `done` has run. The
// CMA channel refuses an endpoint without one (pids are reused; the pidfd
// is how it knows the pid still names that process).
struct ProcessBytes {
  pid_t pid = 0;
  uint64_t address = 0;
  int pidfd = -1;
  // /proc/<pid>/mem opened when the process registered: it pins the
  // address space that was checked, so I/O through it fails once the
  // process exec()s another program (channels/cma/cma_copy.h). -1: none.
  int mem_fd = -1;
  // The process runs its own hops through a window (channels/cma/
  // own_hops.h): a request between this end and that window's data area
  // is handed to it. Null: none. Kept alive by the transfer.
  OwnHops* own_hops = nullptr;
};

using Endpoint = std::variant<HostBytes, FileRange, NetHalf, DeviceBytes, ProcessBytes>;

// "host memory", "a file", ...: for error messages.
std::string_view EndpointKindName(const Endpoint& endpoint);

// The alternative T of `endpoint`, or FAILED_PRECONDITION naming the
// channel, the side ("source"/"destination") and what it got instead: a
// channel handed an endpoint it cannot reach fails that request and stays
// usable.
template <class T>
Result<const T*> EndpointAs(const Endpoint& endpoint, std::string_view channel,
                            std::string_view side);

}  // namespace isometry
