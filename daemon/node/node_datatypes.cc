// Datatypes: handles a session registers once (FALCON-X's memoized
// translation), datatype instances as form ends (layout/copy_end.h), the
// layout end of a copy against one, and explained
// datatype plans with the reason for their cost.
#include <fmt/format.h>

#include "core/strings.h"
#include "daemon/node/node_impl.h"
#include "layout/datatype_form.h"

namespace isometry {
namespace {

// The form end of `count` elements of `type` given its form: rebased
// onto the first byte they touch, which lies `-span.begin` bytes from the
// origin (returned in `begin`).
Result<std::shared_ptr<const EndForm>> RebasedEnd(const Datatype& type, int64_t count,
                                                  const CanonicalForm& form, int64_t& begin) {
  ISO_ASSIGN_OR_RETURN(const ByteSpan span, SpanOfElements(type, count));
  begin = span.begin;
  return MakeFormEnd(ShiftForm(form, -span.begin), static_cast<uint64_t>(span.end - span.begin),
                     StrCat(count, " x ", type.ToString(256)));
}

// The form end of `box` of a layout instance. On this node (`by_chunk`)
// a layout whose stream is a list of runs is described chunk by chunk, so
// no form bound applies to the whole box (layout/copy_end.h).
Result<std::shared_ptr<const EndForm>> LayoutEnd(const InstanceShape& shape, const Box& box,
                                                 bool by_chunk) {
  std::string what = StrCat("layout '", shape.layout.ToString(), "' over ", ToString(shape.bounds),
                            " box ", ToString(box));
  if (by_chunk && !LayoutFormRegular(shape, box)) {
    return MakeLayoutChunksEnd(LayoutBox{shape, box}, std::move(what));
  }
  ISO_ASSIGN_OR_RETURN(CanonicalForm form, LayoutForm(shape, box));
  return MakeFormEnd(std::move(form), shape.total_bytes(), std::move(what));
}

std::string EndText(const EndForm& e) {
  const uint64_t avg = e.bytes / std::max<uint64_t>(1, e.runs);
  const std::string form =
      e.layout ? "its fields' runs, found chunk by chunk" : StrCat("form ", FormText(e.form, 6));
  return StrCat(e.what, ": ", e.bytes, " bytes in ", e.layout ? "up to " : "", e.runs, " run",
                e.runs == 1 ? "" : "s", " (", avg, " bytes on average), ", form);
}

// What a registered datatype makes the daemon hold, roughly: its tree
// (weight counts nodes and array entries; a 2^20-entry type measured
// 35-40 MiB resident) and a translation kept for it.
constexpr uint64_t kBytesPerWeight = 40;

// Whether `end` is one contiguous run from its first byte of `bytes` bytes.
bool Dense(const EndForm& end, uint64_t bytes) {
  if (end.layout || end.form.pieces.size() != 1) return false;
  const FormPiece& p = end.form.pieces[0];
  return p.body.empty() && p.loops.empty() && p.offset == 0 &&
         static_cast<uint64_t>(p.run) == bytes;
}

// A copy between contiguous packed bytes and a layout moves the same bytes
// as a layout copy from or to the AOS C-order layout over those bytes: the
// layout compiler loops each field at its own stride, so fields of
// different sizes cost no list of runs and meet no form bound. True when
// `request` was rewritten so.
bool DenseEndAsLayout(const Instance* const ends[2], const std::optional<Box>& box,
                      CopyRequest& request) {
  const int p = ends[0]->form ? 0 : 1, l = 1 - p;
  if (!ends[p]->form || ends[l]->form) return false;
  const InstanceShape& shape = ends[l]->shape;
  const Box b = box.value_or(shape.bounds);
  if (b.dims != shape.bounds.dims || !shape.bounds.contains(b) || b.empty()) return false;
  const uint64_t bytes = b.volume() * shape.fields.total_bytes();
  if (!Dense(*ends[p]->form, bytes)) return false;
  InstanceRef* refs[2] = {&request.src, &request.dst};
  refs[p]->form = nullptr;
  refs[p]->shape = InstanceShape{b, shape.fields, Layout::RowMajor(b.dims)};
  refs[l]->form = nullptr;
  return true;
}

}  // namespace

// Why a plan between form ends costs what it does: each end's form and runs, and the
// throughput the hops that touch them were read at.
std::string WhyForms(const PlanExplanation& ex, const EndForm& src, const EndForm& dst,
                     const Topology& topo) {
  std::string why = StrCat("source ", EndText(src), "; destination ", EndText(dst));
  const Path& p = ex.path;
  for (size_t h = 0; h < p.edges.size() && h < p.run_bytes.size(); ++h) {
    if (h != 0 && h + 1 != p.edges.size()) continue;
    const char* end =
        h == 0 ? (p.edges.size() == 1 ? "both ends'" : "the source's") : "the destination's";
    why += StrCat("; hop ", h, " (", p.edges[h].channel_name, ", ", topo.NameOf(p.edges[h].src),
                  " -> ", topo.NameOf(p.edges[h].dst), ") moves ", end, " runs of ", p.run_bytes[h],
                  " bytes: ", fmt::format("{:.2f} GB/s", p.hop_bps[h] / 1e9));
    // Only cma reaches PROCESS memory: its hops are the ones that end there.
    const TopologyMemory* from = topo.FindMemory(p.edges[h].src);
    const TopologyMemory* to = topo.FindMemory(p.edges[h].dst);
    const auto process = [](const TopologyMemory* m) {
      return m && m->kind == MemoryKind::kProcess;
    };
    if (!process(from) && !process(to)) continue;
    if (h == 0 && ReadsProcess(p, topo) && CmaGathers(src, ex.chunk_bytes)) {
      why += StrCat(" -> cma reads each chunk's extent in one call and gathers here (", src.runs,
                    " runs in ", src.span, " bytes cost more as one system call each)");
    } else {
      why += " (cma: one system call per run)";
    }
  }
  return why;
}

Result<DatatypeReport> node::Instances::RegisterDatatype(SessionRef session, const Datatype& type) {
  // Translated now: a type too irregular to serve is refused here, once.
  ISO_ASSIGN_OR_RETURN(CanonicalForm form, DatatypeForm(type, 1));
  DatatypeReport rep;
  rep.size = type.size();
  rep.lb = type.lb();
  rep.extent = type.extent();
  rep.true_lb = type.true_lb();
  rep.true_extent = type.true_extent();
  rep.canonical = FormText(form);
  ++impl_->translations;
  ISO_ASSIGN_OR_RETURN(std::shared_ptr<Session> s, impl_->SessionFor(session));
  const uint64_t cost =
      kBytesPerWeight * static_cast<uint64_t>(type.info().weight) + FormBytes(form.pieces);
  rep.handle = impl_->next_datatype++;
  ISO_RETURN_IF_ERROR(s->datatypes.Add(rep.handle, type, std::move(form), cost,
                                       impl_->config.daemon.max_datatypes_per_session));
  return rep;
}

Result<Datatype> node::Instances::LookupDatatype(SessionRef session, uint64_t handle) const {
  ISO_ASSIGN_OR_RETURN(std::shared_ptr<Session> s, impl_->SessionFor(session));
  return s->datatypes.Type(handle);
}

std::function<Result<Datatype>(uint64_t)> node::Instances::DatatypeHandles(
    SessionRef session) const {
  return [this, session](uint64_t handle) { return LookupDatatype(session, handle); };
}

Result<std::shared_ptr<const EndForm>> Node::Impl::DatatypeEnd(SessionRef session,
                                                               const InstanceSpec& spec,
                                                               uint64_t& storage_offset) {
  if (spec.count <= 0) {
    return InvalidArgument("datatype instance: count ", spec.count, "; at least 1 element");
  }
  const Datatype& type = *spec.datatype;
  // The session's table has its own lock: no node lock is held while
  // the handle is looked up or a form of up to 2^21 runs is computed.
  std::shared_ptr<Session> s;
  std::shared_ptr<const CanonicalForm> form;
  if (spec.datatype_handle != 0) {
    ISO_ASSIGN_OR_RETURN(s, SessionFor(session));
    ISO_ASSIGN_OR_RETURN(form, s->datatypes.KeptForm(spec.datatype_handle, spec.count));
  }
  if (form) {
    ++translations_memoized;
  } else {
    ISO_ASSIGN_OR_RETURN(CanonicalForm computed, DatatypeForm(type, spec.count));
    form = std::make_shared<const CanonicalForm>(std::move(computed));
    ++translations;
    if (s) s->datatypes.Keep(spec.datatype_handle, spec.count, form);
  }
  int64_t begin = 0;
  ISO_ASSIGN_OR_RETURN(auto end, RebasedEnd(type, spec.count, *form, begin));
  const __int128 first = static_cast<__int128>(spec.offset) + begin;
  if (first < 0) {
    return OutOfRange("datatype instance: its first byte lies ", -begin,
                      " bytes before its origin, which is at offset ", spec.offset,
                      " (the lower bound reaches before the storage)");
  }
  storage_offset = static_cast<uint64_t>(first);
  return end;
}

Status Node::Impl::PackEndsLocked(const Instance* const ends[2], const std::optional<Box>& box,
                                  CopyRequest& request, bool local) const {
  if (ends[0]->form && ends[1]->form && box) {
    return InvalidArgument("copy: between two datatype instances there is no box; ",
                           "the whole streams are copied");
  }
  if (local && DenseEndAsLayout(ends, box, request)) return OkStatus();
  InstanceRef* refs[2] = {&request.src, &request.dst};
  for (int i = 0; i < 2; ++i) {
    if (ends[i]->form) {
      refs[i]->form = ends[i]->form;
      continue;
    }
    const InstanceShape& shape = ends[i]->shape;
    const Box b = box.value_or(shape.bounds);
    if (b.dims != shape.bounds.dims || !shape.bounds.contains(b)) {
      return OutOfRange("copy box ", ToString(b), " lies outside the ",
                        i ? "destination" : "source", " index space ", ToString(shape.bounds));
    }
    ISO_ASSIGN_OR_RETURN(refs[i]->form, LayoutEnd(shape, b, local));
  }
  return OkStatus();
}

Result<PlanReport> node::Copies::Explain(const PlanSide& src, const PlanSide& dst,
                                         const Box& bounds, const FieldSpace& fields) const {
  if (!src.datatype && !dst.datatype) {
    return Explain(src.memory, src.layout, dst.memory, dst.layout, bounds, fields);
  }
  const PlanSide* sides[2] = {&src, &dst};
  InstanceRef refs[2];
  bool across = false;  // a side on another node: the cluster layer plans
  for (int i = 0; i < 2; ++i) {
    const PlanSide& side = *sides[i];
    const NodeMemory where = SplitNodeMemory(side.memory, impl_->config.cluster.node_name);
    if (where.node != impl_->config.cluster.node_name) {
      across = true;
    } else {
      ISO_ASSIGN_OR_RETURN(refs[i].memory, impl_->runtime->FindMemory(where.memory));
    }
    if (side.datatype) {
      if (side.count <= 0) return InvalidArgument("datatype count ", side.count, "; at least 1");
      ISO_ASSIGN_OR_RETURN(CanonicalForm form, DatatypeForm(*side.datatype, side.count));
      int64_t begin = 0;
      ISO_ASSIGN_OR_RETURN(refs[i].form, RebasedEnd(*side.datatype, side.count, form, begin));
    } else {
      const InstanceShape shape{bounds, fields, side.layout};
      ISO_RETURN_IF_ERROR(shape.Validate(i ? "destination" : "source"));
      ISO_ASSIGN_OR_RETURN(refs[i].form, LayoutEnd(shape, bounds, /*by_chunk=*/true));
    }
    refs[i].capacity = refs[i].form->span;
  }
  if (across) {
    if (!impl_->cross) return FailedPrecondition("this node has no peers");
    return impl_->cross->ExplainForms(src.memory, dst.memory, *refs[0].form, *refs[1].form);
  }
  ISO_ASSIGN_OR_RETURN(PlanExplanation ex, impl_->runtime->Explain(refs[0], refs[1]));
  PlanReport rep = ReportPlan(ex, impl_->runtime->topology());
  rep.why = WhyForms(ex, *refs[0].form, *refs[1].form, impl_->runtime->topology());
  return rep;
}

}  // namespace isometry
