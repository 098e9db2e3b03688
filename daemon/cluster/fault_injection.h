// Faults a test can inject into a running isometryd. Read from the
// environment in one place (main), logged, and handed down as this struct:
// nothing below main reads the environment for them.
//
//   ISOMETRY_FAULT_CORRUPT_CHUNK=k   the receiving node flips a byte of
//                                    chunk k of every incoming cross-node
//                                    transfer before checking it
//   ISOMETRY_FAULT_CORRUPT_ONCE=1    ... only the chunk's first arrival (a
//                                    re-sent copy arrives intact)
//   ISOMETRY_FAULT_DROP_CHUNK=k      the receiving node shuts its data
//                                    connection down as chunk k of a
//                                    transfer arrives (once per transfer)
//   ISOMETRY_FAULT_DROP_AFTER_CHUNK=k  the receiving node lands chunk k,
//                                    then shuts the connection down
//                                    instead of sending its ACK (once per
//                                    transfer)
//   ISOMETRY_FAULT_DROP_MID_CHUNK=k  the receiving node lands the first
//                                    half of chunk k, then shuts the
//                                    connection down (once per transfer)
//   ISOMETRY_FAULT_DROP_STALL_MS=t   ... and the thread that dropped it
//                                    stalls t ms, so the peer reconnects
//                                    before this node sees its old
//                                    connections break
//   ISOMETRY_FAULT_PEER_PROTOCOL=v   this node's peer hellos claim protocol
//                                    version v
//   ISOMETRY_FAULT_DATA_ADDRESS=h:p  this node's welcomes send peers' data
//                                    connections to h:p (where a test puts
//                                    a proxy on the path) instead of its
//                                    data port
//   ISOMETRY_FAULT_SETUP_DELAY_MS=t  this node sets up the halves of the
//                                    cross-node copies it starts t ms after
//                                    planning them (on its worker thread),
//                                    so a test can fail a planned node
//                                    in between
//
// Never set in production: each one set is logged as a warning.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace isometry {

struct FaultInjection {
  std::optional<uint64_t> corrupt_chunk;
  bool corrupt_once = false;
  std::optional<uint64_t> drop_chunk;
  std::optional<uint64_t> drop_after_chunk;
  std::optional<uint64_t> drop_mid_chunk;
  uint32_t drop_stall_ms = 0;
  std::optional<uint32_t> peer_protocol;
  std::string data_address;
  uint32_t setup_delay_ms = 0;

  bool any() const {
    return corrupt_chunk || drop_chunk || drop_after_chunk || drop_mid_chunk || peer_protocol ||
           !data_address.empty() || setup_delay_ms;
  }
};

// The faults the environment asks for (none when no variable is set); logs
// a warning for each. Values are read as decimal numbers, as strtoull does.
FaultInjection FaultInjectionFromEnvironment();

}  // namespace isometry
