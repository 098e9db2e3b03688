// Proto <-> domain translation at the service boundary (daemon/server/
// convert.h): what a client sends becomes the domain value it meant, or an
// INVALID_ARGUMENT naming the field; what the daemon reports reaches the
// client unchanged.
#include "daemon/server/convert.h"

#include <catch2/catch.hpp>
#include <string>

namespace isometry {
namespace ISOMETRY_TEST_FILE {
namespace {

v1::Box ProtoBox(std::initializer_list<int64_t> lo, std::initializer_list<int64_t> hi) {
  v1::Box b;
  for (int64_t v : lo) b.add_lo(v);
  for (int64_t v : hi) b.add_hi(v);
  return b;
}

TEST_CASE("a box round-trips through the proto") {
  Box box;
  box.dims = 3;
  box.lo = {-5, 0, 7, 0};
  box.hi = {5, 100, 8, 0};
  v1::Box proto;
  ToProto(box, &proto);
  CHECK(proto.lo_size() == 3);
  CHECK(proto.hi_size() == 3);
  auto back = BoxFromProto(proto, "copy box");
  REQUIRE(back.ok());
  CHECK(*back == box);
  // ToProto replaces what was there.
  ToProto(Box::FromExtents({4}), &proto);
  CHECK(proto.lo_size() == 1);
}

TEST_CASE("a malformed box is refused naming the field") {
  auto mismatched = BoxFromProto(ProtoBox({0, 0}, {4}), "copy box");
  REQUIRE_FALSE(mismatched.ok());
  CHECK(mismatched.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(mismatched.status().message() == "copy box: lo has 2 values but hi has 1");

  auto none = BoxFromProto(ProtoBox({}, {}), "instance bounds");
  REQUIRE_FALSE(none.ok());
  CHECK(none.status().message() ==
        StrCat("instance bounds: 0 dimensions; between 1 and ", kMaxDims, " are supported"));
  auto too_many = BoxFromProto(ProtoBox({0, 0, 0, 0, 0}, {1, 1, 1, 1, 1}), "instance bounds");
  REQUIRE_FALSE(too_many.ok());
  CHECK(too_many.status().message() ==
        StrCat("instance bounds: 5 dimensions; between 1 and ", kMaxDims, " are supported"));

  auto inverted = BoxFromProto(ProtoBox({10}, {2}), "copy box");
  REQUIRE_FALSE(inverted.ok());
  CHECK(inverted.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(inverted.status().message().find("copy box: ") == 0);

  auto huge = BoxFromProto(ProtoBox({0}, {INT64_MAX}), "copy box");
  REQUIRE_FALSE(huge.ok());
  CHECK(huge.status().code() == absl::StatusCode::kInvalidArgument);
}

TEST_CASE("an instance spec round-trips: bounds, fields in order, layout") {
  const InstanceShape shape{Box::FromExtents({8, 4}),
                            *FieldSpace::Make({{"a", 4}, {"bb", 8}, {"c", 1}}),
                            *Layout::Parse("x_in=2,F,y,x_out", 2)};
  v1::InstanceSpec spec;
  spec.set_allocation(12);
  spec.set_offset(4096);
  spec.set_memory("dsk0");
  spec.set_file("data/x.bin");
  ToProto(shape, &spec);
  CHECK(spec.layout() == shape.layout.ToString());
  REQUIRE(spec.fields_size() == 3);
  CHECK(spec.fields(1).name() == "bb");
  CHECK(spec.fields(1).size() == 8);

  auto back = InstanceSpecFromProto(spec);
  REQUIRE(back.ok());
  CHECK(back->allocation == 12);
  CHECK(back->offset == 4096);
  CHECK(back->memory == "dsk0");
  CHECK(back->file == "data/x.bin");
  CHECK(back->shape.bounds == shape.bounds);
  CHECK(back->shape.fields == shape.fields);
  CHECK(back->shape.layout == shape.layout);
}

TEST_CASE("a bad instance spec is refused naming what is wrong") {
  v1::InstanceSpec spec;
  ToProto(InstanceShape{Box::FromExtents({8}), FieldSpace::Uniform(1, 4), Layout::Aos(1)}, &spec);
  REQUIRE(InstanceSpecFromProto(spec).ok());

  SECTION("no bounds") {
    spec.clear_bounds();
    auto r = InstanceSpecFromProto(spec);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().message().find("instance bounds: ") == 0);
  }
  SECTION("a field named twice") {
    spec.add_fields()->CopyFrom(spec.fields(0));
    auto r = InstanceSpecFromProto(spec);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK(r.status().message() ==
          StrCat("field space: field '", spec.fields(0).name(), "' appears twice"));
  }
  SECTION("no fields") {
    spec.clear_fields();
    auto r = InstanceSpecFromProto(spec);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().message() == "field space: no fields");
  }
  SECTION("a layout for other dimensions") {
    spec.set_layout("F,y,x");
    auto r = InstanceSpecFromProto(spec);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == absl::StatusCode::kInvalidArgument);
  }
  SECTION("more fields than a request may name") {
    spec.clear_fields();
    for (int i = 0; i < 4097; ++i) {
      v1::Field* f = spec.add_fields();
      f->set_name(StrCat("f", i));
      f->set_size(1);
    }
    auto r = InstanceSpecFromProto(spec);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().message() == "field space: 4097 fields; at most 4096");
  }
}

TEST_CASE("a copy request becomes the copy it asks for") {
  v1::CopyRequest req;
  req.set_src_instance(3);
  req.set_dst_instance(4);
  req.set_priority(-2);
  auto plain = CopySpecFromProto(req);
  REQUIRE(plain.ok());
  CHECK(plain->src_instance == 3);
  CHECK(plain->dst_instance == 4);
  CHECK(plain->options.priority == -2);
  CHECK_FALSE(plain->box.has_value());  // absent: the whole source
  CHECK(plain->options.durable);        // sync unless asked not to
  CHECK(plain->via.empty());

  req.set_no_sync(true);
  *req.mutable_box() = ProtoBox({1}, {5});
  v1::Hop* h = req.add_via();
  h->set_memory("sys0");
  h->set_layout("x,F");
  auto full = CopySpecFromProto(req);
  REQUIRE(full.ok());
  CHECK_FALSE(full->options.durable);
  REQUIRE(full->box.has_value());
  CHECK(full->box->lo[0] == 1);
  CHECK(full->box->hi[0] == 5);
  REQUIRE(full->via.size() == 1);
  CHECK(full->via[0].memory == "sys0");
  CHECK(full->via[0].layout == "x,F");

  *req.mutable_box() = ProtoBox({1, 2}, {5});
  auto bad_box = CopySpecFromProto(req);
  REQUIRE_FALSE(bad_box.ok());
  CHECK(bad_box.status().message() == "copy box: lo has 2 values but hi has 1");

  req.clear_box();
  for (int i = 0; i < 8; ++i) req.add_via()->set_memory("sys0");
  auto too_many_hops = CopySpecFromProto(req);
  REQUIRE_FALSE(too_many_hops.ok());
  CHECK(too_many_hops.status().message() == "copy: 9 forced hops; at most 8");
}

TEST_CASE("a transfer report reaches the client unchanged, its status as code and message") {
  TransferReport r;
  r.id = 17;
  r.state = "failed";
  r.status = absl::NotFoundError("instance 3 is gone");
  r.priority = 5;
  r.bytes = 1 << 20;
  r.elapsed_s = 0.25;
  r.path = "SYS -> DSK";
  r.owner = {.session = 9, .client = "bench", .uid = 1000, .pid = 4242};
  r.hops.push_back({.src_memory = "sys0",
                    .dst_memory = "dsk0",
                    .channel = "disk_write0",
                    .src_layout = "F,x",
                    .dst_layout = "x,F",
                    .chunks_done = 2,
                    .chunks_total = 3});
  v1::TransferInfo out;
  ToProto(r, &out);
  CHECK(out.id() == 17);
  CHECK(out.state() == "failed");
  CHECK(out.code() == static_cast<int>(absl::StatusCode::kNotFound));
  CHECK(out.message() == "instance 3 is gone");
  CHECK(out.priority() == 5);
  CHECK(out.bytes() == 1 << 20);
  CHECK(out.elapsed_s() == 0.25);
  CHECK(out.path() == "SYS -> DSK");
  CHECK(out.owner().session_id() == 9);
  CHECK(out.owner().client_name() == "bench");
  CHECK(out.owner().uid() == 1000);
  CHECK(out.owner().pid() == 4242);
  REQUIRE(out.hops_size() == 1);
  CHECK(out.hops(0).channel() == "disk_write0");
  CHECK(out.hops(0).dst_layout() == "x,F");
  CHECK(out.hops(0).chunks_done() == 2);
  CHECK(out.hops(0).chunks_total() == 3);

  r.status = OkStatus();
  r.state = "done";
  v1::TransferInfo done;
  ToProto(r, &done);
  CHECK(done.code() == 0);
  CHECK(done.message().empty());
}

TEST_CASE("a plan report keeps the path's and each hop's figures") {
  PlanReport r;
  r.algorithm = "full";
  r.text = "sys0 -> sys0";
  r.predicted_bytes_per_s = 2.5e9;
  r.chunks = 8;
  r.chunk_bytes = 4 << 20;
  r.hops.push_back({.src_memory = "sys0",
                    .dst_memory = "sys0",
                    .channel = "memcpy0",
                    .src_layout = "F,y,x",
                    .dst_layout = "y,x,F",
                    .request_bytes = 4 << 20,
                    .buffer_bytes = 0,
                    .predicted_bytes_per_s = 2.5e9});
  v1::ExplainPlanResponse out;
  ToProto(r, &out);
  CHECK(out.algorithm() == "full");
  CHECK(out.text() == "sys0 -> sys0");
  CHECK(out.predicted_bytes_per_s() == 2.5e9);
  CHECK(out.chunks() == 8);
  CHECK(out.chunk_bytes() == 4 << 20);
  REQUIRE(out.hops_size() == 1);
  CHECK(out.hops(0).src_layout() == "F,y,x");
  CHECK(out.hops(0).request_bytes() == 4 << 20);
  CHECK(out.hops(0).predicted_bytes_per_s() == 2.5e9);
}

TEST_CASE("calibration samples keep their channel and order") {
  Calibration cal;
  cal["memcpy0"] = {{1, 1e8}, {4096, 5e9}};
  cal["disk_read0"] = {{4096, 1e9}};
  v1::CalibrateResponse out;
  ToProto(cal, &out);
  REQUIRE(out.channels_size() == 2);
  for (const v1::ChannelCalibration& c : out.channels()) {
    const std::vector<RateSample>& want = cal.at(c.channel());
    REQUIRE(c.samples_size() == static_cast<int>(want.size()));
    for (int i = 0; i < c.samples_size(); ++i) {
      CHECK(c.samples(i).request_bytes() == want[static_cast<size_t>(i)].request_bytes);
      CHECK(c.samples(i).bytes_per_s() == want[static_cast<size_t>(i)].bytes_per_s);
    }
  }
}

TEST_CASE("a domain status becomes the same gRPC code and message") {
  CHECK(ToGrpc(OkStatus()).ok());
  for (const Status& s :
       {absl::InvalidArgumentError("bad box"), absl::NotFoundError("no instance 3"),
        absl::PermissionDeniedError("not yours"), absl::ResourceExhaustedError("quota"),
        absl::UnavailableError("peer b is down"), absl::CancelledError("cancelled")}) {
    const grpc::Status g = ToGrpc(s);
    CHECK(static_cast<int>(g.error_code()) == static_cast<int>(s.code()));
    CHECK(g.error_message() == s.message());
  }
}

}  // namespace
}  // namespace ISOMETRY_TEST_FILE
}  // namespace isometry
