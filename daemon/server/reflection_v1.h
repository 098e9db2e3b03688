// gRPC server reflection, version 1 (grpc.reflection.v1.ServerReflection).
//
// gRPC 1.51's reflection plugin serves only v1alpha; tools that ask for v1
// first (grpcurl, recent grpcio-reflection, Postman) get UNIMPLEMENTED from
// it. This service answers the same protocol under v1 from the same source,
// the descriptors of the protos linked into the daemon, so both versions
// describe one API. See proto/reflection_v1.proto.
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>
#include <vector>

namespace isometry {

// Thread-safe: every stream reads the process's generated descriptor pool
// only. Register service() with one grpc::ServerBuilder; it must outlive
// that server.
class ReflectionV1 {
 public:
  // `services`: what list_services answers besides the two reflection
  // services themselves (the server's own services, fully qualified).
  static std::unique_ptr<ReflectionV1> Make(std::vector<std::string> services);
  virtual ~ReflectionV1() = default;
  virtual grpc::Service* service() = 0;
};

}  // namespace isometry
