// Instances: a piece of an allocation, a file of a DSK memory, a client's
// private range, or another node's memory, described by a layout over an
// index space or by `count` elements of a datatype; validated here once,
// copied by handle afterwards.
#include "core/strings.h"
#include "daemon/node/node_impl.h"
#include "daemon/runtime/disk_endpoint.h"

namespace isometry {

std::string InstanceWhat(const InstanceSpec& spec) {
  if (spec.datatype) return StrCat(spec.count, " x ", spec.datatype->ToString(256));
  return StrCat("layout '", spec.shape.layout.ToString(), "' over ", ToString(spec.shape.bounds));
}

Result<std::pair<uint64_t, uint64_t>> node::Instances::RegisterInstance(SessionRef session,
                                                                        const InstanceSpec& spec) {
  InstanceSpec placed = spec;  // its storage's first byte in `offset`
  std::shared_ptr<const EndForm> end_form;
  uint64_t total = 0;
  if (spec.datatype) {
    ISO_ASSIGN_OR_RETURN(end_form, impl_->DatatypeEnd(session, spec, placed.offset));
    placed.shape = StreamShape(end_form->bytes);
    total = end_form->span;
  } else {
    ISO_RETURN_IF_ERROR(spec.shape.Validate("instance"));
    total = spec.shape.total_bytes();
  }
  ISO_RETURN_IF_ERROR(CheckInstanceEnd(placed.offset, total));
  absl::MutexLock lock(&impl_->mu);
  ISO_ASSIGN_OR_RETURN(Session * s, impl_->FindSession(session));
  const uint32_t max_instances = impl_->config.daemon.max_instances_per_session;
  if (s->instances.size() >= max_instances) {
    return ResourceExhausted("this session has ", s->instances.size(),
                             " instances registered; daemon.max_instances_per_session is ",
                             max_instances);
  }
  ISO_ASSIGN_OR_RETURN(const uint64_t id, impl_->PlaceInstanceLocked(*s, placed, total, end_form));
  return std::make_pair(id, total);
}

Result<uint64_t> Node::Impl::PlaceInstanceLocked(Session& s, const InstanceSpec& spec,
                                                 uint64_t total,
                                                 const std::shared_ptr<const EndForm>& end_form) {
  if (spec.private_range != 0) {
    if (spec.allocation != 0 || !spec.memory.empty() || !spec.file.empty()) {
      return InvalidArgument("instance: a private range excludes allocation, memory and file");
    }
    uint64_t id = 0;
    ISO_RETURN_IF_ERROR(RegisterPrivateInstanceLocked(s, spec, total, id));
    instances[id].form = end_form;
    return id;
  }
  const NodeMemory where = SplitNodeMemory(spec.memory, config.cluster.node_name);
  const std::string& memory = where.memory;
  if (where.node != config.cluster.node_name) {
    // Another node's instance: that node checks it when a copy uses it.
    if (!cross || !cross->KnowsNode(where.node)) {
      return NotFound("no node '", where.node, "' in this cluster (memory '", spec.memory, "')");
    }
    if (spec.file.empty() && spec.allocation == 0) {
      return InvalidArgument("remote instance on '", spec.memory,
                             "': name a file or an allocation published there");
    }
    if (!spec.file.empty()) ISO_RETURN_IF_ERROR(CheckRelativePath(spec.file));
    // A datatype end there: `offset` is its first storage byte and
    // `end_form` its form from there, sent to that node by the copy.
    const uint64_t id = next_instance++;
    Instance in{id, s.id, nullptr, spec.offset, spec.shape, 0, spec.file};
    in.remote_node = where.node;
    in.remote_allocation = spec.allocation;
    in.remote_memory = memory;
    instances[id] = std::move(in);
    s.instances.insert(id);
    instances[id].form = end_form;
    return id;
  }
  if (!spec.file.empty() || !memory.empty()) {
    // A file of a DSK memory: checked lexically here, opened (confined to
    // the directory) by each copy.
    const auto& mems = config.runtime.memories;
    size_t m = 0;
    while (m < mems.size() && mems[m].name != memory) ++m;
    if (m == mems.size()) return NotFound("no memory named '", memory, "'");
    if (mems[m].kind != MemoryKind::kDsk) {
      return InvalidArgument("memory '", memory, "' is not a DSK memory; name an allocation");
    }
    ISO_RETURN_IF_ERROR(CheckRelativePath(spec.file));
    const uint64_t id = next_instance++;
    Instance in{id, s.id, nullptr, spec.offset, spec.shape, m, spec.file};
    instances[id] = std::move(in);
    s.instances.insert(id);
    instances[id].form = end_form;
    return id;
  }
  ISO_ASSIGN_OR_RETURN(auto a, UsableAllocation(s.id, spec.allocation));
  if (spec.offset > a->shm.size() || total > a->shm.size() - spec.offset) {
    return OutOfRange("instance of ", total, " bytes (", InstanceWhat(spec), ") at offset ",
                      spec.offset, " does not fit allocation ", spec.allocation, " of ",
                      a->shm.size(), " bytes");
  }
  const uint64_t id = next_instance++;
  instances[id] = Instance{id, s.id, a, spec.offset, spec.shape, 0, ""};
  s.instances.insert(id);
  instances[id].form = end_form;
  return id;
}

Status node::Instances::UnregisterInstance(SessionRef session, uint64_t instance) {
  absl::MutexLock lock(&impl_->mu);
  ISO_ASSIGN_OR_RETURN(Session * s, impl_->FindSession(session));
  if (!s->instances.erase(instance)) return NotFound("no instance ", instance, " in this session");
  impl_->instances.erase(instance);
  return OkStatus();
}

}  // namespace isometry
