// What the node is and does: memories, channels, status, calibration, throughput samples (node.cc).
// Node::introspection() hands it out (node.h: what every service promises).
#pragma once

#include "daemon/node/node.h"

namespace isometry::node {

class Introspection {
 public:
  explicit Introspection(Node::Impl& impl) : impl_(&impl) {}  // the node makes it

  std::vector<MemoryReport> ListMemories() const;

  std::vector<ChannelReport> ListChannels() const;

  NodeStatus GetStatus() const;

  // Re-measures every channel (isoctl calibrate).
  Result<Calibration> Calibrate();

  // Whether this node runs network hops over RDMA, decided at Create from
  // the probe and [rdma] (peers learn it in the hello exchange).
  const rdma::RdmaChoice& rdma() const;

  // Samples channel throughput (current and peak); called periodically by
  // the daemon, and by tests.
  void SampleThroughput();

 private:
  Node::Impl* impl_;
};

}  // namespace isometry::node
