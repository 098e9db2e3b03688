#include "channels/rdma/rdma_link.h"

#include <unistd.h>

#include <cstdlib>
#include <random>

#include "channels/rdma/credits.h"
#include "channels/rdma/qp.h"
#include "channels/rdma/verbs.h"
#include "core/strings.h"

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
  // thread polls: sends, credits back and chunks in for each QP.
  const int entries = static_cast<int>(options.qps * options.send_depth * 2 + options.slots);
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
  connected_ = false;
  for (size_t i = 0; i < r_->qps.size(); ++i) {
    ibv_qp* qp = r_->qps[i].get();
    ISO_RETURN_IF_ERROR(ResetQp(qp));  // from any state: ERROR after a failed completion
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

}  // namespace isometry::rdma
