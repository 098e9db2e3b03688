#include "daemon/server/convert.h"

namespace isometry {

Result<Box> BoxFromProto(const v1::Box& box, std::string_view what) {
  if (box.lo_size() != box.hi_size()) {
    return InvalidArgument(what, ": lo has ", box.lo_size(), " values but hi has ", box.hi_size());
  }
  if (box.lo_size() < 1 || box.lo_size() > kMaxDims) {
    return InvalidArgument(what, ": ", box.lo_size(), " dimensions; between 1 and ", kMaxDims,
                           " are supported");
  }
  Box b;
  b.dims = box.lo_size();
  for (int d = 0; d < b.dims; ++d) {
    b.lo[d] = box.lo(d);
    b.hi[d] = box.hi(d);
  }
  ISO_RETURN_IF_ERROR(b.Validate(what));
  return b;
}

Result<FieldSpace> FieldsFromProto(const google::protobuf::RepeatedPtrField<v1::Field>& fields) {
  if (fields.size() > 4096) {
    return InvalidArgument("field space: ", fields.size(), " fields; at most 4096");
  }
  std::vector<Field> out;
  for (const v1::Field& f : fields) out.push_back({f.name(), f.size()});
  return FieldSpace::Make(std::move(out));
}

Result<InstanceSpec> InstanceSpecFromProto(const v1::InstanceSpec& spec,
                                           const wire::RegisteredDatatypes& registered) {
  InstanceSpec out;
  out.allocation = spec.allocation();
  out.offset = spec.offset();
  out.memory = spec.memory();
  out.file = spec.file();
  out.private_range = spec.private_range();
  if (spec.has_datatype()) {
    if (spec.has_bounds() || spec.fields_size() > 0 || !spec.layout().empty()) {
      return InvalidArgument("instance: a datatype replaces bounds, fields and layout; ",
                             "give one or the other");
    }
    ISO_ASSIGN_OR_RETURN(out.datatype, wire::DatatypeFromProto(spec.datatype(), registered));
    out.count = spec.count();
    if (spec.datatype().type_case() == v1::Datatype::kRegistered) {
      out.datatype_handle = spec.datatype().registered();
    }
    return out;
  }
  ISO_ASSIGN_OR_RETURN(Box bounds, BoxFromProto(spec.bounds(), "instance bounds"));
  ISO_ASSIGN_OR_RETURN(FieldSpace fields, FieldsFromProto(spec.fields()));
  ISO_ASSIGN_OR_RETURN(Layout layout, Layout::Parse(spec.layout(), bounds.dims));
  out.shape = InstanceShape{bounds, fields, layout};
  return out;
}

void ToProto(const Box& box, v1::Box* out) {
  out->clear_lo();
  out->clear_hi();
  for (int d = 0; d < box.dims; ++d) {
    out->add_lo(box.lo[d]);
    out->add_hi(box.hi[d]);
  }
}

void ToProto(const InstanceShape& shape, v1::InstanceSpec* out) {
  ToProto(shape.bounds, out->mutable_bounds());
  out->clear_fields();
  for (const Field& f : shape.fields.fields()) {
    auto* pf = out->add_fields();
    pf->set_name(f.name);
    pf->set_size(static_cast<uint32_t>(f.size));
  }
  out->set_layout(shape.layout.ToString());
}

Result<CopySpec> CopySpecFromProto(const v1::CopyRequest& req) {
  CopySpec c;
  c.src_instance = req.src_instance();
  c.dst_instance = req.dst_instance();
  c.options = {.priority = req.priority(), .durable = !req.no_sync()};
  if (req.has_box()) {
    ISO_ASSIGN_OR_RETURN(Box b, BoxFromProto(req.box(), "copy box"));
    c.box = b;
  }
  if (req.via_size() > 8) {
    return InvalidArgument("copy: ", req.via_size(), " forced hops; at most 8");
  }
  for (const v1::Hop& h : req.via()) c.via.push_back({h.memory(), h.layout()});
  return c;
}

void ToProto(const TransferReport& r, v1::TransferInfo* out) {
  out->set_id(r.id);
  out->set_state(r.state);
  out->set_code(static_cast<int32_t>(r.status.code()));
  out->set_message(std::string(r.status.message()));
  out->set_priority(r.priority);
  out->set_qos_class(r.qos_class);
  out->set_requested_priority(r.requested_priority);
  out->set_bytes(r.bytes);
  out->set_elapsed_s(r.elapsed_s);
  out->set_predicted_bytes_per_s(r.predicted_bytes_per_s);
  out->set_measured_bytes_per_s(r.measured_bytes_per_s);
  out->set_path(r.path);
  out->set_remote_half(r.remote_half);
  v1::SessionOwner* owner = out->mutable_owner();
  owner->set_session_id(r.owner.session);
  owner->set_client_name(r.owner.client);
  owner->set_uid(r.owner.uid);
  owner->set_pid(r.owner.pid);
  for (const HopReport& h : r.hops) {
    v1::HopProgress* p = out->add_hops();
    p->set_src_memory(h.src_memory);
    p->set_dst_memory(h.dst_memory);
    p->set_channel(h.channel);
    p->set_src_layout(h.src_layout);
    p->set_dst_layout(h.dst_layout);
    p->set_chunks_done(h.chunks_done);
    p->set_chunks_total(h.chunks_total);
  }
}

void ToProto(const MemoryReport& r, v1::Memory* out) {
  out->mutable_id()->set_node(r.usage.id.node);
  out->mutable_id()->set_memory(r.usage.id.memory);
  out->set_name(r.usage.name);
  out->set_kind(std::string(MemoryKindName(r.usage.kind)));
  out->set_pool_capacity(r.pool_capacity);
  out->set_pool_used(r.pool_used);
  out->set_client_quota(r.client_quota);
  out->set_staging_budget(r.usage.staging_budget);
  out->set_staging_used(r.usage.staging_used);
  out->set_staging_peak(r.usage.staging_peak);
}

void ToProto(const ChannelReport& r, v1::ChannelInfo* out) {
  out->set_name(r.stats.name);
  out->set_kind(std::string(ChannelKindName(r.config.kind)));
  for (const std::string& e : r.edges) out->add_edges(e);
  out->set_threads(r.config.threads);
  // A network channel's requests wait on credits, not on a slot count.
  out->set_max_in_flight(r.limits.empty() ? r.stats.threads_or_slots : 0);
  out->set_limits(r.limits);
  out->set_requests_in_flight(r.stats.requests_in_flight);
  for (const auto& [prio, xds] : r.stats.queued_by_priority) {
    v1::QueueLevel* q = out->add_queued();
    q->set_priority(prio);
    q->set_xds(xds);
  }
  out->set_requests_done(r.stats.requests_done);
  out->set_bytes_done(r.stats.bytes_done);
  out->set_current_bytes_per_s(r.current_bytes_per_s);
  out->set_peak_bytes_per_s(r.peak_bytes_per_s);
  out->set_rate_limit_bytes_per_s(r.config.rate_limit_bytes_per_s);
}

namespace {

void HopToProto(const PlanHopReport& h, v1::PlanHop* p) {
  p->set_src_memory(h.src_memory);
  p->set_dst_memory(h.dst_memory);
  p->set_channel(h.channel);
  p->set_src_layout(h.src_layout);
  p->set_dst_layout(h.dst_layout);
  p->set_request_bytes(h.request_bytes);
  p->set_buffer_bytes(h.buffer_bytes);
  p->set_predicted_bytes_per_s(h.predicted_bytes_per_s);
  p->set_run_bytes(h.run_bytes);
}

}  // namespace

void ToProto(const PlanReport& r, v1::ExplainPlanResponse* out) {
  out->set_algorithm(r.algorithm);
  out->set_text(r.text);
  for (const PlanHopReport& h : r.hops) HopToProto(h, out->add_hops());
  out->set_predicted_bytes_per_s(r.predicted_bytes_per_s);
  out->set_chunks(r.chunks);
  out->set_chunk_bytes(r.chunk_bytes);
  out->set_why(r.why);
  for (const PlanAlternativeReport& a : r.alternatives) {
    v1::PlanAlternative* p = out->add_alternatives();
    p->set_path(a.text);
    for (const PlanHopReport& h : a.hops) HopToProto(h, p->add_hops());
    p->set_predicted_bytes_per_s(a.predicted_bytes_per_s);
    p->set_chosen(a.chosen);
    p->set_verdict(a.verdict);
  }
  out->set_alternatives_weighed(static_cast<uint32_t>(r.alternatives_weighed));
}

void ToProto(const TransferExplanation& e, v1::ExplainTransferResponse* out) {
  ToProto(e.transfer, out->mutable_transfer());
  ToProto(e.plan, out->mutable_plan());
  out->set_comparison(e.comparison);
  for (const std::string& line : e.qos) out->add_qos(line);
}

void ToProto(const Calibration& cal, v1::CalibrateResponse* out) {
  for (const auto& [name, samples] : cal) {
    v1::ChannelCalibration* c = out->add_channels();
    c->set_channel(name);
    for (const RateSample& s : samples) {
      v1::RateSample* p = c->add_samples();
      p->set_request_bytes(s.request_bytes);
      p->set_bytes_per_s(s.bytes_per_s);
    }
  }
}

void ToProto(const NodeStatus& s, v1::StatusResponse* out) {
  out->set_version(ISOMETRY_VERSION);
  out->set_node(s.node);
  out->set_uptime_s(s.uptime_s);
  out->set_sessions(s.sessions);
  out->set_watched_allocations(s.watched_allocations);
  out->set_watched_regions(s.watched_regions);
  out->set_rdma(s.rdma);
  out->set_transfers_submitted(s.runtime.transfers_submitted);
  out->set_transfers_completed(s.runtime.transfers_completed);
  out->set_transfers_failed(s.runtime.transfers_failed);
  out->set_transfers_cancelled(s.runtime.transfers_cancelled);
  out->set_transfers_active(s.transfers_active);
  out->set_program_cache_hits(s.runtime.program_cache_hits);
  out->set_program_cache_misses(s.runtime.program_cache_misses);
  out->set_program_cache_bytes(s.runtime.program_cache_bytes);
  out->set_form_cache_hits(s.runtime.form_cache_hits);
  out->set_form_cache_misses(s.runtime.form_cache_misses);
  out->set_form_cache_bytes(s.runtime.form_cache_bytes);
  out->set_form_cache_entries(s.runtime.form_cache_entries);
  out->set_datatypes(s.datatypes);
  out->set_datatype_translations(s.datatype_translations);
  out->set_datatype_translations_memoized(s.datatype_translations_memoized);
  out->set_forms_sent(s.forms.sent);
  out->set_forms_referred(s.forms.referred);
  out->set_forms_resent(s.forms.resent);
  out->set_forms_received(s.forms.received);
  out->set_form_memo_hits(s.forms.memo_hits);
  out->set_form_memo_misses(s.forms.memo_misses);
  out->set_form_memo_bytes(s.forms.memo_bytes);
  out->set_allocations(s.allocations);
  out->set_instances(s.instances);
  out->set_plan_cache_hits(s.runtime.plan_cache_hits);
  out->set_plan_cache_misses(s.runtime.plan_cache_misses);
  out->set_plans_simple(s.runtime.plans_simple);
  out->set_plans_full(s.runtime.plans_full);
  out->set_own_hop_windows(s.own_hops.windows);
  out->set_own_hop_runs(s.own_hops.runs);
  out->set_own_hop_fallbacks(s.own_hops.fallbacks);
  out->set_own_hop_bogus(s.own_hops.bogus);
  out->set_own_hop_timeouts(s.own_hops.timeouts);
  out->set_own_hop_not_lent(s.own_hops.not_lent);
  out->set_direct_read_leases(s.direct_reads.leases);
  out->set_direct_read_revoked(s.direct_reads.revoked);
  out->set_direct_read_refused(s.direct_reads.refused);
}

grpc::Status ToGrpc(const Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message()));
}

