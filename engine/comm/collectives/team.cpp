// The step helpers every algorithm uses (team.hpp).
#include <algorithm>
#include <cstring>
#include <string>

#include "engine/comm/collective_cost.hpp"
#include "engine/comm/collectives/team.hpp"
#include "engine/span_ops.hpp"

namespace easel {

Team Team::all(Transport& t, int self) {
  Team team;
  team.t = &t;
  team.ranks.resize(static_cast<size_t>(t.size()));
  for (int i = 0; i < t.size(); ++i)
    team.ranks[static_cast<size_t>(i)] = i;
  team.me = self;
  return team;
}

Step team_transfer(const Team& team, int to, const float* src, int64_t n, int from, float* dst,
                   const float* own, int64_t m, RecvOp op, const char* what) {
  Step st;
  st.what = what;
  Transfer& x = st.x;
  if (to >= 0) {
    x.send_peer = team.rank(to);
    x.send = src;
    x.send_n = n;
  }
  if (from >= 0) {
    x.recv_peer = team.rank(from);
    x.dst = dst;
    x.own = own;
    x.recv_n = m;
    x.op = op;
  }
  return st;
}

void team_step(const Team& team, int to, const float* src, int64_t n, int from, float* dst,
               const float* own, int64_t m, RecvOp op, const char* what) {
  team.t->step(team.self(), team_transfer(team, to, src, n, from, dst, own, m, op, what).x, what);
}

void run_schedule(const Team& team, const Schedule& s) {
  for (const Step& st : s)
    if (!st.idle()) team.t->step(team.self(), st.x, st.what);
}

void team_scatter(const Team& t, int root, float* buf, const std::vector<ScatterPiece>& pieces,
                  const char* what) {
  // All at once where a piece's bytes take less than a latency (collective_links); otherwise
  // one after another, each with the root's links to itself.
  LinkCost intra, inter;
  std::string error;
  int64_t largest = 0;
  for (const ScatterPiece& p : pieces)
    largest = std::max(largest, p.end - p.begin);
  const bool at_once =
      collective_links(&intra, &inter, &error) &&
      static_cast<double>(largest) * 4 / std::min(intra.bytes_per_s, inter.bytes_per_s) <
          std::max(intra.latency_s, inter.latency_s);
  const size_t count = at_once ? std::min(pieces.size(), kScatterStreams) : 1;
  std::vector<Stream> streams(count);
  for (size_t j = 0; j < pieces.size(); ++j) {
    const ScatterPiece& p = pieces[j];
    StreamStep st;
    if (p.to != root && t.me == root) {
      st.x.send_peer = t.rank(p.to);
      st.x.send = buf + p.begin;
      st.x.send_n = p.end - p.begin;
    } else if (p.to != root && t.me == p.to) {
      st.x.recv_peer = t.rank(root);
      st.x.dst = buf + p.begin;
      st.x.recv_n = p.end - p.begin;
    }
    streams[j % count].push_back(st);
  }
  if (count > 0) t.t->run_streams(t.self(), streams, what);
}

void copy_floats(float* dst, const float* src, int64_t n) {
  if (n > 0 && dst != src && !values_ignored())
    std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
}

}  // namespace easel
