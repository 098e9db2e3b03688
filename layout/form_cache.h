// Memoized datatype translation (FALCON-X §4.3) for copies between
// canonical forms: the compiled FormCopy of a (source form, destination
// form) pair, least recently used first out. Equivalent datatypes built
// differently have one form (layout/datatype_form.h), so they share one
// entry. Bounded by entries and by bytes, as ProgramCache is: a client that
// sends many distinct large types must not grow the daemon without limit;
// a program larger than the whole byte budget is returned but not kept.
#pragma once

#include <absl/base/thread_annotations.h>
#include <absl/synchronization/mutex.h>

#include <cstdint>
#include <list>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>

#include "layout/form_compiler.h"

namespace isometry {

class FormProgramCache {
 public:
  explicit FormProgramCache(size_t capacity, uint64_t capacity_bytes = 256ull << 20)
      : capacity_(capacity), capacity_bytes_(capacity_bytes) {}

  // Returns the cached copy or compiles (CompileFormCopy), caches and
  // returns it. The key is both forms' full serialization, so a hash
  // collision is a miss, never a wrong program. Errors are not cached.
  // Thread-safe; compilation runs outside the lock.
  Result<std::shared_ptr<const FormCopy>> Get(const CanonicalForm& src, const CanonicalForm& dst)
      ABSL_LOCKS_EXCLUDED(mu_);

  uint64_t hits() const ABSL_LOCKS_EXCLUDED(mu_);
  uint64_t misses() const ABSL_LOCKS_EXCLUDED(mu_);
  size_t size() const ABSL_LOCKS_EXCLUDED(mu_);
  uint64_t bytes() const ABSL_LOCKS_EXCLUDED(mu_);  // what the kept entries hold (estimate)

 private:
  struct Entry {
    std::string key;
    std::shared_ptr<const FormCopy> copy;
    uint64_t bytes = 0;
  };
  void EvictLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  const size_t capacity_;
  const uint64_t capacity_bytes_;
  mutable absl::Mutex mu_;
  std::list<Entry> lru_ ABSL_GUARDED_BY(mu_);  // front = most recent
  std::unordered_map<std::string_view, std::list<Entry>::iterator> index_ ABSL_GUARDED_BY(mu_);
  uint64_t hits_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t misses_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace isometry
