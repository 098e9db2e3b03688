// The RDMA probe on this machine, and ChooseRdma over probes made by hand
// (a usable device, a port that is down, none at all) with each [rdma]
// setting. The rdma_device and rdma_register cases need a device (Soft-RoCE
// will do) and exit 77 saying why where there is none.
#include "net/rdma/rdma_probe.h"

#include <catch2/catch.hpp>
#include <filesystem>
#include <vector>

#include "config/config_origin.h"
#include "net/rdma/verbs.h"
#include "unit/skip.h"

namespace ISOMETRY_TEST_FILE {

using namespace isometry;
using namespace isometry::rdma;

namespace {

DeviceInfo Device(std::string name, bool active) {
  DeviceInfo d;
  d.name = std::move(name);
  d.numa_node = 0;
  d.max_mr_size = ~0ull;
  PortInfo p;
  p.number = 1;
  p.active = active;
  p.state = active ? "PORT_ACTIVE" : "PORT_DOWN";
  p.link_layer = "Ethernet";
  p.active_mtu = 1024;
  p.gids.push_back({1, "0000:0000:0000:0000:0000:ffff:0a00:0001", "RoCE v2"});
  d.ports.push_back(p);
  return d;
}

RdmaProbe Absent() {
  RdmaProbe p;
  p.error = "no RDMA devices: ibv_get_device_list returned 0 (is rdma_rxe or a NIC driver loaded?)";
  return p;
}

RdmaConfig Enable(RdmaEnable e, std::vector<std::string> devices = {}) {
  RdmaConfig c;
  c.enable = e;
  c.devices = std::move(devices);
  return c;
}

}  // namespace

TEST_CASE("the probe on this machine names its devices or says exactly why there are none") {
  const RdmaProbe probe = ProbeRdma();
  const std::string summary = probe.Summary();
  INFO(summary);
  CHECK_THAT(summary, Catch::Contains("GPU memory registration: nvidia-peermem"));
  std::error_code ec;
  if (!std::filesystem::exists("/sys/class/infiniband", ec)) {
    // No kernel RDMA support at all (this project's build machines).
    CHECK(probe.devices.empty());
    CHECK_FALSE(probe.usable());
    CHECK_THAT(probe.error, Catch::StartsWith("no RDMA devices: ibv_get_device_list"));
    CHECK_THAT(summary, Catch::StartsWith("no RDMA devices"));
  }
  if (probe.devices.empty()) {
    CHECK_FALSE(probe.error.empty());
  }
  for (const DeviceInfo& d : probe.devices) CHECK_THAT(summary, Catch::Contains(d.name));
  // Asked twice, the cached probe is the same object.
  CHECK(&CachedRdmaProbe() == &CachedRdmaProbe());
}

TEST_CASE("a device counts as usable only when opened with an ACTIVE port") {
  CHECK(Device("rxe0", true).usable());
  CHECK_FALSE(Device("rxe0", false).usable());
  DeviceInfo broken = Device("mlx5_0", true);
  broken.error = "ibv_open_device failed: Permission denied";
  CHECK_FALSE(broken.usable());
  RdmaProbe p;
  p.devices = {Device("rxe0", true)};
  CHECK_THAT(p.Summary(),
             Catch::StartsWith("1 device(s): rxe0 (NUMA 0, max MR 16 EiB, 0 QPs, port 1 "
                               "PORT_ACTIVE Ethernet/RoCE mtu 1024, 1 GID(s) [1 RoCE v2 "));
}

TEST_CASE("enable = auto without a device keeps TCP and says the probe's reason") {
  auto c = ChooseRdma(Absent(), Enable(RdmaEnable::kAuto));
  REQUIRE(c.ok());
  CHECK_FALSE(c->use);
  CHECK(c->devices.empty());
  CHECK_THAT(c->why, Catch::StartsWith("no RDMA devices: ibv_get_device_list returned 0"));
}

TEST_CASE("enable = on without a device is an error naming rdma.enable") {
  auto c = ChooseRdma(Absent(), Enable(RdmaEnable::kOn));
  REQUIRE_FALSE(c.ok());
  CHECK(ConfigKeyOf(c.status()) == "rdma.enable");
  CHECK_THAT(std::string(c.status().message()),
             Catch::Contains("\"on\" but RDMA cannot be used: no RDMA devices"));
  RdmaProbe down;
  down.devices = {Device("rxe0", false)};
  down.error = "no usable RDMA device: none could be opened with an ACTIVE port";
  CHECK_FALSE(ChooseRdma(down, Enable(RdmaEnable::kOn)).ok());
}

TEST_CASE("enable = off never uses RDMA, even with a device") {
  RdmaProbe p;
  p.devices = {Device("rxe0", true)};
  auto c = ChooseRdma(p, Enable(RdmaEnable::kOff));
  REQUIRE(c.ok());
  CHECK_FALSE(c->use);
  CHECK(c->why == "[rdma] enable = off");
}

TEST_CASE("usable devices are chosen, filtered by rdma.devices") {
  RdmaProbe p;
  p.devices = {Device("mlx5_0", true), Device("mlx5_1", false), Device("rxe0", true)};
  auto all = ChooseRdma(p, Enable(RdmaEnable::kAuto));
  REQUIRE(all.ok());
  CHECK(all->use);
  CHECK(all->devices == std::vector<std::string>{"mlx5_0", "rxe0"});
  CHECK(all->why == "devices mlx5_0, rxe0");
  auto one = ChooseRdma(p, Enable(RdmaEnable::kOn, {"rxe0"}));
  REQUIRE(one.ok());
  CHECK(one->devices == std::vector<std::string>{"rxe0"});
  // Only a listed device that is down: not used (auto), refused (on).
  auto down = ChooseRdma(p, Enable(RdmaEnable::kAuto, {"mlx5_1"}));
  REQUIRE(down.ok());
  CHECK_FALSE(down->use);
  CHECK_THAT(down->why, Catch::Contains("none has an ACTIVE port"));
  CHECK_FALSE(ChooseRdma(p, Enable(RdmaEnable::kOn, {"mlx5_1"})).ok());
  // A listed device this machine lacks.
  auto missing = ChooseRdma(p, Enable(RdmaEnable::kAuto, {"rxe0", "mlx5_9"}));
  REQUIRE(missing.ok());
  CHECK_FALSE(missing->use);
  CHECK(missing->why == "rdma.devices names mlx5_9, which this machine does not have");
  auto refused = ChooseRdma(p, Enable(RdmaEnable::kOn, {"mlx5_9"}));
  REQUIRE_FALSE(refused.ok());
  CHECK_THAT(std::string(refused.status().message()), Catch::Contains("mlx5_9"));
}

TEST_CASE("the network hop with a peer says which transport and why") {
  RdmaChoice none{false, {}, "no RDMA devices: ibv_get_device_list returned 0"};
  RdmaChoice off{false, {}, "[rdma] enable = off"};
  RdmaChoice rxe{true, {"rxe0"}, "devices rxe0"};
  const PeerRdma has{true, true, "devices mlx5_0"};
  const PeerRdma lacks{true, false, "no RDMA devices: ibv_get_device_list returned 0"};
  CHECK(NetworkTransportWhy(none, "b", has) ==
        "TCP: no RDMA device on this node (no RDMA devices: ibv_get_device_list returned 0)");
  CHECK(NetworkTransportWhy(off, "b", has) == "TCP: [rdma] enable = off on this node");
  CHECK(NetworkTransportWhy(rxe, "b", lacks) ==
        "TCP: peer 'b' has no RDMA device (no RDMA devices: ibv_get_device_list returned 0)");
  CHECK(NetworkTransportWhy(rxe, "b", {true, false, "[rdma] enable = off"}) ==
        "TCP: peer 'b' has [rdma] enable = off");
  CHECK(NetworkTransportWhy(rxe, "b", {}) ==
        "TCP: peer 'b' did not say whether it has RDMA (an older isometryd)");
  // Both able: still TCP until the RDMA data path exists, and it says so.
  CHECK_THAT(NetworkTransportWhy(rxe, "b", has),
             Catch::StartsWith("TCP: both nodes have RDMA (this node devices rxe0; peer 'b' "
                               "devices mlx5_0)"));
}

TEST_CASE("a real device shows its ports and GIDs", "[may_skip][rdma_device]") {
  const RdmaProbe probe = ProbeRdma();
  if (!probe.usable()) ISOMETRY_SKIP("no usable RDMA device: " << probe.error);
  bool some_active = false;
  for (const DeviceInfo& d : probe.devices) {
    INFO(d.name);
    if (!d.usable()) continue;
    CHECK(d.max_mr_size > 0);
    CHECK_FALSE(d.ports.empty());
    for (const PortInfo& port : d.ports) {
      if (!port.active) continue;
      some_active = true;
      CHECK(port.active_mtu >= 256);
      CHECK_FALSE(port.gids.empty());  // RoCE needs one; IB has its port GID
    }
  }
  CHECK(some_active);
}

TEST_CASE("pool-sized memory registers through the cache on a real device",
          "[may_skip][rdma_register]") {
  const RdmaProbe probe = ProbeRdma();
  if (!probe.usable()) ISOMETRY_SKIP("no usable RDMA device: " << probe.error);
  auto choice = ChooseRdma(probe, RdmaConfig{});
  REQUIRE(choice.ok());
  REQUIRE(choice->use);
  auto device = Open(choice->devices.front());
  REQUIRE(device.ok());
  std::vector<char> buffer(4 << 20);
  const auto base = reinterpret_cast<uint64_t>(buffer.data());
  RegCache cache(VerbsRegistrar(device->pd.get()), RegCache::Limits{});
  auto whole = cache.Acquire(base, buffer.size());
  REQUIRE(whole.ok());
  CHECK(whole->lkey() != 0);
  auto part = cache.Acquire(base + 4096, 8192);  // a hit in the same registration
  REQUIRE(part.ok());
  CHECK(part->rkey() == whole->rkey());
  CHECK(cache.stats().hits == 1);
  cache.Invalidate(base, buffer.size());
  CHECK(cache.stats().entries == 0);
  CHECK_FALSE(Open("isometry_no_such_device").ok());
}

}  // namespace ISOMETRY_TEST_FILE
