// --json output: the daemon's responses as JSON documents that scripts can
// use as they are. Field names are the proto's (snake_case), every scalar
// field is printed even when zero, integers of any width are JSON numbers
// (uint64 counters exact, not strings as in protobuf's own JSON mapping),
// enums are their names, bytes are base64, and only what JSON requires is
// escaped ("<" stays "<"). A message field that is not set is left out.
#pragma once

#include <google/protobuf/message.h>

#include <nlohmann/json.hpp>
#include <string>

#include "core/status.h"

namespace isometry::isoctl {

enum class JsonStyle {
  kPretty,  // indented, for one document per command
  kLine,    // one line, for streams of documents (JSON Lines)
};

using Json = nlohmann::ordered_json;

// The message as a JSON object, fields in the proto's order.
Json ToJsonValue(const google::protobuf::Message& message);

std::string Dump(const Json& value, JsonStyle style);
std::string ToJson(const google::protobuf::Message& message, JsonStyle style);

// Prints the message (or value) to stdout followed by a newline.
Status PrintJson(const google::protobuf::Message& message, JsonStyle style = JsonStyle::kPretty);
Status PrintJson(const Json& value, JsonStyle style);

}  // namespace isometry::isoctl
