// What datatype copies must leave behind, for tests against a real
// daemon: MPI_Unpack(MPI_Pack(source)) by core's Pack/Unpack, which
// tests/unit/datatype_mpi_test holds to MPICH's.
#pragma once

#include <catch2/catch.hpp>
#include <cstdint>
#include <utility>
#include <vector>

#include "client/cpp/isometry_client.h"
#include "core/datatype.h"
#include "core/status.h"

namespace isometry::testing {

// The daemon config both datatype tests start from: a pool, memcpy and cma.
inline constexpr char kDatatypeChannels[] = R"(
[[memory]]
name = "sys0"
pool = "256MiB"
client_quota = "256MiB"
[[channel]]
name = "memcpy0"
[[channel]]
name = "cma0"
kind = "cma"
)";

inline Datatype Ok(Result<Datatype> r) {
  REQUIRE(r.ok());
  return *std::move(r);
}

inline std::vector<uint8_t> AsBytes(const std::vector<std::byte>& v) {
  const auto* p = reinterpret_cast<const uint8_t*>(v.data());
  return {p, p + v.size()};
}

// This process's memory registered with a session as a private range:
// `bytes` of a pattern.
struct Mine {
  std::vector<uint8_t> bytes;
  client::PrivateRange range;
};

inline Mine RegisterMine(client::Client& c, size_t n, uint64_t seed) {
  std::vector<uint8_t> b = AsBytes(Pattern(n, seed));
  auto r = c.RegisterPrivate(b.data(), b.size());
  REQUIRE(r.ok());
  return {std::move(b), *r};
}

// MPI_Unpack(MPI_Pack(src)) into a copy of dst: the expected destination.
inline std::vector<uint8_t> Expected(const std::vector<uint8_t>& src, int64_t src_origin,
                                     const Datatype& st, int64_t sc, std::vector<uint8_t> dst,
                                     int64_t dst_origin, const Datatype& dt, int64_t dc) {
  std::vector<uint8_t> packed(static_cast<size_t>(st.size() * sc));
  REQUIRE(Pack(src, src_origin, st, sc, packed).ok());
  REQUIRE(Unpack(packed, dt, dc, dst, dst_origin).ok());
  return dst;
}

}  // namespace isometry::testing
