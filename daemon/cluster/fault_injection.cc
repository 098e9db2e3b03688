#include "daemon/cluster/fault_injection.h"

#include <spdlog/spdlog.h>

#include <cstdlib>

namespace isometry {

FaultInjection FaultInjectionFromEnvironment() {
  FaultInjection f;
  if (const char* c = std::getenv("ISOMETRY_FAULT_CORRUPT_CHUNK")) {
    f.corrupt_chunk = std::strtoull(c, nullptr, 10);
    spdlog::warn("fault injection: chunk {} of every incoming transfer is corrupted on arrival",
                 *f.corrupt_chunk);
  }
  if (const char* o = std::getenv("ISOMETRY_FAULT_CORRUPT_ONCE"); o && f.corrupt_chunk) {
    f.corrupt_once = std::strtoull(o, nullptr, 10) != 0;
    if (f.corrupt_once) spdlog::warn("fault injection: ... on its first arrival only");
  }
  if (const char* d = std::getenv("ISOMETRY_FAULT_DROP_CHUNK")) {
    f.drop_chunk = std::strtoull(d, nullptr, 10);
    spdlog::warn("fault injection: the data connection drops as chunk {} arrives", *f.drop_chunk);
  }
  if (const char* d = std::getenv("ISOMETRY_FAULT_DROP_AFTER_CHUNK")) {
    f.drop_after_chunk = std::strtoull(d, nullptr, 10);
    spdlog::warn("fault injection: the data connection drops before chunk {}'s ACK",
                 *f.drop_after_chunk);
  }
  if (const char* d = std::getenv("ISOMETRY_FAULT_DROP_MID_CHUNK")) {
    f.drop_mid_chunk = std::strtoull(d, nullptr, 10);
    spdlog::warn("fault injection: the data connection drops half-way through chunk {}",
                 *f.drop_mid_chunk);
  }
  if (const char* t = std::getenv("ISOMETRY_FAULT_DROP_STALL_MS")) {
    f.drop_stall_ms = static_cast<uint32_t>(std::strtoul(t, nullptr, 10));
    spdlog::warn("fault injection: a drop stalls its thread for {} ms", f.drop_stall_ms);
  }
  if (const char* v = std::getenv("ISOMETRY_FAULT_PEER_PROTOCOL")) {
    f.peer_protocol = static_cast<uint32_t>(std::strtoul(v, nullptr, 10));
    spdlog::warn("fault injection: hellos claim peer protocol version {}", *f.peer_protocol);
  }
  if (const char* a = std::getenv("ISOMETRY_FAULT_DATA_ADDRESS")) {
    f.data_address = a;
    spdlog::warn("fault injection: welcomes send data connections to {}", f.data_address);
  }
  if (const char* t = std::getenv("ISOMETRY_FAULT_SETUP_DELAY_MS")) {
    f.setup_delay_ms = static_cast<uint32_t>(std::strtoul(t, nullptr, 10));
    spdlog::warn("fault injection: halves are set up {} ms after their copy is planned",
                 f.setup_delay_ms);
  }
  return f;
}

}  // namespace isometry
