#include "core/field_space.h"

#include <set>

namespace isometry {

namespace {
constexpr uint32_t kMaxFieldBytes = 1u << 20;
}

Result<FieldSpace> FieldSpace::Make(std::vector<Field> fields) {
  if (fields.empty()) {
    return InvalidArgument("field space: no fields");
  }
  std::set<std::string> names;
  FieldSpace fs;
  auto data = std::make_shared<Data>();
  for (const Field& f : fields) {
    if (f.name.empty()) {
      return InvalidArgument("field space: a field has an empty name");
    }
    if (!names.insert(f.name).second) {
      return InvalidArgument("field space: field '", f.name, "' appears twice");
    }
    if (f.size == 0 || f.size > kMaxFieldBytes) {
      return InvalidArgument("field space: field '", f.name, "' has size ", f.size,
                             "; sizes from 1 to ", kMaxFieldBytes, " bytes are allowed");
    }
    data->offsets.push_back(fs.total_bytes_);
    fs.total_bytes_ += f.size;
  }
  data->fields = std::move(fields);
  fs.data_ = std::move(data);
  return fs;
}

FieldSpace FieldSpace::Uniform(int count, uint32_t size) {
  std::vector<Field> fields;
  fields.reserve(static_cast<size_t>(count));
  for (int i = 0; i < count; ++i) {
    fields.push_back({StrCat("f", i), size});
  }
  return *Make(std::move(fields));
}

}  // namespace isometry
