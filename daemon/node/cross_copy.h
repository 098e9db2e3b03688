// What the node hands to the cluster layer for a copy whose ends are not
// both on this node (daemon/cluster/cluster.h implements CrossCopier).
// Kept protocol-free so the node does not depend on gRPC.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "core/status.h"
#include "daemon/runtime/runtime.h"

namespace isometry {

// A registered instance as the node knows it.
struct InstanceSpec;

// One end of a cross-node copy.
struct CrossEnd {
  std::string node;                 // empty: this node
  InstanceRef local;                // this node's end
  std::shared_ptr<const void> keep;  // keeps this node's allocation alive
  // Another node's end: allocation (published there) or memory + file;
  // shape in `shape`.
  uint64_t allocation = 0;
  uint64_t offset = 0;
  std::string memory;  // without the node prefix
  std::string file;
  InstanceShape shape;
};

struct CrossCopySpec {
  CrossEnd src, dst;
  std::optional<Box> box;
  int priority = 0;
  bool durable = true;
};

// A running cross-node copy, as the initiating node sees it.
class CrossTransfer {
 public:
  virtual ~CrossTransfer() = default;
  virtual void Cancel() = 0;
  virtual std::string PathText() const = 0;
  virtual uint64_t bytes() const = 0;
  virtual std::chrono::steady_clock::time_point started() const = 0;
};

class CrossCopier {
 public:
  virtual ~CrossCopier() = default;
  // Plans and starts the copy; `done` runs once with its final status.
  // Errors (unknown or unreachable node, bad ends) return here.
  virtual Result<std::shared_ptr<CrossTransfer>> Copy(CrossCopySpec spec,
                                                      std::function<void(Status)> done) = 0;
  // Whether `node` names a peer of this node's cluster.
  virtual bool KnowsNode(const std::string& node) const = 0;
};

}  // namespace isometry
