// Distributed instances (node_distributed.h): ranks join by name with
// their local instance; the whole ends with any rank's session.
#include <openssl/crypto.h>
#include <openssl/sha.h>
#include <spdlog/spdlog.h>

#include "core/log_escape.h"
#include "core/strings.h"
#include "daemon/node/node_impl.h"
#include "daemon/node/redistribute_op.h"

namespace isometry {
namespace {

using Dist = redistribution::Distribution;
using redistribution::Index;

constexpr size_t kMaxNameBytes = 128;
constexpr size_t kMinGrantBytes = 16, kMaxGrantBytes = 256;

Status CheckName(const std::string& name) {
  if (name.empty() || name.size() > kMaxNameBytes) {
    return InvalidArgument("distributed instance name: ", name.size(), " bytes; 1 to ",
                           kMaxNameBytes);
  }
  for (const char c : name) {
    if (c <= ' ' || c > '~') {
      return InvalidArgument("distributed instance name: printable ASCII without spaces only");
    }
  }
  return OkStatus();
}

DistributedReport ReportOf(const DistributedInstance& d) {
  return {d.name, d.dist.ToString(), d.element_bytes, d.dist.rank_count(), d.joined};
}

// The rank's local instance checked against its local extents.
Status CheckLocal(const Instance& in, const DistributedJoin& join, const Index& extents, int dims) {
  const std::string what = StrCat("rank ", join.rank, "'s instance ", join.instance);
  if (!in.remote_node.empty()) {
    return Unimplemented(what, " lives on node '", in.remote_node,
                         "': distributed instances across nodes are not supported yet; "
                         "each rank joins with an instance on its own node");
  }
  if (in.form) {
    return Unimplemented(what, " is a datatype instance: a distributed instance's local ",
                         "storage must be a layout instance (any strided layout)");
  }
  const InstanceShape& shape = in.shape;
  if (shape.bounds.dims != dims) {
    return InvalidArgument(what, " has ", shape.bounds.dims, " dimensions; the distribution has ",
                           dims);
  }
  for (int d = 0; d < dims; ++d) {
    if (static_cast<uint64_t>(shape.bounds.extent(d)) != extents[d]) {
      return InvalidArgument(what, " has extent ", shape.bounds.extent(d), " in dimension ", d,
                             "; the rank's local extent there is ", extents[d]);
    }
  }
  if (shape.fields.total_bytes() != join.element_bytes) {
    return InvalidArgument(what, " has elements of ", shape.fields.total_bytes(),
                           " bytes; the distributed instance's are ", join.element_bytes);
  }
  return StridedStorageOf(shape, what).status();
}

}  // namespace

Result<std::string> DistributedGrantDigest(const std::string& grant) {
  if (grant.empty()) return std::string();
  if (grant.size() < kMinGrantBytes || grant.size() > kMaxGrantBytes) {
    return InvalidArgument("distributed instance grant of ", grant.size(),
                           " bytes: ", kMinGrantBytes, " to ", kMaxGrantBytes,
                           " (a random secret of the job's, the same for every rank)");
  }
  std::string digest(SHA256_DIGEST_LENGTH, '\0');
  SHA256(reinterpret_cast<const unsigned char*>(grant.data()), grant.size(),
         reinterpret_cast<unsigned char*>(digest.data()));
  return digest;
}

bool GrantDigestsEqual(const std::string& a, const std::string& b) {
  return a.size() == SHA256_DIGEST_LENGTH && b.size() == SHA256_DIGEST_LENGTH &&
         CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

bool IsMember(const DistributedInstance& d, uint64_t session) {
  for (const auto& m : d.members) {
    if (m && m->session == session) return true;
  }
  return false;
}

bool GrantMatches(const DistributedInstance& d, const std::string& digest) {
  return GrantDigestsEqual(d.grant_digest, digest);
}

// gRPC sessions have no uid (the transport does not say who the peer is).
std::string DistributedNamespace(const Session& s) {
  return s.creds.known() ? StrCat("uid ", s.creds.uid, "/")
                         : std::string(kGrpcDistributedNamespace);
}

Result<StridedStorage> StridedStorageOf(const InstanceShape& shape, const std::string& what) {
  StridedStorage out;
  const FieldAddressing first = shape.Addressing(0);
  std::vector<int64_t> lens, disps;
  std::vector<Datatype> types;
  for (size_t f = 0; f < shape.fields.size(); ++f) {
    const FieldAddressing a = shape.Addressing(f);
    for (int d = 0; d < shape.bounds.dims; ++d) {
      if (a.dims[d].block != 0) {
        return Unimplemented(what, ": layout '", shape.layout.ToString(), "' blocks dimension ", d,
                             ", so its elements do not lie at one stride per dimension; ",
                             "use a layout without x_in/x_out");
      }
      if (a.dims[d].stride_in != first.dims[d].stride_in) {
        return Unimplemented(what, ": layout '", shape.layout.ToString(),
                             "' puts its fields at different strides (fields of different ",
                             "sizes not interleaved); use an AOS layout (F first)");
      }
    }
    lens.push_back(a.element_bytes);
    disps.push_back(static_cast<int64_t>(a.base));
    types.push_back(Datatype::Basic(BasicType::kUint8));
  }
  for (int d = 0; d < shape.bounds.dims; ++d) {
    out.stride[d] = static_cast<int64_t>(first.dims[d].stride_in);
  }
  ISO_ASSIGN_OR_RETURN(out.element, Datatype::Struct(lens, disps, types));
  out.span = shape.total_bytes();
  return out;
}

Result<DistributedReport> node::Distributed::JoinDistributed(SessionRef session,
                                                             const DistributedJoin& join) {
  ISO_RETURN_IF_ERROR(CheckName(join.name));
  ISO_ASSIGN_OR_RETURN(const Dist dist, Dist::Make(join.spec));
  if (join.element_bytes == 0 || join.element_bytes > (1u << 20)) {
    return InvalidArgument("element size ", join.element_bytes, " bytes; 1 to 1048576");
  }
  if (join.rank >= dist.rank_count()) {
    return InvalidArgument("rank ", join.rank, " of ", dist.ToString(), ": it has ",
                           dist.rank_count(), " ranks");
  }
  ISO_ASSIGN_OR_RETURN(const Index extents, dist.LocalExtent(join.rank));
  ISO_ASSIGN_OR_RETURN(const std::string digest, DistributedGrantDigest(join.grant));
  uint64_t elements = 1;
  for (int d = 0; d < dist.dims(); ++d) elements *= extents[d];
  absl::MutexLock lock(&impl_->mu);
  ISO_ASSIGN_OR_RETURN(Session * s, impl_->FindSession(session));
  if (elements == 0 && join.instance != 0) {
    return InvalidArgument("rank ", join.rank, " of ", dist.ToString(),
                           " holds no element: join it with instance 0");
  }
  if (elements != 0) {
    auto it = impl_->instances.find(join.instance);
    if (it == impl_->instances.end() || it->second.session != s->id) {
      return NotFound("no instance ", join.instance, " registered in this session");
    }
    ISO_RETURN_IF_ERROR(CheckLocal(it->second, join, extents, dist.dims()));
    // Redistributions never run through watches (and Watch refuses a
    // region over a rank).
    ISO_RETURN_IF_ERROR(impl_->RankUnwatchedLocked(
        it->second, std::nullopt, StrCat("rank ", join.rank, "'s instance ", join.instance)));
  }
  const std::string ns = DistributedNamespace(*s);
  const bool grpc_ns = !s->creds.known();
  const std::string key = ns + join.name;
  auto found = impl_->distributed.find(key);
  // gRPC sessions share one namespace: a job's instance is joined by its
  // own sessions and those that know its grant, never taken over by
  // another client naming it.
  if (grpc_ns && found != impl_->distributed.end() && !IsMember(*found->second, s->id) &&
      !GrantMatches(*found->second, digest)) {
    return PermissionDenied(
        "distributed instance '", ForLog(join.name), "' was made by another session",
        found->second->grant_digest.empty()
            ? " without a grant: only the sessions that joined it may join more ranks"
            : (digest.empty() ? "; joining it needs its grant (JoinDistributedRequest.grant)"
                              : "; the grant presented is not its grant"));
  }
  if (found == impl_->distributed.end()) {
    size_t mine = 0;
    for (auto it = impl_->distributed.lower_bound(ns);
         it != impl_->distributed.end() && it->first.starts_with(ns); ++it) {
      ++mine;
    }
    const uint32_t max = impl_->config.daemon.max_distributed_per_uid;
    if (mine >= max) {
      return ResourceExhausted(mine, " distributed instances are named; ",
                               "daemon.max_distributed_per_uid is ", max);
    }
    auto fresh = std::make_shared<DistributedInstance>(
        DistributedInstance{join.name, dist, join.spec, join.element_bytes, {}, 0, {}, {}, {}});
    if (grpc_ns) fresh->grant_digest = digest;
    fresh->members.resize(dist.rank_count());
    found = impl_->distributed.emplace(key, std::move(fresh)).first;
  }
  DistributedInstance& d = *found->second;
  if (!(d.dist == dist) || d.element_bytes != join.element_bytes) {
    return InvalidArgument("distributed instance '", join.name, "' is ", d.dist.ToString(), " of ",
                           d.element_bytes, "-byte elements; this join says ", dist.ToString(),
                           " of ", join.element_bytes, "-byte elements");
  }
  if (d.members[join.rank]) {
    return absl::AlreadyExistsError(StrCat("rank ", join.rank, " of '", join.name,
                                           "' has already joined (session ",
                                           d.members[join.rank]->session, ")"));
  }
  d.members[join.rank] = DistributedMember{s->id, join.instance};
  ++d.joined;
  if (d.joined == d.dist.rank_count()) {
    spdlog::info("distributed instance '{}' complete: {} ranks, {}", ForLog(d.name), d.joined,
                 d.dist.ToString());
  }
  return ReportOf(d);
}

std::vector<std::shared_ptr<CrossTransfer>> Node::Impl::ReleaseDistributedLocked(
    uint64_t session, std::vector<EndedDistributed>& ended) {
  std::vector<std::shared_ptr<CrossTransfer>> ops;
  for (auto it = distributed.begin(); it != distributed.end();) {
    const DistributedInstance& d = *it->second;
    bool member = false;
    for (const auto& m : d.members) member = member || (m && m->session == session);
    if (!member) {
      ++it;
      continue;
    }
    for (const auto& w : d.running) {
      if (auto op = w.lock()) ops.push_back(std::move(op));
    }
    ended.push_back({it->first, d.peers});
    it = distributed.erase(it);
  }
  return ops;
}

void AbortRedistributions(const std::vector<std::shared_ptr<CrossTransfer>>& ops,
                          const Status& why) {
  for (const auto& op : ops) op->Abort(why);
}

}  // namespace isometry
