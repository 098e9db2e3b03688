#include "net/rdma/rdma_link.h"

#include <arpa/inet.h>
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <random>

#include "core/strings.h"
#include "net/rdma/credits.h"
#include "net/rdma/qp.h"
#include "net/rdma/verbs.h"

namespace isometry::rdma {
namespace {

struct FreeMemory {
  void operator()(void* p) const { std::free(p); }
};

uint32_t FreshPsn() {
  static thread_local std::mt19937 rng(std::random_device{}());
  return rng() & 0xFFFFFF;
}

}  // namespace

// Destroyed in reverse order: the MR before the QPs, the QPs before the
// CQ, all before the device's PD and context.
struct RdmaLink::Resources {
  LinkOptions options;
  OpenDevice device;
  PortAddress port;
  CompletionQueue cq;
  std::vector<QpPtr> qps;
  std::vector<uint32_t> psns;  // of the next Connect, one per QP
  std::unique_ptr<void, FreeMemory> ring;
  uint64_t ring_bytes = 0;
  Registrar registrar;
  Registration mr;
  bool registered = false;

  ~Resources() {
    if (registered) registrar.dereg(mr);
  }
};

RdmaLink::RdmaLink(std::unique_ptr<Resources> r) : r_(std::move(r)) {}
RdmaLink::~RdmaLink() = default;

Result<std::unique_ptr<RdmaLink>> RdmaLink::Create(const LinkOptions& options) {
  ISO_RETURN_IF_ERROR((RingShape{options.slots, options.slot_bytes}.Validate()));
  auto r = std::make_unique<Resources>();
  r->options = options;
  ISO_ASSIGN_OR_RETURN(r->device, Open(options.device));
  ISO_ASSIGN_OR_RETURN(r->port, ResolvePort(r->device.context.get(), options.gid_index));
  // Every QP's sends and receives complete on the one CQ the link's
  // thread polls, with room for all that can be outstanding: each QP's
  // sends (send_depth) and its stocked receives (send_depth + slots).
  const int entries = static_cast<int>(options.qps * (options.send_depth * 2 + options.slots));
  ISO_ASSIGN_OR_RETURN(r->cq, CreateCq(r->device.context.get(), entries, false));
  for (uint32_t i = 0; i < options.qps; ++i) {
    ISO_ASSIGN_OR_RETURN(
        QpPtr qp, CreateRcQp(r->device.pd.get(), r->cq.cq.get(), r->cq.cq.get(), options.send_depth,
                             options.send_depth + options.slots));
    r->qps.push_back(std::move(qp));
    r->psns.push_back(FreshPsn());
  }
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  r->ring_bytes = (options.slots * options.slot_bytes + page - 1) / page * page;
  r->ring.reset(std::aligned_alloc(page, r->ring_bytes));
  if (!r->ring) {
    return absl::ResourceExhaustedError(
        StrCat("RDMA ring of ", r->ring_bytes, " bytes: out of memory"));
  }
  r->registrar = VerbsRegistrar(r->device.pd.get());
  ISO_ASSIGN_OR_RETURN(r->mr,
                       r->registrar.reg(reinterpret_cast<uint64_t>(r->ring.get()), r->ring_bytes));
  r->registered = true;
  return std::unique_ptr<RdmaLink>(new RdmaLink(std::move(r)));
}

LinkParams RdmaLink::Local() const {
  LinkParams p;
  for (size_t i = 0; i < r_->qps.size(); ++i) {
    p.qps.push_back(AddressOf(r_->qps[i].get(), r_->port, r_->psns[i]));
  }
  p.ring.addr = r_->mr.addr;
  p.ring.rkey = r_->mr.rkey;
  p.ring.slot_bytes = r_->options.slot_bytes;
  p.ring.slots = r_->options.slots;
  p.ring.region_addr = r_->mr.addr;
  p.ring.region_length = r_->mr.length;
  p.generation = generation_;
  return p;
}

Status RdmaLink::Connect(const LinkParams& remote) {
  ISO_RETURN_IF_ERROR(ValidateLinkParams(remote, r_->options.qps));
  // One ring shape for both directions (RdmaStream): the peer's must be ours.
  if (remote.ring.slots != r_->options.slots || remote.ring.slot_bytes != r_->options.slot_bytes) {
    return InvalidArgument("the peer's RDMA ring is ", remote.ring.slots, " x ",
                           remote.ring.slot_bytes >> 10, " KiB, this node's ", r_->options.slots,
                           " x ", r_->options.slot_bytes >> 10,
                           " KiB: set rdma.ring_slots and rdma.slot_kib alike on both nodes");
  }
  connected_ = false;
  // From any state (ERROR after a failed completion) to RESET; then the
  // completions the error flushed are dropped, so the next fabric does not
  // take them for its own.
  for (QpPtr& qp : r_->qps) ISO_RETURN_IF_ERROR(ResetQp(qp.get()));
  ibv_wc stale[16];
  while (ibv_poll_cq(r_->cq.cq.get(), 16, stale) > 0) {
  }
  for (size_t i = 0; i < r_->qps.size(); ++i) {
    ibv_qp* qp = r_->qps[i].get();
    ISO_RETURN_IF_ERROR(ConnectRc(qp, r_->port, r_->psns[i], remote.qps[i]));
    r_->psns[i] = FreshPsn();  // for the next Connect
  }
  remote_ = remote;
  connected_ = true;
  ++generation_;
  return OkStatus();
}

std::string RdmaLink::Describe() const {
  return StrCat(r_->qps.size(), " QPs on ", r_->options.device, " port ", int{r_->port.port}, " (",
                r_->port.roce ? "RoCE" : "InfiniBand", ", mtu ", MtuBytes(r_->port.active_mtu),
                "), ring ", r_->options.slots, " x ", r_->options.slot_bytes >> 10, " KiB");
}

// ---- the verbs fabric (MakeFabric) ----

namespace {

constexpr uint64_t kRecvTag = uint64_t{1} << 63;  // receive WRs' ids

class VerbsFabric final : public Fabric {
 public:
  VerbsFabric(RdmaLink::Resources* r, const LinkParams& remote)
      : r_(r), remote_(remote), cache_(VerbsRegistrar(r->device.pd.get()), RegCache::Limits{}) {}

