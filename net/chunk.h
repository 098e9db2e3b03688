// The data plane's job: one chunk of a cross-node copy, as a PeerLink sends
// or receives it. The network channel (channels/tcp/) turns a channel
// request into one; nothing in net/ knows channels.
//
// On the wire a chunk is dense, in the receiving side's layout: `program`
// gathers it from `memory` when sending (its destination offsets are the
// wire's) and scatters it into `memory` when receiving (its source offsets
// are the wire's). A Chunk does not own what it names: the caller keeps the
// memory and the cross-node transfer alive until its ChunkDone has run.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

#include "core/status.h"
#include "layout/copy_program.h"

namespace isometry::net {

struct Chunk {
  uint64_t transfer = 0;  // the cross-node copy, as both nodes number it
  uint64_t chunk = 0;     // its place in the copy's chunk grid
  std::shared_ptr<const CopyProgram> program;
  // This node's host memory: only read when sending, written when
  // receiving.
  std::byte* memory = nullptr;
  int priority = 0;  // the transfer's; a connection sends higher first
  // The transfer's QoS class on this node and the class's weight on the
  // link: a connection shares its sending by weight between classes
  // (core/fair_queue.h), by priority within one.
  uint32_t qos_class = 0;
  uint32_t qos_weight = 1;
  int qos_nice = 0;  // the class's: the connection's thread moves it at this nice value
};

// Called exactly once per Send/Post, on a data-plane thread, never inside
// the call that took the chunk.
using ChunkDone = std::function<void(Status)>;

}  // namespace isometry::net
