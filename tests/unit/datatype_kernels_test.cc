// tools/bench/datatype_kernels: the benchmark's kernels are the types
// tools/bench/mpi_datatype.c sends (the packed sizes below are what that
// program reports under MPICH and Open MPI), every byte they touch lies in
// their buffer, and what one side packs the other unpacks into the same
// packed stream.
#include "tools/bench/datatype_kernels.h"

#include <catch2/catch.hpp>
#include <map>
#include <vector>

namespace ISOMETRY_TEST_FILE {

using namespace isometry;
using namespace isometry::bench;

TEST_CASE("datatype kernels: the packed sizes MPI reports, inside their buffers") {
  const std::map<std::string, int64_t> packed = {
      {"wrf_y_vec", 98304},    {"milc_su3_zd", 12288},    {"nas_mg_z", 34848},
      {"specfem3d_oc", 48000}, {"lammps_atomic", 208000}, {"fft2d", 1048576},
  };
  for (const std::string& name : DatatypeKernelNames()) {
    INFO(name);
    auto k = MakeDatatypeKernel(name);
    REQUIRE(k.ok());
    CHECK(k->packed_bytes() == packed.at(name));
    CHECK(k->recv.type.size() * k->recv.count == k->packed_bytes());
    for (const KernelSide* side : {&k->send, &k->recv}) {
      auto span = SpanOfElements(side->type, side->count);
      REQUIRE(span.ok());
      CHECK(span->begin >= 0);
      CHECK(span->end <= side->span);
    }
    // send -> packed -> recv -> packed gives the same stream.
    std::vector<uint8_t> src(static_cast<size_t>(k->send.span)),
        dst(static_cast<size_t>(k->recv.span));
    for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 131 + (i >> 9));
    std::vector<uint8_t> a(static_cast<size_t>(k->packed_bytes())), b(a.size());
    REQUIRE(Pack(src, 0, k->send.type, k->send.count, a).ok());
    REQUIRE(Unpack(a, k->recv.type, k->recv.count, dst, 0).ok());
    REQUIRE(Pack(dst, 0, k->recv.type, k->recv.count, b).ok());
    CHECK(a == b);
  }
  for (int64_t block = 1; block <= (int64_t{2} << 20); block *= 2) {
    auto v = MakeDatatypeKernel("vector", block);
    REQUIRE(v.ok());
    CHECK(v->packed_bytes() == int64_t{2} << 20);
    CHECK(v->send.type.info().max_segments == static_cast<uint64_t>((int64_t{2} << 20) / block));
  }
  CHECK_FALSE(MakeDatatypeKernel("vector", 3).ok());
  CHECK_FALSE(MakeDatatypeKernel("nope").ok());
}

}  // namespace ISOMETRY_TEST_FILE
