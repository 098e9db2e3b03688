// proto/datatype_wire: every constructor survives the trip through the
// wire message (same bounds, same packed bytes), and hostile messages
// (too deep, unknown enums, missing old types, oversized lists, bad
// arguments) are refused with the path to the bad node.
#include "proto/datatype_wire.h"

#include <catch2/catch.hpp>
#include <vector>

namespace ISOMETRY_TEST_FILE {

using namespace isometry;

namespace {

const Datatype kInt = Datatype::Basic(BasicType::kInt32);
const Datatype kDouble = Datatype::Basic(BasicType::kDouble);

Datatype Ok(Result<Datatype> r) {
  INFO(r.status().ToString());
  REQUIRE(r.ok());
  return *std::move(r);
}

// Same bounds and the same segments for two elements.
void CheckSame(const Datatype& a, const Datatype& b) {
  INFO(a.ToString() << " vs " << b.ToString());
  CHECK(a.size() == b.size());
  CHECK(a.lb() == b.lb());
  CHECK(a.extent() == b.extent());
  CHECK(a.true_lb() == b.true_lb());
  CHECK(a.true_extent() == b.true_extent());
  CHECK(*Segments(a, 2, 1 << 16) == *Segments(b, 2, 1 << 16));
  CHECK(a.ToString() == b.ToString());
}

Datatype RoundTrip(const Datatype& t) {
  v1::Datatype m;
  wire::DatatypeToProto(t, &m);
  // Through the bytes too, as a client would send it.
  v1::Datatype parsed;
  REQUIRE(parsed.ParseFromString(m.SerializeAsString()));
  return Ok(wire::DatatypeFromProto(parsed));
}

std::vector<Datatype> EveryConstructor() {
  const std::vector<int64_t> lens{2, 0, 1}, disps{4, 9, -3}, bytes{0, 24, -16};
  const Datatype vec = Ok(Datatype::Vector(3, 2, 5, kInt));
  const Datatype types[] = {kInt, vec, kDouble};
  const std::vector<int64_t> sizes{6, 5}, subsizes{2, 3}, starts{1, 2};
  const std::vector<int64_t> gsizes{8, 9}, dargs{kDefaultDarg, 2}, psizes{2, 2};
  const std::vector<Distribution> distribs{Distribution::kBlock, Distribution::kCyclic};
  return {
      kInt,
      Datatype::Basic(BasicType::kLongDouble),
      Ok(Datatype::Contiguous(4, kDouble)),
      vec,
      Ok(Datatype::Hvector(3, 1, -20, vec)),
      Ok(Datatype::Vector(2, 1, 3, Ok(Datatype::Resized(kInt, 0, 6)))),  // 6 B extent, in elements
      Ok(Datatype::Indexed(lens, disps, kDouble)),
      Ok(Datatype::Hindexed(lens, bytes, vec)),
      Ok(Datatype::IndexedBlock(2, disps, kInt)),
      Ok(Datatype::HindexedBlock(1, bytes, kDouble)),
      Ok(Datatype::Struct(lens, bytes, types)),
      Ok(Datatype::Resized(vec, -8, 100)),
      Ok(Datatype::Subarray(sizes, subsizes, starts, ArrayOrder::kC, kInt)),
      Ok(Datatype::Subarray(sizes, subsizes, starts, ArrayOrder::kFortran, vec)),
      Ok(Datatype::Darray(4, 3, gsizes, distribs, dargs, psizes, ArrayOrder::kC, kDouble)),
      Ok(Datatype::Darray(4, 1, gsizes, distribs, dargs, psizes, ArrayOrder::kFortran, kInt)),
      Ok(Datatype::Contiguous(0, kInt)),  // the empty type keeps its arguments
  };
}

// A message nested `levels` deep: contiguous(1, contiguous(1, ... int)).
v1::Datatype Nested(int levels) {
  v1::Datatype root;
  v1::Datatype* at = &root;
  for (int i = 0; i < levels; ++i) {
    at->mutable_contiguous()->set_count(1);
    at = at->mutable_contiguous()->mutable_old();
  }
  at->set_basic(v1::BASIC_INT32);
  return root;
}

std::string ErrorOf(const v1::Datatype& m, const wire::RegisteredDatatypes& reg = {}) {
  auto r = wire::DatatypeFromProto(m, reg);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() != absl::StatusCode::kOk);
  return std::string(r.status().message());
}

}  // namespace

