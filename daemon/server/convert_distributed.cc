// Distributed instances on the wire (proto/isometry.proto, the end).
#include "daemon/server/convert_distributed.h"

#include "absl/synchronization/notification.h"
#include "core/strings.h"
#include "daemon/node/copies.h"
#include "daemon/node/distributed.h"
#include "daemon/server/convert.h"

namespace isometry {

namespace rd = redistribution;

Result<rd::DistributionSpec> DistributionFromProto(const v1::DistributionSpec& d) {
  if (d.extents_size() > rd::kMaxDims || d.dists_size() > rd::kMaxDims ||
      d.grid_size() > rd::kMaxDims) {
    return InvalidArgument("distribution: at most ", rd::kMaxDims, " dimensions");
  }
  rd::DistributionSpec spec;
  spec.extents.assign(d.extents().begin(), d.extents().end());
  spec.grid.assign(d.grid().begin(), d.grid().end());
  spec.order = d.column_major() ? rd::GridOrder::kColumnMajor : rd::GridOrder::kRowMajor;
  for (int i = 0; i < d.dists_size(); ++i) {
    const v1::DimDistribution& dim = d.dists(i);
    switch (dim.kind()) {
      case v1::DIST_BLOCK:
        spec.dists.push_back(rd::DimDistribution::Block());
        break;
      case v1::DIST_CYCLIC:
        spec.dists.push_back(rd::DimDistribution::Cyclic());
        break;
      case v1::DIST_BLOCK_CYCLIC:
        spec.dists.push_back(rd::DimDistribution::BlockCyclic(dim.block()));
        break;
      default:
        return InvalidArgument("distribution.dists[", i, "].kind: unknown value ",
                               static_cast<int>(dim.kind()));
    }
  }
  return spec;
}

void ToProto(const rd::DistributionSpec& spec, v1::DistributionSpec* out) {
  for (const uint64_t e : spec.extents) out->add_extents(e);
  for (const uint64_t g : spec.grid) out->add_grid(g);
  out->set_column_major(spec.order == rd::GridOrder::kColumnMajor);
  for (const rd::DimDistribution& d : spec.dists) {
    v1::DimDistribution* dim = out->add_dists();
    dim->set_kind(d.kind == rd::DistKind::kBlock    ? v1::DIST_BLOCK
                  : d.kind == rd::DistKind::kCyclic ? v1::DIST_CYCLIC
                                                    : v1::DIST_BLOCK_CYCLIC);
    if (d.kind == rd::DistKind::kBlockCyclic) dim->set_block(d.block);
  }
}

Result<DistributedJoin> JoinFromProto(const v1::JoinDistributedRequest& req) {
  DistributedJoin j;
  j.name = req.name();
  j.element_bytes = req.element_bytes();
  j.rank = req.rank();
  j.instance = req.instance();
  j.grant = req.grant();
  ISO_ASSIGN_OR_RETURN(j.spec, DistributionFromProto(req.distribution()));
  return j;
}

RedistributeGrants GrantsFromProto(const v1::RedistributeRequest& req) {
  return {req.producer_grant(), req.consumer_grant()};
}

void ToProto(const DistributedReport& r, v1::JoinDistributedResponse* out) {
  out->set_name(r.name);
  out->set_distribution(r.distribution);
  out->set_element_bytes(r.element_bytes);
  out->set_ranks(r.ranks);
  out->set_joined(r.joined);
}

Status RedistributeLocal(Node& node, SessionRef session, const v1::RedistributeRequest& req,
                         v1::CopyResponse* out) {
  auto ended = std::make_shared<absl::Notification>();
  auto report = std::make_shared<TransferReport>();
  TransferCallback on_done;
  if (req.wait()) {
    on_done = [ended, report](const TransferReport& r) {
      *report = r;
      ended->Notify();
    };
  }
  ISO_ASSIGN_OR_RETURN(const uint64_t id,
                       node.distributed().Redistribute(session, req.producer(), req.consumer(),
                                                       GrantsFromProto(req), on_done));
  out->set_transfer(id);
  if (!req.wait()) return OkStatus();
  ended->WaitForNotification();
  ToProto(node.copies().GetTransfer(session, id).value_or(*report), out->mutable_info());
  return report->status;
}

}  // namespace isometry
