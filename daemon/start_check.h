// What the daemon needs from the machine before it starts, checked in one
// place: `isometryd --check-config` runs exactly these checks, and so does
// every start before it touches anything, so a config that passes the check
// does not fail at start for a reason the check could have seen.
//
// Beyond the file's own validation (Config::Validate) it checks:
//   daemon.local_socket, daemon.grpc_socket: at most 107 bytes (sun_path),
//     not an existing file other than a socket (the daemon removes stale
//     sockets only), a directory that exists or can be created;
//   daemon.state_dir: a writable directory, or one that can be created;
//   daemon.socket_group: an existing group;
//   daemon.grpc_tcp, cluster.data_listen (with peers), metrics.listen
//     (with [metrics]): host:port with a
//     numeric port below 65536 and a host that is an address of this machine;
//   memory[].directory of DSK memories: an existing directory the daemon's
//     user may search and write (errors name the user);
//   cluster.secret_file (with peers): readable and long enough.
//   daemon.cpu_latency_us: /dev/cpu_dma_latency writable by the daemon.
//   rdma.enable = "on": a usable RDMA device (net/rdma/rdma_probe.h),
//     and every name in rdma.devices found on this machine.
//   memory[].kind = "FBM", channel[].kind = "gpu_*": a GPU (the CUDA
//     probe), memory[].device one of its devices (config/gpu_config.h).
// Not checked (only binding tells): whether a TCP port is free.
//
// Every error is a ConfigKeyError naming its key: config.origin.Locate()
// gives it the file and line.
#pragma once

#include "config/runtime_config.h"
#include "core/status.h"

namespace isometry {

// Reads the file system, the group database and the resolver; changes
// nothing.
Status CheckStartable(const Config& config);

}  // namespace isometry
