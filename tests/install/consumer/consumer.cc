// A user's program, built outside the tree against an installed isometry:
// converts an array of structs into a struct of arrays through the local
// daemon, checks every byte, and asks the Inspector which channel moved it.
//   consumer LOCAL_SOCKET GRPC_SOCKET
// Prints "ok: <bytes> bytes via <channel>" and exits 0, or says what failed.
#include <cstdio>
#include <cstring>
#include <string>

#include "client/cpp/active_access.h"
#include "client/cpp/inspector.h"
#include "client/cpp/isometry_client.h"

using namespace isometry;

namespace {
int Fail(const std::string& what, const Status& s) {
  std::fprintf(stderr, "%s: %s\n", what.c_str(), s.ToString().c_str());
  return 1;
}
}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: consumer LOCAL_SOCKET GRPC_SOCKET\n");
    return 2;
  }
  auto client = client::Client::Connect({.local_socket = argv[1], .name = "consumer"});
  if (!client.ok()) {
    return Fail("connect", client.status());
  }
  const FieldSpace fields = *FieldSpace::Make({{"id", 4}, {"mass", 8}});
  const int32_t n = 50000;
  const InstanceShape aos{Box::FromExtents({n}), fields, Layout::Aos(1)};
  const InstanceShape soa{aos.bounds, fields, Layout::Soa(1)};
  auto src = (*client)->Allocate("sys0", aos.total_bytes());
  auto dst = (*client)->Allocate("sys0", soa.total_bytes());
  if (!src.ok() || !dst.ok()) {
    return Fail("allocate", src.ok() ? dst.status() : src.status());
  }
  for (int32_t i = 0; i < n; ++i) {
    std::memcpy(src->data() + aos.OffsetOf(0, {i}), &i, 4);
  }
  auto a = (*client)->Register(*src, 0, aos);
  auto b = (*client)->Register(*dst, 0, soa);
  if (!a.ok() || !b.ok()) {
    return Fail("register", a.ok() ? b.status() : a.status());
  }
  const client::Completion done = (*client)->Copy(*a, *b);
  if (!done.status.ok()) {
    return Fail("copy", done.status);
  }
  for (int32_t i = 0; i < n; ++i) {
    int32_t id = 0;
    std::memcpy(&id, dst->data() + soa.OffsetOf(0, {i}), 4);
    if (id != i) {
      std::fprintf(stderr, "wrong id at %d: %d\n", i, id);
      return 1;
    }
  }
  auto inspector = client::Inspector::Connect({.grpc_socket = argv[2]});
  if (!inspector.ok()) {
    return Fail("inspector", inspector.status());
  }
  auto plan =
      (*inspector)->Explain({.src_memory = "sys0", .dst_memory = "sys0", .src = aos, .dst = soa});
  if (!plan.ok() || plan->hops.empty()) {
    return Fail("explain", plan.status());
  }
  std::printf("ok: %llu bytes via %s\n", static_cast<unsigned long long>(soa.total_bytes()),
              plan->hops.front().channel.c_str());
  return 0;
}
