// Field spaces: the named values stored for every point of an index space.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"

namespace isometry {

struct Field {
  std::string name;
  uint32_t size = 0;  // bytes
  bool operator==(const Field&) const = default;
};

// An ordered list of fields. Order matters: in a layout where F is the
// innermost component (AOS), fields are stored in this order.
//
// Immutable once made, so copies share one list: every copy's ends carry
// their shape through the node, the runtime and the plan cache, and a
// copy of a field space is then a reference count, not an allocation.
class FieldSpace {
 public:
  // Rejects an empty list, empty or duplicate names, zero sizes and sizes
  // above 1 MiB (an "element" that large is a layout mistake).
  static Result<FieldSpace> Make(std::vector<Field> fields);
  // `count` fields named f0, f1, ... of `size` bytes each.
  static FieldSpace Uniform(int count, uint32_t size);

  const std::vector<Field>& fields() const { return data_ ? data_->fields : kNoFields; }
  size_t size() const { return fields().size(); }
  uint64_t total_bytes() const { return total_bytes_; }
  // The smallest field's size: the shortest contiguous run a layout change
  // that separates the fields (AOS -> SOA) can leave; 0 when empty.
  uint64_t smallest_bytes() const {
    uint64_t s = 0;
    for (const Field& f : fields()) s = s == 0 ? f.size : std::min<uint64_t>(s, f.size);
    return s;
  }
  // Byte offset of field i within one packed entry (sum of earlier sizes).
  uint64_t offset_of(size_t i) const { return data_->offsets[i]; }
  bool operator==(const FieldSpace& o) const { return data_ == o.data_ || fields() == o.fields(); }
  // The same list, not only equal ones: a copy of this field space (or of
  // one it was copied from). Constant time.
  bool SharesListWith(const FieldSpace& o) const { return data_ == o.data_; }

 private:
  struct Data {
    std::vector<Field> fields;
    std::vector<uint64_t> offsets;
  };
  static inline const std::vector<Field> kNoFields;
  std::shared_ptr<const Data> data_;  // null: no fields (default-made)
  uint64_t total_bytes_ = 0;
};

}  // namespace isometry
