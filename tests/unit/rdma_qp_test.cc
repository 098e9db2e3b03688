// Two RC queue pairs on one device connected to each other (the loopback
// the data path's connection and recovery rest on): an RDMA WRITE with
// immediate lands in the receiver's slot and says which; a write with a
// wrong rkey fails with the device's status text; both QPs are reset,
// reconnected and carry the next write. Needs a device (Soft-RoCE will
// do); exits 77 saying why where there is none.
#include <arpa/inet.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>
#include <random>
#include <vector>

#include "net/rdma/qp.h"
#include "net/rdma/rdma_probe.h"
#include "net/rdma/reg_cache.h"
#include "unit/skip.h"

namespace ISOMETRY_TEST_FILE {

using namespace isometry;
using namespace isometry::rdma;

namespace {

// The next completion on `cq` within 5 s.
ibv_wc Next(ibv_cq* cq) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  ibv_wc wc{};
  while (std::chrono::steady_clock::now() < until) {
    const int n = ibv_poll_cq(cq, 1, &wc);
    REQUIRE(n >= 0);
    if (n == 1) return wc;
  }
  FAIL("no completion within 5 s");
  return wc;
}

// Takes every completion left (flushed requests after an error).
void Drain(ibv_cq* cq) {
  ibv_wc wc{};
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
  while (std::chrono::steady_clock::now() < until) (void)ibv_poll_cq(cq, 1, &wc);
}

void PostRecv(ibv_qp* qp, uint64_t id) {
  ibv_recv_wr wr{};
  wr.wr_id = id;  // write-with-immediate consumes a receive without buffers
  ibv_recv_wr* bad = nullptr;
  REQUIRE(ibv_post_recv(qp, &wr, &bad) == 0);
}

void PostWriteImm(ibv_qp* qp, const RegRef& local, uint64_t from, uint32_t length,
                  uint64_t remote_addr, uint32_t rkey, uint32_t imm, uint64_t id) {
  ibv_sge sge{from, length, local.lkey()};
  ibv_send_wr wr{};
  wr.wr_id = id;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.imm_data = htonl(imm);
  wr.wr.rdma.remote_addr = remote_addr;
  wr.wr.rdma.rkey = rkey;
  ibv_send_wr* bad = nullptr;
  REQUIRE(ibv_post_send(qp, &wr, &bad) == 0);
}

}  // namespace

TEST_CASE("a failed completion is described with the device's status text") {
  ibv_wc wc{};
  wc.status = IBV_WC_REM_ACCESS_ERR;
  wc.vendor_err = 0x88;
  wc.wr_id = 7;
  CHECK(DescribeCompletion(wc) == "remote access error (status 10, vendor error 136) on wr 7");
  wc.status = IBV_WC_RETRY_EXC_ERR;
  CHECK_THAT(DescribeCompletion(wc), Catch::StartsWith("transport retry counter exceeded"));
}

