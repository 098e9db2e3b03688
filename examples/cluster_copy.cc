// A process asks its local isometryd to copy an array of structs into an
// allocation published on another node, as a struct of arrays. The local
// daemon plans the whole path; the peer runs its half.
//   cluster_copy LOCAL_SOCKET MEMORY ALLOCATION
//   e.g. cluster_copy /run/isometry/isometry.sock node-b:sys0 7
// (ALLOCATION: the id of an allocation published on that node, at least
// 100000 x 12 bytes.)
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "client/cpp/isometry_client.h"

using namespace isometry;

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: cluster_copy LOCAL_SOCKET NODE:MEMORY ALLOCATION\n");
    return 2;
  }
  auto client = client::Client::Connect({.local_socket = argv[1], .name = "cluster_copy"});
  if (!client.ok()) {
    return std::fprintf(stderr, "%s\n", client.status().ToString().c_str()), 1;
  }

  const FieldSpace fields = *FieldSpace::Make({{"id", 4}, {"mass", 8}});
  const InstanceShape aos{Box::FromExtents({100000}), fields, Layout::Aos(1)};
  const InstanceShape soa{aos.bounds, fields, Layout::Soa(1)};
  auto src = (*client)->Allocate("sys0", aos.total_bytes());
  if (!src.ok()) {
    return std::fprintf(stderr, "%s\n", src.status().ToString().c_str()), 1;
  }
  for (int32_t i = 0; i < 100000; ++i) {
    std::memcpy(src->data() + aos.OffsetOf(0, {i}), &i, 4);
  }

  auto a = (*client)->Register(*src, 0, aos);
  auto b = (*client)->RegisterRemote(argv[2], std::strtoull(argv[3], nullptr, 10), 0, soa);
  if (!a.ok() || !b.ok()) {
    const Status& s = a.ok() ? b.status() : a.status();
    return std::fprintf(stderr, "register failed: %s\n", s.ToString().c_str()), 1;
  }
  const client::Completion done = (*client)->Copy(*a, *b);
  if (!done.status.ok()) {
    return std::fprintf(stderr, "%s\n", done.status.ToString().c_str()), 1;
  }
  std::printf("transfer %lu: 100000 entries AOS here -> SOA on %s\n",
              static_cast<unsigned long>(done.transfer), argv[2]);
  return 0;
}
