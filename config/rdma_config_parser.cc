#include "config/rdma_config_parser.h"

#include <set>

#include "config/config_origin.h"
#include "core/strings.h"

namespace isometry {

namespace {
// rdma.ring_slots: the credit protocol's slot field (net/rdma/credits.h).
constexpr uint64_t kMaxRingSlots = 1024;
constexpr uint64_t kMaxSlotKib = uint64_t{1} << 20;   // 1 GiB
constexpr uint64_t kMaxRingKib = uint64_t{16} << 20;  // 16 GiB pinned per link
}  // namespace

std::string_view RdmaEnableName(RdmaEnable e) {
  switch (e) {
    case RdmaEnable::kAuto:
      return "auto";
    case RdmaEnable::kOn:
      return "on";
    case RdmaEnable::kOff:
      return "off";
  }
  return "?";
}

Status RdmaConfig::Validate() const {
  if (qps_per_peer < 1 || qps_per_peer > 64) {
    return ConfigKeyError("rdma.qps_per_peer", "is ", qps_per_peer, "; it must be from 1 to 64");
  }
  if (gid_index < -1 || gid_index > 255) {
    return ConfigKeyError("rdma.gid_index", "is ", gid_index, "; it must be -1 (auto) or 0 to 255");
  }
  if (ring_slots < 1 || ring_slots > kMaxRingSlots) {
    return ConfigKeyError("rdma.ring_slots", "is ", ring_slots, "; it must be from 1 to ",
                          kMaxRingSlots);
  }
  if (slot_kib < 4 || slot_kib > kMaxSlotKib) {
    return ConfigKeyError("rdma.slot_kib", "is ", slot_kib, "; it must be from 4 to ", kMaxSlotKib,
                          " (4 KiB to 1 GiB)");
  }
  if (ring_slots * slot_kib > kMaxRingKib) {
    return ConfigKeyError("rdma.slot_kib", "is ", slot_kib, " with rdma.ring_slots = ", ring_slots,
                          ": a ring of ", ring_slots * slot_kib >> 10,
                          " MiB per peer; at most 16384 MiB are pinned per link");
  }
  std::set<std::string> seen;
  for (const std::string& d : devices) {
    if (d.empty() || d.find('/') != std::string::npos) {
      return ConfigKeyError("rdma.devices", "'", d, "' is not a device name (like \"mlx5_0\")");
    }
    if (!seen.insert(d).second) return ConfigKeyError("rdma.devices", "'", d, "' is listed twice");
  }
  return OkStatus();
}

Status ReadRdma(const toml::node& node, std::string_view source, RdmaConfig& out) {
  auto error = [source](const toml::node& n, std::string_view key, std::string_view problem) {
    return InvalidArgument(source, ":", n.source().begin.line, ": key '", key, "': ", problem);
  };
  const toml::table* t = node.as_table();
  if (!t) return error(node, "rdma", "must be a table ([rdma])");
  for (const auto& [k, v] : *t) {
    const std::string key = StrCat("rdma.", k.str());
    if (k.str() == "enable") {
      const std::optional<std::string> s = v.value<std::string>();
      if (!s || !v.is_string() || (*s != "auto" && *s != "on" && *s != "off")) {
        return error(v, key, "must be \"auto\", \"on\" or \"off\"");
      }
      out.enable = *s == "on"    ? RdmaEnable::kOn
                   : *s == "off" ? RdmaEnable::kOff
                                 : RdmaEnable::kAuto;
    } else if (k.str() == "devices") {
      const toml::array* a = v.as_array();
      if (!a) return error(v, key, "must be a list of device names, like [\"mlx5_0\"]");
      out.devices.clear();
      for (const toml::node& e : *a) {
        const std::optional<std::string> s = e.value<std::string>();
        if (!s || !e.is_string()) return error(e, key, "each device is a string, like \"mlx5_0\"");
        out.devices.push_back(*s);
      }
    } else if (k.str() == "qps_per_peer" || k.str() == "gid_index") {
      const bool qps = k.str() == "qps_per_peer";
      const int64_t lo = qps ? 1 : -1, hi = qps ? 64 : 255;
      const std::optional<int64_t> n = v.is_integer() ? v.value<int64_t>() : std::nullopt;
      if (!n || *n < lo || *n > hi) {
        return error(v, key, StrCat("must be an integer from ", lo, " to ", hi));
      }
      (qps ? out.qps_per_peer : out.gid_index) = static_cast<int>(*n);
    } else if (k.str() == "ring_slots" || k.str() == "slot_kib") {
      const bool slots = k.str() == "ring_slots";
      const int64_t lo = slots ? 1 : 4;
      const auto hi = static_cast<int64_t>(slots ? kMaxRingSlots : kMaxSlotKib);
      const std::optional<int64_t> n = v.is_integer() ? v.value<int64_t>() : std::nullopt;
      if (!n || *n < lo || *n > hi) {
        return error(v, key, StrCat("must be an integer from ", lo, " to ", hi));
      }
      if (slots) {
        out.ring_slots = static_cast<uint32_t>(*n);
      } else {
        out.slot_kib = static_cast<uint64_t>(*n);
      }
    } else {
      return error(v, key,
                   "unknown key (known here: enable, devices, qps_per_peer, gid_index, "
                   "ring_slots, slot_kib)");
    }
  }
  return OkStatus();
}

}  // namespace isometry
