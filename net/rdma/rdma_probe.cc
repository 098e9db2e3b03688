#include "net/rdma/rdma_probe.h"

#include <dlfcn.h>
#include <infiniband/verbs.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "config/config_origin.h"
#include "core/strings.h"
#include "net/rdma/link_params.h"

namespace isometry::rdma {
namespace {

constexpr size_t kGidsKept = 16;

int ReadNumaNode(const std::string& device) {
  std::ifstream in("/sys/class/infiniband/" + device + "/device/numa_node");
  int node = -1;
  if (!(in >> node)) return -1;
  return node;
}

bool SysfsExists(const char* path) {
  std::error_code ec;
  return std::filesystem::exists(path, ec);
}

std::string GidText(const ibv_gid& gid) {
  std::string out;
  for (int i = 0; i < 16; i += 2) {
    char part[8];
    std::snprintf(part, sizeof part, "%s%02x%02x", i ? ":" : "", gid.raw[i], gid.raw[i + 1]);
    out += part;
  }
  return out;
}

const char* GidTypeName(uint32_t type) {
  switch (type) {
    case IBV_GID_TYPE_IB:
      return "IB";
    case IBV_GID_TYPE_ROCE_V1:
      return "RoCE v1";
    case IBV_GID_TYPE_ROCE_V2:
      return "RoCE v2";
    default:
      return "unknown";
  }
}

PortInfo QueryPort(ibv_context* ctx, uint8_t number) {
  PortInfo p;
  p.number = number;
  ibv_port_attr attr{};
  if (int err = ibv_query_port(ctx, number, &attr); err != 0) {
    p.state = StrCat("ibv_query_port failed: ", ErrnoString(err));
    return p;
  }
  p.state = ibv_port_state_str(attr.state);
  p.active = attr.state == IBV_PORT_ACTIVE;
  p.link_layer = attr.link_layer == IBV_LINK_LAYER_ETHERNET ? "Ethernet" : "InfiniBand";
  p.lid = attr.lid;
  p.active_mtu = MtuBytes(attr.active_mtu);
  for (int i = 0; i < attr.gid_tbl_len && p.gids.size() < kGidsKept; ++i) {
    ibv_gid_entry entry{};
    // Unused entries fail (ENODATA) or read as zeros.
    if (ibv_query_gid_ex(ctx, number, static_cast<uint32_t>(i), &entry, 0) != 0) continue;
    const ibv_gid& g = *reinterpret_cast<const ibv_gid*>(&entry.gid);
    if (std::all_of(g.raw, g.raw + 16, [](uint8_t b) { return b == 0; })) continue;
    p.gids.push_back({entry.gid_index, GidText(g), GidTypeName(entry.gid_type)});
  }
  return p;
}

DeviceInfo QueryDevice(ibv_device* device) {
  DeviceInfo d;
  d.name = ibv_get_device_name(device);
  d.numa_node = ReadNumaNode(d.name);
  ibv_context* ctx = ibv_open_device(device);
  if (!ctx) {
    const int err = errno;
    d.error = StrCat("ibv_open_device failed: ", ErrnoString(err),
                     err == EACCES ? " (permission on /dev/infiniband/uverbs*?)" : "");
    return d;
  }
  ibv_device_attr attr{};
  if (int err = ibv_query_device(ctx, &attr); err != 0) {
    d.error = StrCat("ibv_query_device failed: ", ErrnoString(err));
  } else {
    d.max_mr_size = attr.max_mr_size;
    d.max_qp = static_cast<uint32_t>(attr.max_qp);
    for (uint8_t port = 1; port <= attr.phys_port_cnt; ++port) {
      d.ports.push_back(QueryPort(ctx, port));
    }
  }
  ibv_close_device(ctx);
  return d;
}

// 18446744073709551615 as "16 EiB" (max_mr_size is often all ones).
std::string Bytes(uint64_t v) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  int u = 0;
  double x = static_cast<double>(v);
  while (x >= 1024 && u < 6) {
    x /= 1024;
    ++u;
  }
  char out[32];
  std::snprintf(out, sizeof out, "%.0f %s", x, units[u]);
  return out;
}

std::string DescribeDevice(const DeviceInfo& d) {
  std::string out =
      StrCat(d.name, " (NUMA ", d.numa_node < 0 ? std::string("?") : StrCat(d.numa_node));
  if (!d.error.empty()) return StrCat(out, ": ", d.error, ")");
  StrAppend(&out, ", max MR ", Bytes(d.max_mr_size), ", ", d.max_qp, " QPs");
  for (const PortInfo& p : d.ports) {
    StrAppend(&out, ", port ", p.number, " ", p.state);
    if (p.link_layer.empty()) continue;
    StrAppend(&out, " ", p.link_layer == "Ethernet" ? "Ethernet/RoCE" : "InfiniBand");
    if (p.link_layer != "Ethernet") StrAppend(&out, " lid ", p.lid);
    StrAppend(&out, " mtu ", p.active_mtu, ", ", p.gids.size(), " GID(s)");
    if (!p.gids.empty()) {
      StrAppend(&out, " [");
      for (size_t i = 0; i < p.gids.size() && i < 4; ++i) {
        StrAppend(&out, i ? "; " : "", p.gids[i].index, " ", p.gids[i].type, " ", p.gids[i].gid);
      }
      StrAppend(&out, p.gids.size() > 4 ? "; ...]" : "]");
    }
  }
  return out + ")";
}

}  // namespace

