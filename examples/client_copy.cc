// A process asks the local isometryd to convert an array of structs into a
// struct of arrays, through pool memory both of them can see.
//   client_copy [LOCAL_SOCKET]   (default: $ISOMETRY_LOCAL_SOCKET or /run/isometry/isometry.sock)
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "client/cpp/isometry_client.h"

using namespace isometry;

int main(int argc, char** argv) {
  const char* env = std::getenv("ISOMETRY_LOCAL_SOCKET");
  const std::string socket = argc > 1 ? argv[1] : env ? env : "/run/isometry/isometry.sock";
  auto client = client::Client::Connect({.local_socket = socket, .name = "client_copy"});
  if (!client.ok()) {
    return std::fprintf(stderr, "%s\n", client.status().ToString().c_str()), 1;
  }

  const FieldSpace fields = *FieldSpace::Make({{"id", 4}, {"mass", 8}});
  const InstanceShape aos{Box::FromExtents({100000}), fields, Layout::Aos(1)};
  const InstanceShape soa{aos.bounds, fields, Layout::Soa(1)};
  auto src = (*client)->Allocate("sys0", aos.total_bytes());  // mapped into this process
  auto dst = (*client)->Allocate("sys0", soa.total_bytes());
  if (!src.ok() || !dst.ok()) {
    return std::fprintf(stderr, "allocation failed\n"), 1;
  }
  for (int32_t i = 0; i < 100000; ++i) {
    std::memcpy(src->data() + aos.OffsetOf(0, {i}), &i, 4);
  }

  auto a = (*client)->Register(*src, 0, aos);  // validated once, used by handle
  auto b = (*client)->Register(*dst, 0, soa);
  if (!a.ok() || !b.ok()) {
    return std::fprintf(stderr, "register failed\n"), 1;
  }
  const client::Completion done = (*client)->Copy(*a, *b);  // through the submission ring
  if (!done.status.ok()) {
    return std::fprintf(stderr, "%s\n", done.status.ToString().c_str()), 1;
  }

  for (int32_t i = 0; i < 100000; ++i) {
    int32_t id;
    std::memcpy(&id, dst->data() + soa.OffsetOf(0, {i}), 4);
    if (id != i) {
      return std::fprintf(stderr, "mismatch at %d\n", i), 1;
    }
  }
  std::printf("transfer %lu: 100000 entries AOS -> SOA through isometryd, all ids match\n",
              static_cast<unsigned long>(done.transfer));
  return 0;
}
