// Move-only owners of verbs handles, and memory registration through a
// protection domain: the RegCache's Registrar for a real device.
//
// Every handle has its owner here (docs/development/style.md: no raw handles): an owner
// releases its handle once, when destroyed; release order is the caller's
// (a PD outlives its MRs, QPs and CQs; the context outlives them all).
#pragma once

#include <infiniband/verbs.h>

#include <memory>
#include <string>
#include <string_view>

#include "core/status.h"
#include "net/rdma/reg_cache.h"

namespace isometry::rdma {

struct CloseContext {
  void operator()(ibv_context* c) const { ibv_close_device(c); }
};
struct DeallocPd {
  void operator()(ibv_pd* pd) const { ibv_dealloc_pd(pd); }
};
struct DestroyCq {
  void operator()(ibv_cq* cq) const { ibv_destroy_cq(cq); }
};
struct DestroyQp {
  void operator()(ibv_qp* qp) const { ibv_destroy_qp(qp); }
};
struct DestroyChannel {
  void operator()(ibv_comp_channel* ch) const { ibv_destroy_comp_channel(ch); }
};
using ContextPtr = std::unique_ptr<ibv_context, CloseContext>;
using PdPtr = std::unique_ptr<ibv_pd, DeallocPd>;
using CqPtr = std::unique_ptr<ibv_cq, DestroyCq>;
using QpPtr = std::unique_ptr<ibv_qp, DestroyQp>;
using CompChannelPtr = std::unique_ptr<ibv_comp_channel, DestroyChannel>;

// One device opened with its protection domain. Members are destroyed
// in reverse order: the PD before the context.
struct OpenDevice {
  std::string name;
  ContextPtr context;
  PdPtr pd;
};

// Opens the device of that name (as ibv_get_device_name says it) and
// allocates a PD; an error names the device and the failing call.
Result<OpenDevice> Open(std::string_view name);

// Registers with ibv_reg_mr on `pd` (local write, remote read and write),
// deregisters with ibv_dereg_mr. `pd` must outlive every registration. A
// failure says the range, errno's text and, for ENOMEM/EPERM, the
// memlock limit that usually causes it.
Registrar VerbsRegistrar(ibv_pd* pd);

}  // namespace isometry::rdma
