// Datatype text (isoctl plan --src-type, core/datatype_text.h): any bytes
// must parse or fail with InvalidArgument, and what parses must print a text
// that parses back to the same tree (ParseDatatype(ToString) round trip).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "core/datatype_text.h"

using namespace isometry;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const Result<Datatype> t = ParseDatatype(text);
  if (!t.ok()) {
    if (t.status().code() != absl::StatusCode::kInvalidArgument) {
      std::abort();
    }
    return 0;
  }
  const std::string printed = t->ToString(SIZE_MAX);
  if (printed.find('+') != std::string::npos) {
    return 0;  // an abbreviated list ("+N more") is not meant to parse back
  }
  const Result<Datatype> again = ParseDatatype(printed);
  if (!again.ok() || !SameType(*again, *t) || again->ToString(SIZE_MAX) != printed) {
    std::abort();
  }
  return 0;
}
