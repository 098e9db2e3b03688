#include "fuzz/request_checks.h"

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "core/checked.h"
#include "daemon/runtime/chunker.h"
#include "daemon/server/convert.h"
#include "layout/compiler.h"
#include "layout/executor.h"

namespace isometry::fuzz {

namespace {

// Copies are compiled and run on real buffers only while they stay small,
// so one input takes milliseconds.
constexpr uint64_t kRunBytes = 1 << 16;
constexpr uint64_t kRunPoints = 1 << 12;

[[noreturn]] void Finding(const char* what, const Status& s = OkStatus()) {
  std::fprintf(stderr, "fuzz finding: %s %s\n", what, std::string(s.message()).c_str());
  std::abort();
}

// A rejection is a clear client error, never an internal one.
void ExpectClientError(const Status& s) {
  if (s.ok()) {
    return;
  }
  if (s.message().empty()) {
    Finding("error without a message");
  }
  switch (s.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
    case absl::StatusCode::kResourceExhausted:
    case absl::StatusCode::kFailedPrecondition:
    // What this version does not serve yet (datatype instances), said so.
    case absl::StatusCode::kUnimplemented:
      return;
    default:
      Finding("unexpected error code", s);
  }
}

// Invariants of an accepted shape that addressing relies on.
void CheckShape(const InstanceShape& shape) {
  const uint64_t total = shape.total_bytes();
  if (total > (uint64_t{1} << 62)) {
    Finding("accepted shape larger than 2^62 bytes");
  }
  if (shape.bounds.empty()) {
    return;
  }
  std::array<int64_t, kMaxDims> last{};
  for (int d = 0; d < shape.bounds.dims; ++d) {
    last[d] = shape.bounds.hi[d] - 1;
  }
  for (size_t f = 0; f < shape.fields.size(); ++f) {
    const uint64_t end = shape.OffsetOf(f, last) + shape.fields.fields()[f].size;
    if (end > total) {
      Finding("last element lies past the instance's storage");
    }
    if (shape.OffsetOf(f, shape.bounds.lo) >= total) {
      Finding("first element past storage");
    }
  }
}

// Compiles src -> dst over `box` and, when small, runs it on buffers of
// exactly the shapes' sizes (ASan reports any byte outside them).
void CompileAndRun(const InstanceShape& src, const InstanceShape& dst, const Box& box) {
  const Result<CopyProgram> p = CompileCopy(src, dst, box);
  if (!p.ok()) {
    return ExpectClientError(p.status());
  }
  if (p->bytes != box.volume() * src.fields.total_bytes()) {
    Finding("program moves wrong bytes");
  }
  if (src.total_bytes() > kRunBytes || dst.total_bytes() > kRunBytes) {
    return;
  }
  std::vector<std::byte> a(src.total_bytes()), b(dst.total_bytes());
  ExecuteProgram(*p, a.data(), b.data());
}

void ChunkAndCompile(const InstanceShape& src, const InstanceShape& dst, const Box& box,
                     const std::vector<Layout>& via) {
  std::vector<Layout> layouts{src.layout};
  std::vector<bool> intermediate{false};
  for (const Layout& l : via) {
    layouts.push_back(l);
    intermediate.push_back(true);
  }
  layouts.push_back(dst.layout);
  intermediate.push_back(false);
  const Result<ChunkGrid> g =
      ChunkGrid::Make(box, src.fields, layouts, intermediate, 1 << 20, 4 << 20);
  if (!g.ok()) {
    return ExpectClientError(g.status());
  }
  if (box.volume() > kRunPoints) {
    return;
  }
  uint64_t points = 0;
  for (uint64_t k = 0; k < g->count(); ++k) {
    const Box c = g->chunk(k);
    if (!box.contains(c)) {
      Finding("chunk outside the box");
    }
    points += c.volume();
  }
  if (points != box.volume()) {
    Finding("chunks do not tile the box");
  }
  CompileAndRun(src, dst, box);
}

}  // namespace

void CheckInstanceSpec(const v1::InstanceSpec& proto) {
  const Result<InstanceSpec> spec = InstanceSpecFromProto(proto);
  if (!spec.ok()) {
    return ExpectClientError(spec.status());
  }
  const Status valid = spec->shape.Validate("instance");
  if (!valid.ok()) {
    return ExpectClientError(valid);
  }
  CheckShape(spec->shape);
  // RegisterInstance's fit check, as node.cc does it.
  constexpr uint64_t kAllocation = 1 << 20;
  (void)RangeWithin(spec->offset, spec->shape.total_bytes(), kAllocation);
  CompileAndRun(spec->shape, spec->shape, spec->shape.bounds);
}

void CheckCopyRequest(const v1::CopyRequest& req) {
  const Result<CopySpec> spec = CopySpecFromProto(req);
  if (!spec.ok()) {
    return ExpectClientError(spec.status());
  }
  if (!spec->box) {
    return;
  }
  // The instances a copy names live in the daemon; here both are the
  // box's own index space in row-major order, the hops as given.
  const Box& box = *spec->box;
  const FieldSpace fields = FieldSpace::Uniform(1, 4);
  std::vector<Layout> via;
  for (const ViaHop& h : spec->via) {
    const Result<Layout> l = Layout::Parse(h.layout, box.dims);
    if (!l.ok()) {
      return ExpectClientError(l.status());
    }
    via.push_back(*l);
  }
  const InstanceShape shape{box, fields, Layout::RowMajor(box.dims)};
  const Status s = shape.Validate("instance");
  if (!s.ok()) {
    return ExpectClientError(s);
  }
  ChunkAndCompile(shape, shape, box, via);
}

void CheckExplainPlan(const v1::ExplainPlanRequest& req) {
  // The same steps, in the same order, as GrpcService::ExplainPlan and
  // node::Copies::Explain (before the planner picks a path).
  const Result<Box> bounds = BoxFromProto(req.bounds(), "bounds");
  if (!bounds.ok()) {
    return ExpectClientError(bounds.status());
  }
  const Result<FieldSpace> fields = FieldsFromProto(req.fields());
  if (!fields.ok()) {
    return ExpectClientError(fields.status());
  }
  const Result<Layout> sl = Layout::Parse(req.src_layout(), bounds->dims);
  if (!sl.ok()) {
    return ExpectClientError(sl.status());
  }
  const Result<Layout> dl = Layout::Parse(req.dst_layout(), bounds->dims);
  if (!dl.ok()) {
    return ExpectClientError(dl.status());
  }
  const InstanceShape ss{*bounds, *fields, *sl}, ds{*bounds, *fields, *dl};
  for (const InstanceShape* s : {&ss, &ds}) {
    const Status v = s->Validate("instance");
    if (!v.ok()) {
      return ExpectClientError(v);
    }
    CheckShape(*s);
  }
  ChunkAndCompile(ss, ds, *bounds, {});
}

void CheckWriteRange(uint64_t offset, uint64_t length) {
  constexpr uint64_t kAllocation = 4096;
  if (RangeWithin(offset, length, kAllocation) &&
      (offset > kAllocation || offset + length > kAllocation)) {
    Finding("RangeWithin accepted a range past the allocation");
  }
}

void CheckLocalRequest(const v1::LocalRequest& req) {
  switch (req.body_case()) {
    case v1::LocalRequest::kRegisterInstance:
      return CheckInstanceSpec(req.register_instance().spec());
    default:
      return;
  }
}

}  // namespace isometry::fuzz
