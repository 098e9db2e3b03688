#include "tools/isoctl/shape_args.h"

#include "core/box.h"
#include "core/datatype_text.h"
#include "core/layout.h"
#include "core/strings.h"
#include "tools/isoctl/exit_codes.h"

namespace isometry::isoctl {

namespace {

Result<std::vector<int64_t>> ParseExtents(std::string_view text) {
  std::vector<int64_t> out;
  for (std::string_view part : SplitOn(text, 'x')) {
    const auto v = ParseNumber<int64_t>(TrimAscii(part));
    if (!v || *v <= 0) {
      return UsageError(StrCat("--extents '", text, "': '", part,
                               "' is not a positive integer (expected e.g. 1024x1024)"));
    }
    out.push_back(*v);
  }
  if (out.size() > static_cast<size_t>(kMaxDims)) {
    return UsageError(
        StrCat("--extents '", text, "': ", out.size(), " dimensions; at most ", kMaxDims));
  }
  return out;
}

Result<std::vector<Field>> ParseFields(std::string_view text) {
  if (TrimAscii(text).empty()) {
    return std::vector<Field>{{"f0", 8}};
  }
  std::vector<Field> out;
  for (std::string_view part : SplitOn(text, ',')) {
    part = TrimAscii(part);
    const size_t colon = part.find(':');
    const auto size = colon == std::string_view::npos
                          ? std::nullopt
                          : ParseNumber<uint32_t>(TrimAscii(part.substr(colon + 1)));
    if (!size || *size == 0 || colon == 0) {
      return UsageError(
          StrCat("--fields '", text, "': '", part, "' is not NAME:BYTES (expected e.g. a:4,b:8)"));
    }
    out.push_back({std::string(TrimAscii(part.substr(0, colon))), *size});
  }
  return out;
}

}  // namespace

std::string DefaultLayout(int dims) {
  std::string out = "F";
  for (int d = 0; d < dims; ++d) {
    out += std::string(",") + "xyzw"[d];
  }
  return out;
}

Result<ParsedShape> ParseShapeArgs(const ShapeArgs& args) {
  ParsedShape s;
  ISO_ASSIGN_OR_RETURN(s.extents, ParseExtents(args.extents));
  ISO_ASSIGN_OR_RETURN(s.fields, ParseFields(args.fields));
  const int dims = static_cast<int>(s.extents.size());
  s.src_layout = args.src_layout.empty() ? DefaultLayout(dims) : args.src_layout;
  s.dst_layout = args.dst_layout.empty() ? DefaultLayout(dims) : args.dst_layout;
  return s;
}

Result<InstanceShape> MakeShape(const ParsedShape& shape, const std::string& layout,
                                const char* option) {
  Box bounds;
  bounds.dims = static_cast<int>(shape.extents.size());
  for (int d = 0; d < bounds.dims; ++d) {
    bounds.hi[d] = shape.extents[d];
  }
  auto fields = FieldSpace::Make(shape.fields);
  if (!fields.ok()) {
    return UsageError(StrCat("--fields: ", fields.status().message()));
  }
  auto parsed = Layout::Parse(layout, bounds.dims);
  if (!parsed.ok()) {
    return UsageError(StrCat(option, ": ", parsed.status().message()));
  }
  InstanceShape s{bounds, *std::move(fields), *std::move(parsed)};
  if (Status v = s.Validate("instance"); !v.ok()) {
    return UsageError(StrCat("--extents/", option, ": ", v.message()));
  }
  return s;
}

Result<std::optional<Datatype>> ParseTypeOption(const std::string& text, const char* option,
                                                const std::string& layout,
                                                const char* layout_option) {
  if (text.empty()) {
    return std::nullopt;
  }
  if (!layout.empty()) {
    return UsageError(
        StrCat(option, " and ", layout_option, " both describe one side; give one of them"));
  }
  Result<Datatype> t = ParseDatatype(text);
  if (!t.ok()) {
    return UsageError(StrCat(option, " '", text, "': ", t.status().message()));
  }
  return std::optional<Datatype>(*std::move(t));
}

void BoxToProto(const std::vector<int64_t>& extents, v1::Box* out) {
  for (int64_t e : extents) {
    out->add_lo(0);
    out->add_hi(e);
  }
}

void FieldsToProto(const std::vector<Field>& fields,
                   google::protobuf::RepeatedPtrField<v1::Field>* out) {
  for (const Field& f : fields) {
    v1::Field* p = out->Add();
    p->set_name(f.name);
    p->set_size(f.size);
  }
}

}  // namespace isometry::isoctl
