// The brute-force reference for the redistribution tests: every global
// element mapped to its owners one by one, and an exchange set expanded to
// the same element list, so the two compare with ==.
#pragma once

#include <algorithm>
#include <tuple>
#include <vector>

#include "redistribution/exchange.h"

namespace isometry::redistribution::testing {

// One element the local rank sends: to whom, where it is globally, and
// where it sits in the local and the remote rank's local index spaces.
struct Element {
  uint64_t remote_rank = 0;
  Index global{};
  Index local{};
  Index remote{};
  friend bool operator==(const Element&, const Element&) = default;
  friend bool operator<(const Element& a, const Element& b) {
    return std::tie(a.remote_rank, a.global) < std::tie(b.remote_rank, b.global);
  }
};

// Calls fn(index) for every multi-index of a box of `dims` extents.
template <typename Fn>
void ForEachIndex(const Index& extents, int dims, Fn fn) {
  Index at{};
  for (;;) {
    fn(at);
    int d = dims - 1;
    while (d >= 0 && ++at[d] == extents[d]) at[d--] = 0;
    if (d < 0) return;
  }
}

// Every element of the global space, by local owner: out[r] is what local
// rank r sends, sorted.
inline std::vector<std::vector<Element>> BruteForce(const Distribution& local,
                                                    const Distribution& remote) {
  std::vector<std::vector<Element>> out(local.rank_count());
  ForEachIndex(local.extents(), local.dims(), [&](const Index& g) {
    const uint64_t owner = local.Owner(g).value();
    out[owner].push_back({.remote_rank = remote.Owner(g).value(),
                          .global = g,
                          .local = local.LocalIndex(g).value(),
                          .remote = remote.LocalIndex(g).value()});
  });
  for (auto& v : out) std::sort(v.begin(), v.end());
  return out;
}

// The elements an exchange set describes, sorted.
inline std::vector<Element> Expand(const ExchangeSet& set) {
  std::vector<Element> out;
  for (const Piece& p : set.Pieces()) {
    // Which run and how far into it, per dimension: an odometer over runs.
    Index run_count{};
    for (int d = 0; d < set.dims; ++d) run_count[d] = p.runs[d].size();
    ForEachIndex(run_count, set.dims, [&](const Index& which) {
      Index len{};
      for (int d = 0; d < set.dims; ++d) len[d] = p.runs[d][which[d]].length;
      ForEachIndex(len, set.dims, [&](const Index& t) {
        Element e{.remote_rank = p.remote_rank};
        for (int d = 0; d < set.dims; ++d) {
          const Run& r = p.runs[d][which[d]];
          e.global[d] = r.global + t[d];
          e.local[d] = r.local + t[d];
          e.remote[d] = r.remote + t[d];
        }
        out.push_back(e);
      });
    });
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace isometry::redistribution::testing
