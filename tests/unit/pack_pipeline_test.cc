// tools/bench/pack_pipeline: the benchmark's plain pack pipeline moves every
// byte of a type into the other side's runs, whatever the piece size cuts
// (runs split across pieces, more pieces than slots, a short last piece),
// and its messages do not overrun each other.
#include "tools/bench/pack_pipeline.h"

#include <catch2/catch.hpp>
#include <cstddef>
#include <vector>

#include "tools/bench/datatype_kernels.h"

namespace ISOMETRY_TEST_FILE {

using namespace isometry;
using namespace isometry::bench;

std::vector<std::byte> Pattern(int64_t n) {
  std::vector<std::byte> v(static_cast<size_t>(n));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<std::byte>(i * 131 + (i >> 9));
  return v;
}

// What Pack then Unpack leave in a zeroed destination of `k`.
std::vector<std::byte> Expected(const DatatypeKernel& k, const std::vector<std::byte>& src) {
  std::vector<uint8_t> in(src.size()), packed(static_cast<size_t>(k.packed_bytes())),
      out(static_cast<size_t>(k.recv.span));
  for (size_t i = 0; i < src.size(); ++i) in[i] = static_cast<uint8_t>(src[i]);
  REQUIRE(Pack(in, 0, k.send.type, k.send.count, packed).ok());
  REQUIRE(Unpack(packed, k.recv.type, k.recv.count, out, 0).ok());
  std::vector<std::byte> want(out.size());
  for (size_t i = 0; i < out.size(); ++i) want[i] = static_cast<std::byte>(out[i]);
  return want;
}

TEST_CASE("pack pipeline: every kernel's bytes arrive, at any piece size") {
  std::vector<std::string> names = DatatypeKernelNames();
  names.push_back("vector");
  for (const std::string& name : names) {
    auto k = MakeDatatypeKernel(name, 512);
    REQUIRE(k.ok());
    const std::vector<std::byte> src = Pattern(k->send.span);
    const std::vector<std::byte> want = Expected(*k, src);
    // 4 KiB pieces through 3 slots: runs cut at piece ends, the ring
    // wrapped many times; 128 KiB through 16 as the benchmark runs it.
    for (const auto& [piece, slots] : {std::pair<int64_t, int>{4096, 3}, {128 << 10, 16}}) {
      INFO(name << ", pieces of " << piece << " B through " << slots << " slots");
      std::vector<std::byte> dst(static_cast<size_t>(k->recv.span));
      const PackPipeline pipe(src.data(), k->send.type, k->send.count, dst.data(), k->recv.type,
                              k->recv.count, piece, slots);
      CHECK(pipe.Time(3) > 0);
      CHECK(dst == want);
    }
  }
}

}  // namespace ISOMETRY_TEST_FILE