namespace {

// One side of an ExplainPlan request: `count` elements of its datatype, or
// its layout over the request's bounds.
Status PlanSideFromProto(bool typed, const v1::Datatype& type, int64_t count,
                         const std::string& layout, int dims,
                         const wire::RegisteredDatatypes& registered, PlanSide& side) {
  if (typed) {
    ISO_ASSIGN_OR_RETURN(side.datatype, wire::DatatypeFromProto(type, registered));
    side.count = count;
    return OkStatus();
  }
  ISO_ASSIGN_OR_RETURN(side.layout, Layout::Parse(layout, dims));
  return OkStatus();
}

}  // namespace

Result<ExplainArgs> ExplainFromProto(const v1::ExplainPlanRequest& req,
                                     const wire::RegisteredDatatypes& registered) {
  ExplainArgs a;
  a.src.memory = req.src_memory();
  a.dst.memory = req.dst_memory();
  if (!req.has_src_datatype() || !req.has_dst_datatype()) {
    ISO_ASSIGN_OR_RETURN(a.bounds, BoxFromProto(req.bounds(), "bounds"));
    ISO_ASSIGN_OR_RETURN(a.fields, FieldsFromProto(req.fields()));
  }
  ISO_RETURN_IF_ERROR(PlanSideFromProto(req.has_src_datatype(), req.src_datatype(), req.src_count(),
                                        req.src_layout(), a.bounds.dims, registered, a.src));
  ISO_RETURN_IF_ERROR(PlanSideFromProto(req.has_dst_datatype(), req.dst_datatype(), req.dst_count(),
                                        req.dst_layout(), a.bounds.dims, registered, a.dst));
  return a;
}

