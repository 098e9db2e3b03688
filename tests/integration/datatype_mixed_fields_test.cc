// Datatype <-> layout copies whose layout side has fields of different
// sizes (issue #50, item 7): SOA over such fields interleaves runs that step
// by each field's own size, which the compiler must loop per field rather
// than list per point. Checked against a real daemon; the reference is
// independent of the compiler: the layout's AOS C-order stream walked point
// by point with InstanceShape::OffsetOf, against core's Pack / Unpack.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstring>
#include <functional>
#include <numeric>

#include "client/cpp/isometry_client.h"
#include "integration/client_helpers.h"
#include "integration/daemon_fixture.h"
#include "integration/datatype_oracle.h"
#include "layout/datatype_form.h"
#include "unit/random_datatype.h"
#include "unit/test_util.h"

namespace ISOMETRY_TEST_FILE {

using namespace isometry;
using namespace isometry::testing;
using client::Elements;

namespace {

const std::string kConfig = std::string("max_datatypes_per_session = 8") + kDatatypeChannels;

// Room for a 64 MiB stream's 224 MiB hvector source beside its layout.
const std::string kLargeConfig = std::string(R"(
max_datatypes_per_session = 8
[[memory]]
name = "sys0"
pool = "640MiB"
client_quota = "640MiB"
[[channel]]
name = "memcpy0"
[[channel]]
name = "cma0"
kind = "cma"
)");

const Datatype kByte = Datatype::Basic(BasicType::kByte);

// The largest copies here: 64 MiB in the Release build. Under ASan's -O0
// the reference walk (OffsetOf per field per point) makes each 64 MiB case
// minutes long, the ASan lane's longest test by far; there they stop at
// 16 MiB, which still passes every old bound (2^20 pieces, 2^21 runs) and
// runs the same chunk-by-chunk code for the memory checks.
#if defined(__SANITIZE_ADDRESS__)
constexpr int64_t kLargestMiB = 16;
#else
constexpr int64_t kLargestMiB = 64;
#endif

InstanceShape Shape1D(int64_t points, const std::vector<int64_t>& sizes, const char* layout) {
  std::vector<Field> fields;
  for (size_t f = 0; f < sizes.size(); ++f) {
    fields.push_back({"f" + std::to_string(f), static_cast<uint32_t>(sizes[f])});
  }
  return {Box::FromExtents({points}), *FieldSpace::Make(fields), *Layout::Parse(layout, 1)};
}

// The layout's packed stream: every point in row-major order, each field
// in field order (the reference for "AOS C order").
std::vector<uint8_t> StreamOf(const InstanceShape& s, const std::vector<uint8_t>& storage) {
  std::vector<uint8_t> out;
  out.reserve(s.bounds.volume() * s.fields.total_bytes());
  std::array<int64_t, kMaxDims> x = s.bounds.lo;
  for (int64_t i = 0; i < static_cast<int64_t>(s.bounds.volume()); ++i) {
    int64_t rest = i;
    for (int d = s.bounds.dims - 1; d >= 0; --d) {
      x[d] = s.bounds.lo[d] + rest % s.bounds.extent(d);
      rest /= s.bounds.extent(d);
    }
    for (size_t f = 0; f < s.fields.size(); ++f) {
      const uint64_t at = s.OffsetOf(f, x);
      const auto n = static_cast<size_t>(s.fields.fields()[f].size);
      out.insert(out.end(), storage.begin() + static_cast<ptrdiff_t>(at),
                 storage.begin() + static_cast<ptrdiff_t>(at + n));
    }
  }
  return out;
}

// `storage` with the layout's stream replaced by `stream`.
std::vector<uint8_t> WithStream(const InstanceShape& s, std::vector<uint8_t> storage,
                                const std::vector<uint8_t>& stream) {
  size_t pos = 0;
  std::array<int64_t, kMaxDims> x = s.bounds.lo;
  for (int64_t i = 0; i < static_cast<int64_t>(s.bounds.volume()); ++i) {
    int64_t rest = i;
    for (int d = s.bounds.dims - 1; d >= 0; --d) {
      x[d] = s.bounds.lo[d] + rest % s.bounds.extent(d);
      rest /= s.bounds.extent(d);
    }
    for (size_t f = 0; f < s.fields.size(); ++f) {
      const auto n = static_cast<size_t>(s.fields.fields()[f].size);
      std::memcpy(storage.data() + s.OffsetOf(f, x), stream.data() + pos, n);
      pos += n;
    }
  }
  return storage;
}

std::vector<uint8_t> Contents(const Allocation& a, size_t n) {
  const auto* p = reinterpret_cast<const uint8_t*>(a.data());
  return {p, p + n};
}

Allocation Holding(Client& c, const std::vector<uint8_t>& bytes) {
  auto a = c.Allocate("sys0", bytes.size());
  REQUIRE(a.ok());
  std::memcpy(a->data(), bytes.data(), bytes.size());
  return *std::move(a);
}

// `type` x `count` over a buffer of `span` pattern bytes -> the layout,
// then the layout -> a zeroed datatype buffer; both checked.
void RoundTrip(Client& c, const Datatype& type, int64_t count, int64_t origin, size_t span,
               const InstanceShape& shape, uint64_t seed) {
  INFO(type.ToString(200) << " x" << count << " <-> layout '" << shape.layout.ToString() << "' "
                          << shape.fields.size() << " fields over " << ToString(shape.bounds));
  Placed lay = Place(c, shape, seed + 1);
  std::vector<uint8_t> packed(static_cast<size_t>(type.size() * count));
  {  // the source freed before the way back (64 MiB cases stay in the pool)
    const std::vector<uint8_t> src_bytes = AsBytes(Pattern(span, seed));
    Allocation src = Holding(c, src_bytes);
    auto si = c.Register(src, static_cast<uint64_t>(origin), Elements{type, count, 0});
    REQUIRE(si.ok());
    const client::Completion in = c.Copy(*si, lay.inst);
    INFO(in.status.ToString());
    REQUIRE(in.status.ok());
    REQUIRE(Pack(src_bytes, origin, type, count, packed).ok());
  }
  const std::vector<uint8_t> want = WithStream(shape, AsBytes(lay.before), packed);
  REQUIRE(AsBytes(Bytes(lay.alloc, shape.total_bytes())) == want);
  CHECK(StreamOf(shape, want) == packed);

  Allocation back = Holding(c, std::vector<uint8_t>(span, 0));
  auto bi = c.Register(back, static_cast<uint64_t>(origin), Elements{type, count, 0});
  REQUIRE(bi.ok());
  const client::Completion out = c.Copy(lay.inst, *bi);
  INFO(out.status.ToString());
  REQUIRE(out.status.ok());
  std::vector<uint8_t> back_want(span, 0);
  REQUIRE(Unpack(packed, type, count, back_want, origin).ok());
  CHECK(Contents(back, span) == back_want);
}

// As RoundTrip, with both ends in this process's memory (private ranges):
// the daemon reads one end into a staging slot and writes the other from
// it, so the layout end runs as a layout program against the slot.
void RoundTripPrivate(Client& c, const Datatype& type, int64_t count, const InstanceShape& shape,
                      uint64_t seed) {
  INFO(type.ToString(200) << " x" << count << " <-> private layout '" << shape.layout.ToString()
                          << "' over " << ToString(shape.bounds));
  const auto span = static_cast<size_t>(type.true_extent() + (count - 1) * type.extent());
  std::vector<uint8_t> src = AsBytes(Pattern(span, seed));
  std::vector<uint8_t> lay = AsBytes(Pattern(shape.total_bytes(), seed + 1));
  const std::vector<uint8_t> before = lay;
  auto sr = c.RegisterPrivate(src.data(), src.size());
  auto lr = c.RegisterPrivate(lay.data(), lay.size());
  REQUIRE((sr.ok() && lr.ok()));
  auto si = c.Register(*sr, static_cast<uint64_t>(-type.true_lb()), Elements{type, count, 0});
  auto li = c.Register(*lr, 0, shape);
  REQUIRE((si.ok() && li.ok()));
  const client::Completion in = c.Copy(*si, *li);
  INFO(in.status.ToString());
  REQUIRE(in.status.ok());
  std::vector<uint8_t> packed(static_cast<size_t>(type.size() * count));
  REQUIRE(Pack(src, -type.true_lb(), type, count, packed).ok());
  REQUIRE(lay == WithStream(shape, before, packed));
  std::fill(src.begin(), src.end(), 0);
  const client::Completion out = c.Copy(*li, *si);
  INFO(out.status.ToString());
  REQUIRE(out.status.ok());
  std::vector<uint8_t> back(span, 0);
  REQUIRE(Unpack(packed, type, count, back, -type.true_lb()).ok());
  CHECK(src == back);
}

// Contiguous elements of a basic type: a dense stream, which runs as a
// layout copy whatever the fields and layout.
Datatype DenseType(RandomDatatypes& gen) {
  static const BasicType kBasics[] = {BasicType::kByte, BasicType::kInt16, BasicType::kInt32,
                                      BasicType::kDouble};
  return Ok(Datatype::Contiguous(gen.Int(1, 5), Datatype::Basic(kBasics[gen.Int(0, 3)])));
}

}  // namespace

TEST_CASE("contiguous bytes <-> SOA with fields of different sizes, past every old bound") {
  Daemon d(kConfig);
  auto c = ConnectTo(d.local_socket(), "mixed-large");
  // 33,000 points needed 66,000 ops; 600,000 made 1.2M form pieces;
  // 1,048,576 made 3M runs to walk; 64 MiB of 8-byte points is the target
  // (kLargestMiB).
  const int64_t largest = kLargestMiB << 17;
  for (const int64_t points : {int64_t{33000}, int64_t{600000}, largest}) {
    for (const auto& sizes : {std::vector<int64_t>{6, 1, 1}, std::vector<int64_t>{4, 2, 2}}) {
      if (points == largest && sizes[0] == 4) continue;  // one largest case
      const InstanceShape shape = Shape1D(points, sizes, "x,F");
      const int64_t n = points * 8;
      RoundTrip(*c, Ok(Datatype::Contiguous(n, kByte)), 1, 0, static_cast<size_t>(n), shape,
                static_cast<uint64_t>(points));
    }
  }
  // Two dimensions: the AOS C-order layout over the bytes is row-major.
  const InstanceShape two{Box::FromExtents({300, 700}),
                          *FieldSpace::Make({{"a", 6}, {"b", 1}, {"c", 1}}), Layout::Soa(2)};
  const int64_t two_bytes = int64_t{300} * 700 * 8;
  RoundTrip(*c, Ok(Datatype::Contiguous(two_bytes, kByte)), 1, 0, static_cast<size_t>(two_bytes),
            two, 3);
  CHECK(d.Stop() == 0);
}

TEST_CASE("strided datatypes <-> SOA with fields of different sizes") {
  Daemon d(kConfig);
  auto c = ConnectTo(d.local_socket(), "mixed-strided");
  // MPI_DOUBLE vector(30000, 1, 2) <-> x,F fields [4, 1] (48,000 points).
  const Datatype vec = Ok(Datatype::Vector(30000, 1, 2, Datatype::Basic(BasicType::kDouble)));
  RoundTrip(*c, vec, 1, 0, static_cast<size_t>(vec.true_extent()), Shape1D(48000, {4, 1}, "x,F"),
            5);
  // struct {int, double, int} hvector(40000, 1, 56) <-> x,F fields [13, 3].
  const Datatype i32 = Datatype::Basic(BasicType::kInt32);
  const std::vector<Datatype> members{i32, Datatype::Basic(BasicType::kDouble), i32};
  const Datatype s =
      Ok(Datatype::Struct(std::vector<int64_t>{1, 1, 1}, std::vector<int64_t>{0, 8, 16}, members));
  const Datatype hv = Ok(Datatype::Hvector(40000, 1, 56, s));
  RoundTrip(*c, hv, 1, 0, static_cast<size_t>(hv.true_extent()), Shape1D(40000, {13, 3}, "x,F"), 6);
  CHECK(d.Stop() == 0);
}

TEST_CASE("strided datatypes <-> SOA of fields of different sizes at 1, 16 and 64 MiB") {
  // The old daemon refused these past a few hundred KB: the layout's form
  // listed 2 pieces a point (2^20 pieces at most) or the program 2 ops a
  // point. The layout end is now described chunk by chunk.
  Daemon d(kLargeConfig);
  auto c = ConnectTo(d.local_socket(), "mixed-strided-large");
  const Datatype dbl = Datatype::Basic(BasicType::kDouble);
  const Datatype i32 = Datatype::Basic(BasicType::kInt32);
  const Datatype s =
      Ok(Datatype::Struct(std::vector<int64_t>{1, 1, 1}, std::vector<int64_t>{0, 8, 16},
                          std::vector<Datatype>{i32, dbl, i32}));
  for (const int64_t mib : {1, 16, 64}) {
    if (mib > kLargestMiB) continue;
    const int64_t bytes = mib << 20;
    // MPI_DOUBLE vector(n, 1, 2) <-> x,F fields [4, 1]: whole 40-byte periods.
    const int64_t points = bytes / 40 * 8;
    const Datatype vec = Ok(Datatype::Vector(points * 5 / 8, 1, 2, dbl));
    const InstanceShape four_one = Shape1D(points, {4, 1}, "x,F");
    RoundTrip(*c, vec, 1, 0, static_cast<size_t>(vec.true_extent()), four_one, 11);
    // struct {int, double, int} hvector(n, 1, 56) <-> x,F fields [13, 3].
    const Datatype hv = Ok(Datatype::Hvector(bytes / 16, 1, 56, s));
    const InstanceShape thirteen_three = Shape1D(bytes / 16, {13, 3}, "x,F");
    RoundTrip(*c, hv, 1, 0, static_cast<size_t>(hv.true_extent()), thirteen_three, 12);
    if (mib != 16) {  // through a staging slot: both ends in this process
      RoundTripPrivate(*c, vec, 1, four_one, 13);
    }
    if (mib == 1) RoundTripPrivate(*c, hv, 1, thirteen_three, 14);
  }
  // A strided type against fields [6, 1, 1], 16 MiB.
  const Datatype vec = Ok(Datatype::Vector(int64_t{2} << 20, 1, 2, dbl));
  RoundTrip(*c, vec, 1, 0, static_cast<size_t>(vec.true_extent()),
            Shape1D(int64_t{2} << 20, {6, 1, 1}, "x,F"), 15);
  CHECK(d.Stop() == 0);
}

TEST_CASE("random strided datatypes <-> SOA of fields of different sizes, 2 to 64 MiB") {
  // Sizes no layout form could list (a few runs a point), through the
  // chunk-by-chunk layout end, checked against Pack/Unpack and the
  // OffsetOf walk. Types whose own form passes the datatype's bounds at
  // that count are skipped (they are refused naming the datatype).
  Daemon d(kLargeConfig);
  auto c = ConnectTo(d.local_socket(), "mixed-random-large");
  RandomDatatypes gen(50007);
  static const char* kLayouts[] = {"x,F", "y,x,F", "x,F,y"};
  const int64_t kTargets[] = {2 << 20, 4 << 20, 64 << 20, 1 << 20, 8 << 20, 2 << 20};
  int ran = 0;
  for (int i = 0; ran < 6 && i < 200; ++i) {
    const Datatype t = gen.Next(2);
    std::vector<int64_t> sizes;
    for (int64_t f = gen.Int(2, 3); f > 0; --f) sizes.push_back(gen.Int(1, 9));
    int64_t point = 0;
    for (int64_t v : sizes) point += v;
    if (t.extent() <= 0 || t.size() <= 0 ||
        std::adjacent_find(sizes.begin(), sizes.end(), std::not_equal_to<>()) == sizes.end()) {
      continue;  // fields of equal sizes are one form; a negative extent needs another origin
    }
    const int64_t unit = std::lcm(t.size(), 2 * point);
    // The source spans at most 128 MiB.
    const int64_t target =
        std::min<int64_t>({kTargets[ran], kLargestMiB << 20,
                           (int64_t{128} << 20) * t.size() / std::max(t.extent(), t.size())});
    const int64_t reps = std::max<int64_t>(1, target / unit);
    const int64_t count = unit / t.size() * reps, points = unit / point * reps;
    if (!DatatypeForm(t, count).ok() || DatatypeForm(t, count)->pieces.size() > 64) continue;
    const ByteSpan span = *SpanOfElements(t, count);
    InstanceShape shape = Shape1D(points, sizes, "x,F");
    if (ran % 3 != 0) {
      shape.bounds = Box::FromExtents({2, points / 2});
      shape.layout = *Layout::Parse(kLayouts[ran % 3], 2);
    }
    RoundTrip(*c, t, count, -span.begin, static_cast<size_t>(span.end - span.begin), shape,
              static_cast<uint64_t>(100 + i));
    ++ran;
  }
  CHECK(ran == 6);
  CHECK(d.Stop() == 0);
}

TEST_CASE("random datatypes <-> layouts with fields of different sizes, verified") {
  Daemon d(kConfig);
  auto c = ConnectTo(d.local_socket(), "mixed-random");
  RandomDatatypes gen(20261202);
  static const char* kLayouts[] = {"x,F", "F,x"};
  for (int i = 0; i < 40; ++i) {
    // Large cases are dense: a strided type whose runs pair with the
    // points only at a period of more than 128 ops is still bounded at
    // 65536 ops a chunk (docs/concepts/datatypes.md, "Canonical forms and datatype copies").
    const Datatype t = i % 4 == 3 ? DenseType(gen) : gen.Next(2);
    std::vector<int64_t> sizes;
    for (int64_t f = gen.Int(2, 4); f > 0; --f) sizes.push_back(gen.Int(1, 9));
    int64_t point = 0;
    for (int64_t s : sizes) point += s;
    // count elements of t fill `points` layout points exactly.
    const int64_t unit = std::lcm(t.size(), point);
    // Every fourth case is a few hundred KB: tens of thousands of points,
    // past what a program listing a point's runs could hold.
    const int64_t target = i % 4 == 3 ? 600000 : 40000;
    const int64_t reps =
        gen.Int(std::max<int64_t>(1, target / unit / 2), std::max<int64_t>(1, target / unit));
    const int64_t count = unit / t.size() * reps, points = unit / point * reps;
    const ByteSpan span = *SpanOfElements(t, count);
    InstanceShape shape = Shape1D(points, sizes, kLayouts[gen.Int(0, 1)]);
    if (points % 2 == 0 && gen.Int(0, 1) == 1) {  // 2-D: SOA, AOS or x fastest
      shape.bounds = Box::FromExtents({2, points / 2});
      static const char* k2D[] = {"y,x,F", "F,y,x", "x,F,y"};
      shape.layout = *Layout::Parse(k2D[gen.Int(0, 2)], 2);
    }
    RoundTrip(*c, t, count, -span.begin, static_cast<size_t>(span.end - span.begin), shape,
              static_cast<uint64_t>(i));
  }
  CHECK(d.Stop() == 0);
}

}  // namespace ISOMETRY_TEST_FILE