TEST_CASE("datatype wire: every constructor round-trips with the same bounds and bytes") {
  for (const Datatype& t : EveryConstructor()) CheckSame(t, RoundTrip(t));
  // In elements where written so; bytes where the stride does not divide.
  v1::Datatype m;
  wire::DatatypeToProto(Ok(Datatype::Vector(3, 2, 5, kInt)), &m);
  CHECK(m.has_vector());
  CHECK(m.vector().stride() == 5);
  wire::DatatypeToProto(Ok(Datatype::Hvector(3, 2, 6, kInt)), &m);
  CHECK(m.has_hvector());
}

TEST_CASE("datatype wire: hostile messages are refused with the path to the node") {
  CHECK(ErrorOf(v1::Datatype{}).find("no type set") != std::string::npos);
  CHECK(wire::DatatypeFromProto(Nested(kMaxDatatypeDepth - 1)).ok());
  CHECK(ErrorOf(Nested(kMaxDatatypeDepth + 5)).find("nested more than") != std::string::npos);
  // Far deeper than the stack could take if it recursed on.
  CHECK(ErrorOf(Nested(5000)).find("nested more than") != std::string::npos);

  v1::Datatype m;
  m.set_basic(static_cast<v1::BasicType>(99));
  CHECK(ErrorOf(m).find("unknown basic type") != std::string::npos);

  m.mutable_vector()->set_count(2);
  CHECK(ErrorOf(m) == "datatype.vector.old: missing");
  m.mutable_vector()->mutable_old()->set_basic(v1::BASIC_INT8);
  m.mutable_vector()->set_count(-1);
  CHECK(ErrorOf(m).find("count") != std::string::npos);

  v1::Datatype d;
  auto* dar = d.mutable_darray();
  dar->set_size(1);
  dar->add_gsizes(4);
  dar->add_distribs(static_cast<v1::Distribution>(7));
  dar->add_dargs(-1);
  dar->add_psizes(1);
  dar->mutable_old()->set_basic(v1::BASIC_INT8);
  CHECK(ErrorOf(d).find("unknown distribution") != std::string::npos);

  v1::Datatype big;
  auto* ib = big.mutable_indexed_block();
  ib->set_blocklength(1);
  for (int64_t i = 0; i <= kMaxDatatypeWeight; ++i) ib->add_displacements(i);
  ib->mutable_old()->set_basic(v1::BASIC_INT8);
  CHECK(ErrorOf(big).find("entries (at most") != std::string::npos);

  v1::Datatype st;
  st.mutable_struct_type()->add_blocklengths(1);
  st.mutable_struct_type()->add_displacements(0);
  st.mutable_struct_type()->add_types();  // an entry with no type
  CHECK(ErrorOf(st).find("datatype.struct_type.types[0]") != std::string::npos);
}

TEST_CASE("datatype wire: handles resolve only through the caller's table") {
  v1::Datatype m;
  m.mutable_contiguous()->set_count(2);
  m.mutable_contiguous()->mutable_old()->set_registered(7);
  CHECK(ErrorOf(m).find("not accepted here") != std::string::npos);
  const Datatype vec = Ok(Datatype::Vector(3, 2, 5, kInt));
  auto table = [&](uint64_t h) -> Result<Datatype> {
    if (h == 7) return vec;
    return NotFound("no datatype ", h, " in this session");
  };
  CheckSame(Ok(wire::DatatypeFromProto(m, table)), Ok(Datatype::Contiguous(2, vec)));
  m.mutable_contiguous()->mutable_old()->set_registered(8);
  CHECK(ErrorOf(m, table) == "no datatype 8 in this session");
}

}  // namespace ISOMETRY_TEST_FILE