void ToProto(const DatatypeReport& r, v1::RegisterDatatypeResponse* out) {
  out->set_handle(r.handle);
  out->set_size(r.size);
  out->set_lb(r.lb);
  out->set_extent(r.extent);
  out->set_true_lb(r.true_lb);
  out->set_true_extent(r.true_extent);
  out->set_canonical(r.canonical);
}

void ToProto(const SessionListing& r, v1::SessionInfo* out) {
  v1::SessionOwner* owner = out->mutable_owner();
  owner->set_session_id(r.id);
  owner->set_client_name(r.client_name);
  owner->set_uid(r.uid);
  owner->set_pid(r.pid);
  out->set_transport(r.uid >= 0 ? "local" : "gRPC");
  out->set_age_s(r.age_s);
  out->set_allocations(r.allocations);
  out->set_allocated_bytes(r.allocated_bytes);
  out->set_instances(r.instances);
  out->set_transfers_active(r.transfers_active);
  out->set_private_ranges(r.private_ranges);
  out->set_datatypes(r.datatypes);
}

void ToProto(const AllocationListing& r, v1::AllocationInfo* out) {
  out->set_id(r.id);
  out->set_memory(r.memory);
  out->set_bytes(r.bytes);
  v1::SessionOwner* owner = out->mutable_owner();
  owner->set_session_id(r.owner);
  owner->set_client_name(r.owner_name);
  owner->set_uid(r.owner_uid);
  owner->set_pid(r.owner_pid);
  out->set_published(r.published);
  out->set_watched(r.watched);
  out->set_mapped_by_others(r.mapped_by_others);
}

}  // namespace isometry
