#include "daemon/server/reflection_v1.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/descriptor.pb.h>

#include <set>

#include "reflection_v1.grpc.pb.h"

namespace isometry {

namespace {

namespace refl = grpc::reflection::v1;
using google::protobuf::DescriptorPool;
using google::protobuf::FileDescriptor;

// google.rpc.Code values the protocol carries in ErrorResponse.
constexpr int32_t kNotFound = 5;
constexpr int32_t kInvalidArgument = 3;

class ReflectionService final : public refl::ServerReflection::Service, public ReflectionV1 {
 public:
  explicit ReflectionService(std::vector<std::string> services) : services_(std::move(services)) {
    services_.push_back("grpc.reflection.v1.ServerReflection");
    services_.push_back("grpc.reflection.v1alpha.ServerReflection");
  }

  grpc::Service* service() override { return this; }

  grpc::Status ServerReflectionInfo(
      grpc::ServerContext*,
      grpc::ServerReaderWriter<refl::ServerReflectionResponse, refl::ServerReflectionRequest>*
          stream) override {
    refl::ServerReflectionRequest req;
    while (stream->Read(&req)) {
      if (!stream->Write(Answer(req))) break;
    }
    return grpc::Status::OK;
  }

 private:
  refl::ServerReflectionResponse Answer(const refl::ServerReflectionRequest& req) const {
    refl::ServerReflectionResponse resp;
    resp.set_valid_host(req.host());
    *resp.mutable_original_request() = req;
    const DescriptorPool* pool = DescriptorPool::generated_pool();
    switch (req.message_request_case()) {
      case refl::ServerReflectionRequest::kFileByFilename:
        Files(pool->FindFileByName(req.file_by_filename()), "file " + req.file_by_filename(), resp);
        break;
      case refl::ServerReflectionRequest::kFileContainingSymbol:
        Files(pool->FindFileContainingSymbol(req.file_containing_symbol()),
              "symbol " + req.file_containing_symbol(), resp);
        break;
      case refl::ServerReflectionRequest::kFileContainingExtension: {
        const refl::ExtensionRequest& e = req.file_containing_extension();
        const auto* type = pool->FindMessageTypeByName(e.containing_type());
        const auto* ext = type ? pool->FindExtensionByNumber(type, e.extension_number()) : nullptr;
        Files(ext ? ext->file() : nullptr,
              "extension " + std::to_string(e.extension_number()) + " of " + e.containing_type(),
              resp);
        break;
      }
      case refl::ServerReflectionRequest::kAllExtensionNumbersOfType: {
        const auto* type = pool->FindMessageTypeByName(req.all_extension_numbers_of_type());
        if (!type) {
          Error(kNotFound, "type " + req.all_extension_numbers_of_type() + " not found", resp);
          break;
        }
        std::vector<const google::protobuf::FieldDescriptor*> exts;
        pool->FindAllExtensions(type, &exts);
        auto* out = resp.mutable_all_extension_numbers_response();
        out->set_base_type_name(type->full_name());
        for (const auto* f : exts) out->add_extension_number(f->number());
        break;
      }
      case refl::ServerReflectionRequest::kListServices:
        for (const std::string& s : services_) {
          resp.mutable_list_services_response()->add_service()->set_name(s);
        }
        break;
      default:
        Error(kInvalidArgument, "empty or unknown message_request", resp);
    }
    return resp;
  }

  // `file` and every file it imports, transitively, each once: a client
  // can build the descriptors from this one response.
  static void Files(const FileDescriptor* file, const std::string& what,
                    refl::ServerReflectionResponse& resp) {
    if (!file) {
      Error(kNotFound, what + " not found", resp);
      return;
    }
    auto* out = resp.mutable_file_descriptor_response();
    std::set<const FileDescriptor*> seen{file};
    std::vector<const FileDescriptor*> pending{file};
    while (!pending.empty()) {
      const FileDescriptor* f = pending.back();
      pending.pop_back();
      google::protobuf::FileDescriptorProto proto;
      f->CopyTo(&proto);
      proto.SerializeToString(out->add_file_descriptor_proto());
      for (int i = 0; i < f->dependency_count(); ++i) {
        if (seen.insert(f->dependency(i)).second) pending.push_back(f->dependency(i));
      }
    }
  }

  static void Error(int32_t code, const std::string& message,
                    refl::ServerReflectionResponse& resp) {
    resp.mutable_error_response()->set_error_code(code);
    resp.mutable_error_response()->set_error_message(message);
  }

  std::vector<std::string> services_;  // constant after construction
};

}  // namespace

std::unique_ptr<ReflectionV1> ReflectionV1::Make(std::vector<std::string> services) {
  return std::make_unique<ReflectionService>(std::move(services));
}

}  // namespace isometry
