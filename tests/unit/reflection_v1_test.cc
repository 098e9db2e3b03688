// proto/reflection_v1.proto is our own statement of the reflection
// protocol under grpc.reflection.v1. It must be wire-identical to the
// v1alpha one gRPC links (same messages, field numbers, types, oneofs and
// streaming), or clients that speak v1 would misread our answers.
#include <google/protobuf/descriptor.h>
#include <grpcpp/ext/proto_server_reflection_plugin.h>

#include <catch2/catch.hpp>
#include <string>

#include "reflection_v1.pb.h"

namespace ISOMETRY_TEST_FILE {

namespace {

using google::protobuf::Descriptor;
using google::protobuf::DescriptorPool;
using google::protobuf::FieldDescriptor;

std::string Relative(const std::string& full, const std::string& package) {
  return full.substr(0, package.size()) == package ? full.substr(package.size()) : full;
}

void SameMessage(const Descriptor& ours, const Descriptor& theirs) {
  INFO("message " << ours.name());
  REQUIRE(ours.field_count() == theirs.field_count());
  for (int i = 0; i < ours.field_count(); ++i) {
    const FieldDescriptor* a = ours.field(i);
    const FieldDescriptor* b = theirs.FindFieldByNumber(a->number());
    INFO("field " << a->name());
    REQUIRE(b != nullptr);
    CHECK(a->name() == b->name());
    CHECK(a->type() == b->type());
    CHECK(a->is_repeated() == b->is_repeated());
    CHECK((a->containing_oneof() == nullptr) == (b->containing_oneof() == nullptr));
    if (a->containing_oneof() && b->containing_oneof()) {
      CHECK(a->containing_oneof()->name() == b->containing_oneof()->name());
    }
    if (a->message_type()) {
      CHECK(Relative(a->message_type()->full_name(), "grpc.reflection.v1.") ==
            Relative(b->message_type()->full_name(), "grpc.reflection.v1alpha."));
    }
  }
}

}  // namespace

TEST_CASE("reflection v1 is v1alpha under another package") {
  // Loads gRPC's reflection library, whose generated code registers the
  // v1alpha descriptors in the same generated pool as ours.
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  const DescriptorPool* pool = DescriptorPool::generated_pool();
  const auto* ours = grpc::reflection::v1::ServerReflectionRequest::descriptor()->file();
  REQUIRE(ours->package() == "grpc.reflection.v1");
  const auto* alpha_service = pool->FindServiceByName("grpc.reflection.v1alpha.ServerReflection");
  INFO("gRPC's reflection library registers grpc.reflection.v1alpha");
  REQUIRE(alpha_service != nullptr);
  REQUIRE(ours->message_type_count() == alpha_service->file()->message_type_count());
  for (int i = 0; i < ours->message_type_count(); ++i) {
    const Descriptor* m = ours->message_type(i);
    const Descriptor* alpha = pool->FindMessageTypeByName("grpc.reflection.v1alpha." + m->name());
    INFO("message " << m->name());
    REQUIRE(alpha != nullptr);
    SameMessage(*m, *alpha);
  }
  const auto* service = ours->FindServiceByName("ServerReflection");
  REQUIRE(service != nullptr);
  REQUIRE(service->method_count() == alpha_service->method_count());
  const auto* method = service->method(0);
  const auto* alpha_method = alpha_service->FindMethodByName(method->name());
  REQUIRE(alpha_method != nullptr);
  CHECK(method->client_streaming() == alpha_method->client_streaming());
  CHECK(method->server_streaming() == alpha_method->server_streaming());
}

}  // namespace ISOMETRY_TEST_FILE
