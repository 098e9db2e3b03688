#include "tools/isoctl/json.h"

#include <absl/strings/escaping.h>

#include <cstdio>

namespace isometry::isoctl {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

// One value of a field; `index` < 0 for a singular field.
Json FieldValue(const Message& m, const FieldDescriptor* f, int index) {
  const Reflection* r = m.GetReflection();
  const bool rep = index >= 0;
  switch (f->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32:
      return rep ? r->GetRepeatedInt32(m, f, index) : r->GetInt32(m, f);
    case FieldDescriptor::CPPTYPE_INT64:
      return rep ? r->GetRepeatedInt64(m, f, index) : r->GetInt64(m, f);
    case FieldDescriptor::CPPTYPE_UINT32:
      return rep ? r->GetRepeatedUInt32(m, f, index) : r->GetUInt32(m, f);
    case FieldDescriptor::CPPTYPE_UINT64:
      return rep ? r->GetRepeatedUInt64(m, f, index) : r->GetUInt64(m, f);
    case FieldDescriptor::CPPTYPE_DOUBLE:
      return rep ? r->GetRepeatedDouble(m, f, index) : r->GetDouble(m, f);
    case FieldDescriptor::CPPTYPE_FLOAT:
      return rep ? r->GetRepeatedFloat(m, f, index) : r->GetFloat(m, f);
    case FieldDescriptor::CPPTYPE_BOOL:
      return rep ? r->GetRepeatedBool(m, f, index) : r->GetBool(m, f);
    case FieldDescriptor::CPPTYPE_ENUM:
      return (rep ? r->GetRepeatedEnum(m, f, index) : r->GetEnum(m, f))->name();
    case FieldDescriptor::CPPTYPE_STRING: {
      std::string s = rep ? r->GetRepeatedString(m, f, index) : r->GetString(m, f);
      if (f->type() == FieldDescriptor::TYPE_BYTES) {
        return absl::Base64Escape(s);
      }
      return s;
    }
    case FieldDescriptor::CPPTYPE_MESSAGE:
      return ToJsonValue(rep ? r->GetRepeatedMessage(m, f, index) : r->GetMessage(m, f));
  }
  return nullptr;
}

// A map field (repeated key/value entries) as one object.
Json MapValue(const Message& m, const FieldDescriptor* f) {
  const Reflection* r = m.GetReflection();
  Json out = Json::object();
  for (int i = 0; i < r->FieldSize(m, f); ++i) {
    const Message& entry = r->GetRepeatedMessage(m, f, i);
    const FieldDescriptor* key = f->message_type()->map_key();
    const FieldDescriptor* value = f->message_type()->map_value();
    const Json k = FieldValue(entry, key, -1);
    out[k.is_string() ? k.get<std::string>() : k.dump()] = FieldValue(entry, value, -1);
  }
  return out;
}

}  // namespace

Json ToJsonValue(const Message& message) {
  const Reflection* r = message.GetReflection();
  const auto* d = message.GetDescriptor();
  Json out = Json::object();
  for (int i = 0; i < d->field_count(); ++i) {
    const FieldDescriptor* f = d->field(i);
    if (f->is_map()) {
      out[f->name()] = MapValue(message, f);
    } else if (f->is_repeated()) {
      Json list = Json::array();
      for (int j = 0; j < r->FieldSize(message, f); ++j) {
        list.push_back(FieldValue(message, f, j));
      }
      out[f->name()] = std::move(list);
    } else if (!f->has_presence() || r->HasField(message, f)) {
      out[f->name()] = FieldValue(message, f, -1);
    }
  }
  return out;
}

std::string Dump(const Json& value, JsonStyle style) {
  // Invalid UTF-8 in a client's string becomes U+FFFD instead of throwing.
  return value.dump(style == JsonStyle::kPretty ? 2 : -1, ' ', false,
                    Json::error_handler_t::replace);
}

std::string ToJson(const Message& message, JsonStyle style) {
  return Dump(ToJsonValue(message), style);
}

Status PrintJson(const Json& value, JsonStyle style) {
  std::printf("%s\n", Dump(value, style).c_str());
  std::fflush(stdout);
  return OkStatus();
}

Status PrintJson(const Message& message, JsonStyle style) {
  return PrintJson(ToJsonValue(message), style);
}

}  // namespace isometry::isoctl
