#include "daemon/server/local_requests.h"

#include <unistd.h>

#include "daemon/node/distributed.h"
#include "daemon/node/instances.h"
#include "daemon/node/pools.h"
#include "daemon/server/active_rpc.h"
#include "daemon/server/convert.h"
#include "daemon/server/convert_distributed.h"
#include "daemon/server/local_private.h"
#include "daemon/server/translate_pool.h"
#include "proto/local_wire.h"

namespace isometry {

std::vector<UniqueFd> KeepPassedFds(const v1::LocalRequest* req, const std::vector<int>& fds) {
  std::vector<UniqueFd> kept;
  for (int fd : fds) {
    if (req && req->has_register_private() && kept.size() < 2) {
      kept.emplace_back(fd);
    } else {
      ::close(fd);
    }
  }
  return kept;
}

Status AnswerLocalRequest(Node& node, const LocalSessionRefs& refs, const v1::LocalRequest& req,
                          v1::LocalResponse* resp, std::vector<int>* fds) {
  // Translation's cost bound, checked before decoding as over gRPC.
  const int64_t max_weight = node.config().daemon.max_translate_weight;
  switch (req.body_case()) {
    case v1::LocalRequest::kAllocate: {
      ISO_ASSIGN_OR_RETURN(
          AllocationReport a,
          node.pools().Allocate(refs.session, req.allocate().memory(), req.allocate().bytes()));
      resp->mutable_allocate()->set_allocation(a.id);
      resp->mutable_allocate()->set_bytes(a.bytes);
      resp->mutable_allocate()->set_memory(a.memory);
      fds->push_back(a.fd);
      return OkStatus();
    }
    case v1::LocalRequest::kMap: {
      ISO_ASSIGN_OR_RETURN(AllocationReport a,
                           node.pools().Map(refs.session, req.map().allocation()));
      resp->mutable_map()->set_allocation(a.id);
      resp->mutable_map()->set_bytes(a.bytes);
      resp->mutable_map()->set_watched(a.watched);
      if (!a.watched) fds->push_back(a.fd);
      return OkStatus();
    }
    case v1::LocalRequest::kFree:
      return node.pools().Free(refs.session, req.free().allocation());
    case v1::LocalRequest::kPublish:
      return node.pools().Publish(refs.session, req.publish().allocation());
    case v1::LocalRequest::kRegisterInstance: {
      ISO_RETURN_IF_ERROR(CheckTranslateWeight(WeightOf(req.register_instance().spec().datatype()),
                                               max_weight, "RegisterInstance"));
      ISO_ASSIGN_OR_RETURN(InstanceSpec spec,
                           InstanceSpecFromProto(req.register_instance().spec(),
                                                 node.instances().DatatypeHandles(refs.session)));
      if (spec.datatype) {
        ISO_RETURN_IF_ERROR(
            CheckTranslateWeight(spec.datatype->info().weight, max_weight, "RegisterInstance"));
      }
      ISO_ASSIGN_OR_RETURN(auto r, node.instances().RegisterInstance(refs.session, spec));
      resp->mutable_register_instance()->set_instance(r.first);
      resp->mutable_register_instance()->set_total_bytes(r.second);
      return OkStatus();
    }
    case v1::LocalRequest::kUnregisterInstance:
      return node.instances().UnregisterInstance(refs.session,
                                                 req.unregister_instance().instance());
    case v1::LocalRequest::kRegisterPrivate: {
      std::vector<UniqueFd>& own = *refs.passed;
      own.resize(2);
      ISO_ASSIGN_OR_RETURN(uint64_t range, node.instances().RegisterPrivate(
                                               refs.session, req.register_private().address(),
                                               req.register_private().bytes(), std::move(own[0]),
                                               std::move(own[1])));
      resp->mutable_register_private()->set_private_range(range);
      return OkStatus();
    }
    case v1::LocalRequest::kPublishPrivate:
      return node.instances().PublishPrivate(refs.session, req.publish_private().private_range(),
                                             ServeWindowOf(req.publish_private()));
    case v1::LocalRequest::kRegisterDatatype: {
      ISO_RETURN_IF_ERROR(CheckTranslateWeight(WeightOf(req.register_datatype().datatype()),
                                               max_weight, "RegisterDatatype"));
      ISO_ASSIGN_OR_RETURN(Datatype type,
                           wire::DatatypeFromProto(req.register_datatype().datatype(),
                                                   node.instances().DatatypeHandles(refs.session)));
      // With its registered handles' weight (1 each before decoding).
      ISO_RETURN_IF_ERROR(CheckTranslateWeight(type.info().weight, max_weight, "RegisterDatatype"));
      ISO_ASSIGN_OR_RETURN(DatatypeReport r, node.instances().RegisterDatatype(refs.session, type));
      ToProto(r, resp->mutable_register_datatype());
      return OkStatus();
    }
    case v1::LocalRequest::kJoinDistributed: {
      ISO_ASSIGN_OR_RETURN(DistributedJoin join, JoinFromProto(req.join_distributed()));
      ISO_ASSIGN_OR_RETURN(DistributedReport r,
                           node.distributed().JoinDistributed(refs.session, join));
      ToProto(r, resp->mutable_join_distributed());
      return OkStatus();
    }
    case v1::LocalRequest::kRedistribute:
      return RedistributeLocal(node, refs.session, req.redistribute(),
                               resp->mutable_redistribute());
    case v1::LocalRequest::kOwnHops:
      return AnswerOwnHops(node, refs.session, refs.cq_event, resp->mutable_own_hops(), fds);
    case v1::LocalRequest::kDirectRead:
      return AnswerDirectRead(node, refs.session, refs.lease_epoch, req.direct_read(),
                              resp->mutable_direct_read(), fds, refs.sent_fds);
    case v1::LocalRequest::kWatch:
    case v1::LocalRequest::kUnwatch:
    case v1::LocalRequest::kGetWatch:
    case v1::LocalRequest::kActiveFlush:
    case v1::LocalRequest::kDirtyPages:
    case v1::LocalRequest::kCheckpoint:
    case v1::LocalRequest::kRestore:
    case v1::LocalRequest::kCompactCheckpoint:
      return ActiveLocal(node, refs.session, req, resp, fds);
    case v1::LocalRequest::kHello:  // the connection's, answered there
    case v1::LocalRequest::BODY_NOT_SET:
      break;
  }
  return InvalidArgument("empty or unknown request");
}

}  // namespace isometry
