// The machine a benchmark ran on, recorded with every row: figures from two
// VMs differ by more than any change we make, so a row that does not say
// where it was measured cannot be compared with another.
#pragma once

#include <string>

namespace isometry::bench {

struct Machine {
  std::string cpu;     // /proc/cpuinfo's first "model name"
  unsigned cpus = 0;   // online CPUs
  std::string kernel;  // uname -r
  // Best of a few 64 MiB copies: what this machine's memory moves with one
  // thread and with two (the limit most rows are compared with).
  double memcpy_gbps_1 = 0, memcpy_gbps_2 = 0;
};

// Reads the CPU and kernel and times the two memcpy figures (~0.2 s).
Machine MeasureMachine();

// {"cpu":...,"cpus":...,"kernel":...,"memcpy_gbps_1":...,"memcpy_gbps_2":...}
std::string MachineJson(const Machine& m);

// One line for a table's head: "machine: CPU, N CPUs, Linux K, memcpy ...".
std::string MachineLine(const Machine& m);

}  // namespace isometry::bench