  Status Stock() {
    for (size_t q = 0; q < r_->qps.size(); ++q) {
      for (uint32_t i = 0; i < r_->options.send_depth + r_->options.slots; ++i) {
        ISO_RETURN_IF_ERROR(PostRecv(q));
      }
    }
    return OkStatus();
  }

  Status PostWrite(uint32_t qp, uint64_t wr_id, const std::byte* src, uint64_t bytes,
                   uint64_t offset, uint32_t imm) override {
    ISO_ASSIGN_OR_RETURN(RegRef mr, cache_.Acquire(reinterpret_cast<uint64_t>(src), bytes));
    ibv_sge sge{reinterpret_cast<uint64_t>(src), static_cast<uint32_t>(bytes), mr.lkey()};
    ibv_send_wr wr{};
    wr.wr_id = wr_id;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.imm_data = htonl(imm);
    wr.wr.rdma.remote_addr = remote_.ring.addr + offset;
    wr.wr.rdma.rkey = remote_.ring.rkey;
    ISO_RETURN_IF_ERROR(Post(qp, wr, "RDMA WRITE"));
    held_[wr_id] = std::move(mr);  // until its completion
    return OkStatus();
  }

  Status PostCredit(uint32_t qp, uint64_t wr_id, uint32_t imm) override {
    ibv_send_wr wr{};
    wr.wr_id = wr_id | (uint64_t{1} << 62);  // apart from the writes' slot numbers
    wr.opcode = IBV_WR_SEND_WITH_IMM;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.imm_data = htonl(imm);
    return Post(qp, wr, "credit SEND");
  }

  void Poll(std::vector<FabricCompletion>& out) override {
    ibv_wc wc[32];
    const int n = ibv_poll_cq(r_->cq.cq.get(), 32, wc);
    for (int i = 0; i < n; ++i) {
      const ibv_wc& w = wc[i];
      FabricCompletion c;
      c.wr_id = w.wr_id;
      c.ok = w.status == IBV_WC_SUCCESS;
      if (!c.ok) c.error = DescribeCompletion(w);
      if ((w.wr_id & kRecvTag) != 0) {
        c.kind = w.opcode == IBV_WC_RECV_RDMA_WITH_IMM ? FabricCompletion::Kind::kArrival
                                                       : FabricCompletion::Kind::kCreditIn;
        c.imm = ntohl(w.imm_data);
        c.bytes = w.byte_len;
        if (c.ok) {
          if (Status s = PostRecv(w.wr_id & 0xFFFF); !s.ok()) {
            c.ok = false;
            c.error = std::string(s.message());
          }
        }
      } else if ((w.wr_id & (uint64_t{1} << 62)) != 0) {
        c.kind = FabricCompletion::Kind::kCredit;
      } else {
        c.kind = FabricCompletion::Kind::kWrite;
        held_.erase(w.wr_id);
      }
      out.push_back(std::move(c));
    }
    if (n < 0) {
      FabricCompletion c;
      c.ok = false;
      c.error = "ibv_poll_cq failed";
      out.push_back(std::move(c));
    }
  }

  const std::byte* Ring() const override { return static_cast<const std::byte*>(r_->ring.get()); }

 private:
  Status Post(uint32_t qp, ibv_send_wr& wr, const char* what) {
    ibv_send_wr* bad = nullptr;
    if (int err = ibv_post_send(r_->qps[qp % r_->qps.size()].get(), &wr, &bad); err != 0) {
      return absl::UnavailableError(StrCat(what, " on RDMA QP ", qp, ": ", ErrnoString(err)));
    }
    return OkStatus();
  }
  Status PostRecv(size_t qp) {
    ibv_recv_wr wr{};
    wr.wr_id = kRecvTag | qp;  // write-with-immediate and credits carry no payload
    ibv_recv_wr* bad = nullptr;
    if (int err = ibv_post_recv(r_->qps[qp].get(), &wr, &bad); err != 0) {
      return absl::UnavailableError(
          StrCat("ibv_post_recv on RDMA QP ", qp, ": ", ErrnoString(err)));
    }
    return OkStatus();
  }

  RdmaLink::Resources* const r_;
  const LinkParams remote_;
  RegCache cache_;
  std::map<uint64_t, RegRef> held_;  // by wr_id: sources of writes in flight
};

}  // namespace

Result<std::unique_ptr<Fabric>> RdmaLink::MakeFabric() {
  if (!connected_) return FailedPrecondition("the RDMA link is not connected");
  auto f = std::make_unique<VerbsFabric>(r_.get(), remote_);
  ISO_RETURN_IF_ERROR(f->Stock());
  return std::unique_ptr<Fabric>(std::move(f));
}

}  // namespace isometry::rdma
