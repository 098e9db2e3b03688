// How a copy runs, as its client asked: one struct that every layer a copy
// crosses (node, runtime, the cluster's halves and their wire) carries
// unchanged, so a new option is declared once and reaches every hop.
//
// Thread-safety: a value; copy it freely.
#pragma once

namespace isometry {

struct CopyOptions {
  // Higher runs first on every channel the copy uses, within its traffic
  // class; the node lowers it to the class's max_priority.
  int priority = 0;
  // A DSK destination is fdatasync'ed before it replaces its target; false
  // skips that (the rename still makes it all-or-nothing).
  bool durable = true;

  bool operator==(const CopyOptions&) const = default;
};

}  // namespace isometry
