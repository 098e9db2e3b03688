// Client-side helpers shared by the integration tests and the worker
// processes they start.
#pragma once

#include <cstring>
#include <stdexcept>
#include <vector>

#include "client/cpp/isometry_client.h"
#include "unit/test_util.h"

namespace isometry::testing {

using client::Allocation;
using client::Client;

inline std::unique_ptr<Client> ConnectTo(const std::string& socket, const std::string& name) {
  auto c = Client::Connect({.local_socket = socket, .name = name});
  if (!c.ok()) throw std::runtime_error(c.status().ToString());
  return *std::move(c);
}

// Allocates, fills and registers one instance; keeps a copy of its bytes.
struct Placed {
  Allocation alloc;
  client::Instance inst;
  InstanceShape shape;
  std::vector<std::byte> before;
};

inline Placed Place(Client& c, const InstanceShape& shape, uint64_t seed) {
  auto a = c.Allocate("sys0", shape.total_bytes());
  if (!a.ok()) throw std::runtime_error(a.status().ToString());
  auto bytes = Pattern(shape.total_bytes(), seed);
  std::memcpy(a->data(), bytes.data(), bytes.size());
  auto i = c.Register(*a, 0, shape);
  if (!i.ok()) throw std::runtime_error(i.status().ToString());
  return {*std::move(a), *std::move(i), shape, bytes};
}

inline std::vector<std::byte> Bytes(const Allocation& a, uint64_t n) {
  return std::vector<std::byte>(a.data(), a.data() + n);
}

}  // namespace isometry::testing
