#include "tools/isoctl/yaml_output.h"

#include <yaml.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <string_view>

namespace isometry::isoctl {

namespace {

// Owns one libyaml emitter writing into `out`.
class YamlEmitter {
 public:
  YamlEmitter() {
    ok_ = yaml_emitter_initialize(&emitter_) != 0;
    if (ok_) {
      yaml_emitter_set_output(&emitter_, &YamlEmitter::Write, &out_);
      yaml_emitter_set_unicode(&emitter_, 1);  // names and messages as they are, not \u escapes
      yaml_emitter_set_width(&emitter_, -1);   // a long path or message stays on one line
    }
  }
  ~YamlEmitter() {
    if (ok_) yaml_emitter_delete(&emitter_);
  }
  YamlEmitter(const YamlEmitter&) = delete;
  YamlEmitter& operator=(const YamlEmitter&) = delete;

  // Emits (and so frees) an initialized event; `initialized` is what the
  // yaml_*_event_initialize call returned.
  Status Emit(yaml_event_t& event, int initialized) {
    if (!ok_ || !initialized) {
      return Internal("YAML output: libyaml could not start an event");
    }
    if (!yaml_emitter_emit(&emitter_, &event)) {
      return Internal("YAML output: ", emitter_.problem ? emitter_.problem : "libyaml failed");
    }
    return OkStatus();
  }
  std::string Take() { return std::move(out_); }

 private:
  static int Write(void* data, unsigned char* buffer, size_t size) {
    static_cast<std::string*>(data)->append(reinterpret_cast<const char*>(buffer), size);
    return 1;
  }

  yaml_emitter_t emitter_{};
  bool ok_ = false;
  std::string out_;
};

// Whether `s` reads back as this string when written without quotes,
// given that libyaml itself quotes what plain style cannot hold (": ",
// " #", a leading or trailing space, line breaks, control characters):
// it starts with a letter (so it is no number, timestamp or ".inf") and is
// none of YAML 1.1's booleans or null.
bool PlainIsSafe(std::string_view s) {
  if (s.empty() || !std::isalpha(static_cast<unsigned char>(s[0]))) {
    return false;
  }
  std::string lower(s);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  constexpr std::array<std::string_view, 9> kReserved = {"y",     "yes", "n",   "no",  "true",
                                                         "false", "on",  "off", "null"};
  return std::find(kReserved.begin(), kReserved.end(), lower) == kReserved.end();
}

// A float as JSON prints it, with a "." before any exponent: YAML 1.1's
// float needs one ("1e-05" would read back as a string).
std::string FloatText(const Json& value) {
  std::string text = value.dump();
  if (text.find('.') == std::string::npos) {
    const size_t e = text.find_first_of("eE");
    text.insert(e == std::string::npos ? text.size() : e, ".0");
  }
  return text;
}

class Writer {
 public:
  explicit Writer(YamlEmitter& e) : e_(e) {}

  // A scalar that a loader must resolve by its text (numbers, booleans).
  Status Plain(const std::string& text) { return Scalar(text, true, YAML_PLAIN_SCALAR_STYLE); }

  Status String(const std::string& raw) {
    // Invalid UTF-8 (a client's bytes) is refused by libyaml: replaced by
    // U+FFFD, as the JSON output does.
    const std::string s =
        Json::parse(Json(raw).dump(-1, ' ', false, Json::error_handler_t::replace))
            .get<std::string>();
    const bool plain = PlainIsSafe(s);
    // Not plain-implicit: libyaml quotes it (single, or double with escapes).
    return Scalar(s, plain, plain ? YAML_PLAIN_SCALAR_STYLE : YAML_ANY_SCALAR_STYLE);
  }

  Status Node(const Json& v) {
    yaml_event_t ev;
    switch (v.type()) {
      case Json::value_t::object:
        ISO_RETURN_IF_ERROR(e_.Emit(ev, yaml_mapping_start_event_initialize(
                                            &ev, nullptr, nullptr, 1, YAML_BLOCK_MAPPING_STYLE)));
        for (const auto& [key, value] : v.items()) {
          ISO_RETURN_IF_ERROR(String(key));
          ISO_RETURN_IF_ERROR(Node(value));
        }
        return e_.Emit(ev, yaml_mapping_end_event_initialize(&ev));
      case Json::value_t::array:
        ISO_RETURN_IF_ERROR(e_.Emit(ev, yaml_sequence_start_event_initialize(
                                            &ev, nullptr, nullptr, 1, YAML_BLOCK_SEQUENCE_STYLE)));
        for (const Json& item : v) {
          ISO_RETURN_IF_ERROR(Node(item));
        }
        return e_.Emit(ev, yaml_sequence_end_event_initialize(&ev));
      case Json::value_t::string:
        return String(v.get<std::string>());
      case Json::value_t::number_float:
        // NaN and infinities are null in the JSON document: null here too.
        return Plain(std::isfinite(v.get<double>()) ? FloatText(v) : "null");
      case Json::value_t::number_integer:
      case Json::value_t::number_unsigned:
      case Json::value_t::boolean:
      case Json::value_t::null:
        return Plain(v.dump());
      default:
        return Internal("YAML output: a value JSON output has no form for");
    }
  }

 private:
  Status Scalar(const std::string& s, bool plain_implicit, yaml_scalar_style_t style) {
    yaml_event_t ev;
    auto* text = reinterpret_cast<yaml_char_t*>(const_cast<char*>(s.data()));
    return e_.Emit(
        ev, yaml_scalar_event_initialize(&ev, nullptr, nullptr, text, static_cast<int>(s.size()),
                                         plain_implicit, 1, style));
  }

  YamlEmitter& e_;
};

}  // namespace

Result<std::string> ToYaml(const Json& document, YamlOptions options) {
  YamlEmitter emitter;
  Writer writer(emitter);
  yaml_event_t ev;
  ISO_RETURN_IF_ERROR(
      emitter.Emit(ev, yaml_stream_start_event_initialize(&ev, YAML_UTF8_ENCODING)));
  ISO_RETURN_IF_ERROR(
      emitter.Emit(ev, yaml_document_start_event_initialize(&ev, nullptr, nullptr, nullptr,
                                                            options.document_marker ? 0 : 1)));
  ISO_RETURN_IF_ERROR(writer.Node(document));
  ISO_RETURN_IF_ERROR(emitter.Emit(ev, yaml_document_end_event_initialize(&ev, 1)));
  ISO_RETURN_IF_ERROR(emitter.Emit(ev, yaml_stream_end_event_initialize(&ev)));
  return emitter.Take();
}

}  // namespace isometry::isoctl