bool DeviceInfo::usable() const {
  return error.empty() &&
         std::any_of(ports.begin(), ports.end(), [](const PortInfo& p) { return p.active; });
}

std::string RdmaProbe::Summary() const {
  std::string out;
  if (!devices.empty()) {
    out = StrCat(devices.size(), " device(s): ");
    for (size_t i = 0; i < devices.size(); ++i) {
      StrAppend(&out, i ? ", " : "", DescribeDevice(devices[i]));
    }
    StrAppend(&out, "; ");
  }
  if (!error.empty()) StrAppend(&out, error, "; ");
  StrAppend(&out, "GPU memory registration: nvidia-peermem ",
            peermem_module ? "loaded" : "not loaded", ", dma-buf (ibv_reg_dmabuf_mr) ",
            dmabuf_api ? "in libibverbs" : "absent from libibverbs");
  return out;
}

RdmaProbe ProbeRdma() {
  RdmaProbe probe;
  probe.peermem_module =
      SysfsExists("/sys/module/nvidia_peermem") || SysfsExists("/sys/module/nv_peer_mem");
  // In the libibverbs this process loaded (rdma-core >= 34); whether the
  // provider and the GPU driver take a dma-buf shows only when one is tried.
  probe.dmabuf_api = dlsym(RTLD_DEFAULT, "ibv_reg_dmabuf_mr") != nullptr;
  int n = 0;
  errno = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (!list) {
    const int err = errno;
    probe.error = StrCat("no RDMA devices: ibv_get_device_list failed: ", ErrnoString(err),
                         err == ENOSYS ? " (the kernel has no RDMA support: no "
                                         "/sys/class/infiniband)"
                                       : "");
    return probe;
  }
  for (int i = 0; i < n; ++i) probe.devices.push_back(QueryDevice(list[i]));
  ibv_free_device_list(list);
  if (n == 0) {
    probe.error = StrCat(
        "no RDMA devices: ibv_get_device_list returned 0 (is rdma_rxe or a NIC driver loaded?",
        SysfsExists("/sys/class/infiniband") ? "" : " /sys/class/infiniband does not exist", ")");
  } else if (std::none_of(probe.devices.begin(), probe.devices.end(),
                          [](const DeviceInfo& d) { return d.usable(); })) {
    probe.error = "no usable RDMA device: none could be opened with an ACTIVE port";
  }
  return probe;
}

const RdmaProbe& CachedRdmaProbe() {
  static const RdmaProbe probe = ProbeRdma();
  return probe;
}

Result<RdmaChoice> ChooseRdma(const RdmaProbe& probe, const RdmaConfig& config) {
  RdmaChoice choice;
  if (config.enable == RdmaEnable::kOff) {
    choice.why = "[rdma] enable = off";
    return choice;
  }
  std::string missing;
  for (const std::string& want : config.devices) {
    const bool found = std::any_of(probe.devices.begin(), probe.devices.end(),
                                   [&](const DeviceInfo& d) { return d.name == want; });
    if (!found) StrAppend(&missing, missing.empty() ? "" : ", ", want);
  }
  for (const DeviceInfo& d : probe.devices) {
    const bool listed =
        config.devices.empty() ||
        std::find(config.devices.begin(), config.devices.end(), d.name) != config.devices.end();
    if (listed && d.usable()) choice.devices.push_back(d.name);
  }
  if (!missing.empty()) {
    choice.why = StrCat("rdma.devices names ", missing, ", which this machine does not have");
  } else if (choice.devices.empty()) {
    choice.why = !probe.error.empty()
                     ? probe.error
                     : "no usable RDMA device among rdma.devices (none has an ACTIVE port)";
  }
  if (!choice.why.empty()) {
    if (config.enable == RdmaEnable::kOn) {
      return ConfigKeyError("rdma.enable", "is \"on\" but RDMA cannot be used: ", choice.why,
                            " (set enable = \"auto\" to fall back to TCP)");
    }
    choice.devices.clear();
    return choice;
  }
  choice.use = true;
  std::string names;
  for (const std::string& d : choice.devices) StrAppend(&names, names.empty() ? "" : ", ", d);
  choice.why = StrCat("devices ", names);
  return choice;
}

std::string NetworkTransportWhy(const RdmaChoice& self, std::string_view peer,
                                const PeerRdma& theirs) {
  if (!self.use) {
    if (self.why == "[rdma] enable = off") return "TCP: [rdma] enable = off on this node";
    return StrCat("TCP: no RDMA device on this node (", self.why, ")");
  }
  if (!theirs.reported) {
    return StrCat("TCP: peer '", peer, "' did not say whether it has RDMA (an older isometryd)");
  }
  if (!theirs.usable && theirs.detail == "[rdma] enable = off") {
    return StrCat("TCP: peer '", peer, "' has [rdma] enable = off");
  }
  if (!theirs.usable) {
    return StrCat("TCP: peer '", peer, "' has no RDMA device (", theirs.detail, ")");
  }
  return StrCat("TCP: both nodes have RDMA (this node ", self.why, "; peer '", peer, "' ",
                theirs.detail, "), but this isometryd has no RDMA data path yet");
}

}  // namespace isometry::rdma
