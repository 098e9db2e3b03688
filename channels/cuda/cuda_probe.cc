#include "channels/cuda/cuda_probe.h"

#include <cuda_runtime_api.h>

#include <cctype>
#include <fstream>

#include "core/status.h"

namespace isometry::cuda {
namespace {

int ReadNumaNode(const std::string& bus_id) {
  std::ifstream in(SysfsNumaPath(bus_id));
  int node = -1;
  if (!(in >> node)) return -1;
  return node;
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

GpuInfo ProbeOne(int device) {
  GpuInfo g;
  g.index = device;
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, device) == cudaSuccess) {
    g.name = prop.name;
    g.total_memory = prop.totalGlobalMem;
  }
  char bus[32] = {};
  if (cudaDeviceGetPCIBusId(bus, sizeof(bus), device) == cudaSuccess) {
    g.pci_bus_id = Lower(bus);
    g.numa_node = ReadNumaNode(g.pci_bus_id);
  }
  int pitch = 0;
  if (cudaDeviceGetAttribute(&pitch, cudaDevAttrMaxPitch, device) == cudaSuccess && pitch > 0) {
    g.max_pitch = static_cast<uint64_t>(pitch);
  }
  return g;
}

}  // namespace

std::string SysfsNumaPath(std::string_view cuda_bus_id) {
  std::string id = Lower(cuda_bus_id);
  // sysfs names the PCI domain with 4 hex digits, CUDA sometimes with 8.
  const size_t colon = id.find(':');
  if (colon == 8 && id.compare(0, 4, "0000") == 0) id.erase(0, 4);
  return StrCat("/sys/bus/pci/devices/", id, "/numa_node");
}

GpuProbe ProbeGpus() {
  GpuProbe probe;
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0) {
    probe.error = StrCat("no GPU: ", err != cudaSuccess ? cudaGetErrorString(err)
                                                        : "the CUDA runtime sees no device");
    (void)cudaGetLastError();  // the runtime keeps the error otherwise
    return probe;
  }
  const auto n = static_cast<size_t>(count);
  probe.peer_access.assign(n, std::vector<bool>(n, false));
  for (int a = 0; a < count; ++a) {
    probe.gpus.push_back(ProbeOne(a));
    for (int b = 0; b < count; ++b) {
      int can = 0;
      if (a != b && cudaDeviceCanAccessPeer(&can, a, b) == cudaSuccess) {
        probe.peer_access[static_cast<size_t>(a)][static_cast<size_t>(b)] = can != 0;
      }
    }
  }
  return probe;
}

const GpuProbe& CachedGpuProbe() {
  static const GpuProbe probe = ProbeGpus();
  return probe;
}

std::string GpuProbe::Summary() const {
  if (gpus.empty()) return error;
  std::string out = StrCat(gpus.size(), gpus.size() == 1 ? " GPU: " : " GPUs: ");
  for (const GpuInfo& g : gpus) {
    out += StrCat(g.index ? ", " : "", "gpu", g.index, " ", g.name, " (",
                  g.total_memory / (1ull << 20), " MiB, PCI ", g.pci_bus_id, ", NUMA ",
                  g.numa_node < 0 ? std::string("unknown") : StrCat(g.numa_node), ")");
  }
  std::string p2p;
  for (size_t a = 0; a < gpus.size(); ++a) {
    for (size_t b = a + 1; b < gpus.size(); ++b) {
      if (peer_access[a][b] && peer_access[b][a]) {
        p2p += StrCat(p2p.empty() ? "" : ", ", "gpu", a, "<->gpu", b);
      }
    }
  }
  if (gpus.size() > 1) out += StrCat("; P2P: ", p2p.empty() ? std::string("none") : p2p);
  return out;
}

}  // namespace isometry::cuda