TEST_CASE("write with immediate into a slot, a completion error, reset and reconnect",
          "[may_skip][rdma_loopback]") {
  const RdmaProbe probe = ProbeRdma();
  if (!probe.usable()) ISOMETRY_SKIP("no usable RDMA device: " << probe.error);
  auto choice = ChooseRdma(probe, RdmaConfig{});
  REQUIRE(choice.ok());
  auto device = Open(choice->devices.front());
  REQUIRE(device.ok());
  auto port = ResolvePort(device->context.get(), -1);
  REQUIRE(port.ok());
  auto cq_a = CreateCq(device->context.get(), 64, false);
  auto cq_b = CreateCq(device->context.get(), 64, true);
  REQUIRE((cq_a.ok() && cq_b.ok()));
  auto qp_a = CreateRcQp(device->pd.get(), cq_a->cq.get(), cq_a->cq.get(), 16, 16);
  auto qp_b = CreateRcQp(device->pd.get(), cq_b->cq.get(), cq_b->cq.get(), 16, 16);
  REQUIRE((qp_a.ok() && qp_b.ok()));
  std::mt19937 rng(7);
  auto connect = [&] {
    const uint32_t psn_a = rng() & 0xFFFFFF, psn_b = rng() & 0xFFFFFF;
    REQUIRE(ConnectRc(qp_a->get(), *port, psn_a, AddressOf(qp_b->get(), *port, psn_b)).ok());
    REQUIRE(ConnectRc(qp_b->get(), *port, psn_b, AddressOf(qp_a->get(), *port, psn_a)).ok());
  };
  connect();

  // The sender's buffer and the receiver's ring of 4 slots of 256 KiB.
  constexpr size_t kSlot = 256 << 10;
  constexpr auto kSlotLength = static_cast<uint32_t>(kSlot);
  std::vector<uint8_t> src(kSlot), ring(4 * kSlot, 0);
  for (auto& b : src) b = static_cast<uint8_t>(rng());
  RegCache cache(VerbsRegistrar(device->pd.get()), RegCache::Limits{});
  auto src_mr = cache.Acquire(reinterpret_cast<uint64_t>(src.data()), src.size());
  auto ring_mr = cache.Acquire(reinterpret_cast<uint64_t>(ring.data()), ring.size());
  REQUIRE((src_mr.ok() && ring_mr.ok()));
  const uint64_t slot2 = reinterpret_cast<uint64_t>(ring.data()) + 2 * kSlot;

  PostRecv(qp_b->get(), 100);
  PostWriteImm(qp_a->get(), *src_mr, reinterpret_cast<uint64_t>(src.data()), kSlotLength, slot2,
               ring_mr->rkey(), 2, 1);
  const ibv_wc sent = Next(cq_a->cq.get());
  INFO(DescribeCompletion(sent));
  CHECK(sent.status == IBV_WC_SUCCESS);
  const ibv_wc arrived = Next(cq_b->cq.get());
  CHECK(arrived.status == IBV_WC_SUCCESS);
  CHECK(arrived.opcode == IBV_WC_RECV_RDMA_WITH_IMM);
  CHECK(ntohl(arrived.imm_data) == 2);
  CHECK(arrived.wr_id == 100);
  CHECK(std::memcmp(ring.data() + 2 * kSlot, src.data(), kSlot) == 0);
  CHECK(ring[kSlot] == 0);  // slot 1 untouched

  // A wrong rkey: the sender's completion fails with the device's text.
  PostRecv(qp_b->get(), 101);
  PostWriteImm(qp_a->get(), *src_mr, reinterpret_cast<uint64_t>(src.data()), 4096, slot2,
               ring_mr->rkey() ^ 0x5a5a, 3, 2);
  const ibv_wc failed = Next(cq_a->cq.get());
  CHECK(failed.status != IBV_WC_SUCCESS);
  const std::string text = DescribeCompletion(failed);
  CHECK_THAT(text, Catch::Contains(ibv_wc_status_str(failed.status)));
  CHECK_THAT(text, Catch::Contains("on wr 2"));

  // Recovery: both to RESET, flushed requests drained, connected afresh.
  REQUIRE(ResetQp(qp_a->get()).ok());
  REQUIRE(ResetQp(qp_b->get()).ok());
  Drain(cq_a->cq.get());
  Drain(cq_b->cq.get());
  connect();
  std::fill(ring.begin(), ring.end(), 0);
  PostRecv(qp_b->get(), 102);
  PostWriteImm(qp_a->get(), *src_mr, reinterpret_cast<uint64_t>(src.data()), kSlotLength, slot2,
               ring_mr->rkey(), 2, 3);
  CHECK(Next(cq_a->cq.get()).status == IBV_WC_SUCCESS);
  const ibv_wc again = Next(cq_b->cq.get());
  CHECK(again.status == IBV_WC_SUCCESS);
  CHECK(again.wr_id == 102);
  CHECK(std::memcmp(ring.data() + 2 * kSlot, src.data(), kSlot) == 0);
}

}  // namespace ISOMETRY_TEST_FILE
