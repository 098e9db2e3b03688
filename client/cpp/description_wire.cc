#include "client/cpp/description_wire.h"

#include "isometry.pb.h"
#include "proto/datatype_wire.h"

namespace isometry::client {
namespace {

void BoundsAndFields(const InstanceShape& shape, v1::Box* bounds,
                     google::protobuf::RepeatedPtrField<v1::Field>* fields) {
  for (int d = 0; d < shape.bounds.dims; ++d) {
    bounds->add_lo(shape.bounds.lo[d]);
    bounds->add_hi(shape.bounds.hi[d]);
  }
  for (const Field& f : shape.fields.fields()) {
    v1::Field* pf = fields->Add();
    pf->set_name(f.name);
    pf->set_size(f.size);
  }
}

bool SameSpace(const InstanceShape& a, const InstanceShape& b) {
  return a.bounds == b.bounds && a.fields == b.fields;
}

}  // namespace

void DescribeTo(const Description& what, v1::InstanceSpec* spec) {
  if (const auto* shape = std::get_if<InstanceShape>(&what)) {
    BoundsAndFields(*shape, spec->mutable_bounds(), spec->mutable_fields());
    spec->set_layout(shape->layout.ToString());
    return;
  }
  const Elements& e = std::get<Elements>(what);
  if (e.handle != 0) {
    spec->mutable_datatype()->set_registered(e.handle);
  } else {
    wire::DatatypeToProto(e.type, spec->mutable_datatype());
  }
  spec->set_count(e.count);
}

Status DescribeEnds(const Description& src, const Description& dst, v1::ExplainPlanRequest* req) {
  const auto* src_shape = std::get_if<InstanceShape>(&src);
  const auto* dst_shape = std::get_if<InstanceShape>(&dst);
  if (src_shape != nullptr && dst_shape != nullptr && !SameSpace(*src_shape, *dst_shape)) {
    return InvalidArgument(
        "explain: the two layout ends describe different bounds or fields (a copy moves one "
        "index space; only the layouts may differ)");
  }
  if (const InstanceShape* shape = src_shape != nullptr ? src_shape : dst_shape) {
    BoundsAndFields(*shape, req->mutable_bounds(), req->mutable_fields());
  }
  if (src_shape != nullptr) {
    req->set_src_layout(src_shape->layout.ToString());
  } else {
    const Elements& e = std::get<Elements>(src);
    wire::DatatypeToProto(e.type, req->mutable_src_datatype());
    req->set_src_count(e.count);
  }
  if (dst_shape != nullptr) {
    req->set_dst_layout(dst_shape->layout.ToString());
  } else {
    const Elements& e = std::get<Elements>(dst);
    wire::DatatypeToProto(e.type, req->mutable_dst_datatype());
    req->set_dst_count(e.count);
  }
  return OkStatus();
}

}  // namespace isometry::client
