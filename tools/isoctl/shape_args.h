// The shape options shared by `plan` and `copy`: --extents, --fields,
// --src-layout, --dst-layout, parsed into core types and proto messages.
// Errors are UsageErrors naming the option.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/datatype.h"
#include "core/field_space.h"
#include "core/instance.h"
#include "core/status.h"
#include "isometry.pb.h"

namespace isometry::isoctl {

// The options as typed on the command line.
struct ShapeArgs {
  std::string extents = "1048576";  // "1024x1024": x first, 1 to 4 dimensions
  std::string fields;               // "a:4,b:8"; empty: one 8-byte field f0
  std::string src_layout;           // empty: DefaultLayout(dims)
  std::string dst_layout;           // empty: DefaultLayout(dims)
};

struct ParsedShape {
  std::vector<int64_t> extents;  // index space [0, extent) per dimension
  std::vector<Field> fields;
  std::string src_layout;  // defaults applied, not validated
  std::string dst_layout;
};

// Parses extents and fields; fills in default layouts. Layout text and
// field sizes are checked by MakeShape.
Result<ParsedShape> ParseShapeArgs(const ShapeArgs& args);

// "F,x", "F,x,y", ...: fields innermost, x fastest (Fortran order).
std::string DefaultLayout(int dims);

// The core shape of one side, fully validated; `option` names the layout
// option in errors ("--src-layout").
Result<InstanceShape> MakeShape(const ParsedShape& shape, const std::string& layout,
                                const char* option);

// --src-type/--dst-type (core/datatype_text.h): nullopt when `text` is
// empty. A side is described by a type or by a layout, so naming both
// (`layout` non-empty) is an error too.
Result<std::optional<Datatype>> ParseTypeOption(const std::string& text, const char* option,
                                                const std::string& layout,
                                                const char* layout_option);

void BoxToProto(const std::vector<int64_t>& extents, v1::Box* out);
void FieldsToProto(const std::vector<Field>& fields,
                   google::protobuf::RepeatedPtrField<v1::Field>* out);

}  // namespace isometry::isoctl
