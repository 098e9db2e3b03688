// --json output: protobuf's own JSON mapping of the daemon's responses
// (proto field names, every primitive field printed even when zero).
// 64-bit integers are JSON strings, as the proto3 JSON mapping requires.
#pragma once

#include <google/protobuf/message.h>

#include <string>

#include "core/status.h"

namespace isometry::isoctl {

enum class JsonStyle {
  kPretty,  // indented, for one document per command
  kLine,    // one line, for streams of documents (JSON Lines)
};

Result<std::string> ToJson(const google::protobuf::Message& message, JsonStyle style);

// Prints the message to stdout followed by a newline.
Status PrintJson(const google::protobuf::Message& message, JsonStyle style = JsonStyle::kPretty);

}  // namespace isometry::isoctl
