#include "tools/isoctl/json.h"

#include <google/protobuf/util/json_util.h>

#include <cstdio>

namespace isometry::isoctl {

Result<std::string> ToJson(const google::protobuf::Message& message, JsonStyle style) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  options.add_whitespace = style == JsonStyle::kPretty;
  std::string out;
  const auto status = google::protobuf::util::MessageToJsonString(message, &out, options);
  if (!status.ok()) {
    return Internal("cannot print ", message.GetTypeName(), " as JSON: ", status.ToString());
  }
  // add_whitespace ends the document with a newline; the line form has none.
  while (!out.empty() && out.back() == '\n') {
    out.pop_back();
  }
  return out;
}

Status PrintJson(const google::protobuf::Message& message, JsonStyle style) {
  ISO_ASSIGN_OR_RETURN(std::string text, ToJson(message, style));
  std::printf("%s\n", text.c_str());
  std::fflush(stdout);
  return OkStatus();
}

}  // namespace isometry::isoctl
