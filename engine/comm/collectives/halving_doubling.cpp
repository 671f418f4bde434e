// Recursive halving-doubling (Rabenseifner), for any p. With pp the largest power of two <= p
// and r = p - pp, the first 2r ranks fold in pairs (the even one sends all of its span to the
// odd one, which adds it and takes part; the even one waits), leaving pp ranks. Reduce-scatter
// by recursive halving with distance doubling: at distance d partners split their current
// segment in two halves, each keeping one and adding the partner's copy of it, so that large
// halves go to near ranks (inside a node when ranks are placed in blocks) and only small ones
// travel far. All-gather by recursive doubling in the reverse order; then the odd ranks of the
// folded pairs send the result to their even partner. Each rank moves 2 (pp-1)/pp of the span
// (plus the span twice on folded pairs) in 2 log2(pp) (+2) latencies.
// reduce = the same halving, then every rank's segment gathered by the root; broadcast = the
// root scatters the segments, then the doubling and the unfolding.
#include <utility>
#include <vector>

#include "engine/comm/collectives/team.hpp"

namespace easel::halving_doubling {

namespace {

struct Shape {
  int p, pp, r;
  explicit Shape(int p_) : p(p_), pp(1), r(0) {
    while (pp * 2 <= p)
      pp *= 2;
    r = p - pp;
  }
  // Team index -> index among the pp taking part, or -1 (the even rank of a folded pair).
  int nid(int i) const {
    if (i < 2 * r) return i % 2 == 1 ? i / 2 : -1;
    return i - r;
  }
  int old(int nid_) const { return nid_ < r ? 2 * nid_ + 1 : nid_ + r; }
  int log2pp() const {
    int k = 0;
    while ((1 << k) < pp)
      ++k;
    return k;
  }
};

struct Segment {
  int64_t lo, hi;
};

// Halves of [lo, hi): the lower one is kept by the partner whose bit is 0.
Segment half(Segment s, bool upper) {
  const int64_t mid = s.lo + (s.hi - s.lo) / 2;
  return upper ? Segment{mid, s.hi} : Segment{s.lo, mid};
}

// The segment rank nid holds after the halving.
Segment final_segment(int nid, int pp, int64_t n) {
  Segment s{0, n};
  for (int mask = 1; mask < pp; mask <<= 1)
    s = half(s, (nid & mask) != 0);
  return s;
}

// The fold and the halving from src into work, appended to `out` (one slot each, idle where
// the caller sits it out); returns the caller's final segment (none for the even rank of a
// folded pair). `cur` ends as what the caller's result lives in (work, or src when p == 1).
Segment fold_and_halve(const Team& t, const Shape& sh, const float* src, float* work, int64_t n,
                       std::vector<Segment>* trail, Schedule* out) {
  const int i = t.me;
  const int me = sh.nid(i);
  const float* cur = src;
  if (sh.r > 0) {
    if (i < 2 * sh.r && i % 2 == 0) {
      out->push_back(team_transfer(t, i + 1, src, n, -1, nullptr, nullptr, 0, RecvOp::copy,
                                   "halving-doubling fold"));
    } else if (i < 2 * sh.r) {
      out->push_back(team_transfer(t, -1, nullptr, 0, i - 1, work, src, n, RecvOp::add,
                                   "halving-doubling fold"));
      cur = work;
    } else {
      out->emplace_back();
    }
  }
  Segment s{0, n};
  for (int mask = 1; mask < sh.pp; mask <<= 1) {
    if (me < 0) {
      out->emplace_back();
      continue;
    }
    const bool upper = (me & mask) != 0;
    const Segment keep = half(s, upper), give = half(s, !upper);
    const int partner = sh.old(me ^ mask);
    out->push_back(team_transfer(t, partner, cur + give.lo, give.hi - give.lo, partner,
                                 work + keep.lo, cur + keep.lo, keep.hi - keep.lo, RecvOp::add,
                                 "halving-doubling reduce-scatter"));
    if (trail) trail->push_back(s);
    s = keep;
    cur = work;
  }
  return me < 0 ? Segment{0, 0} : s;
}

// The segments before each halving of a taking-part rank, in halving order.
std::vector<Segment> trail_of(const Shape& sh, int me, int64_t n) {
  std::vector<Segment> trail;
  Segment s{0, n};
  for (int mask = 1; me >= 0 && mask < sh.pp; mask <<= 1) {
    trail.push_back(s);
    s = half(s, (me & mask) != 0);
  }
  return trail;
}

// Recursive doubling from each taking-part rank's final segment (trail: the segments before each
// halving, in halving order), then the unfolding to the even ranks of folded pairs (skipping
// `skip`, which has the span already); appended to `out`, slots as fold_and_halve's.
void double_and_unfold(const Team& t, const Shape& sh, float* buf, int64_t n, Segment s,
                       const std::vector<Segment>& trail, int skip, Schedule* out) {
  const int i = t.me;
  const int me = sh.nid(i);
  int mask = sh.pp / 2;
  for (size_t k = 0; k < static_cast<size_t>(sh.log2pp()); ++k, mask >>= 1) {
    if (me < 0) {
      out->emplace_back();
      continue;
    }
    const Segment whole = trail[trail.size() - 1 - k];
    const Segment other = s.lo == whole.lo ? Segment{s.hi, whole.hi} : Segment{whole.lo, s.lo};
    const int partner = sh.old(me ^ mask);
    out->push_back(team_transfer(t, partner, buf + s.lo, s.hi - s.lo, partner, buf + other.lo,
                                 nullptr, other.hi - other.lo, RecvOp::copy,
                                 "halving-doubling all-gather"));
    s = whole;
  }
  if (sh.r == 0) return;
  const int even = i - i % 2;
  if (i >= 2 * sh.r || even == skip)
    out->emplace_back();
  else if (i % 2 == 1)
    out->push_back(team_transfer(t, even, buf, n, -1, nullptr, nullptr, 0, RecvOp::copy,
                                 "halving-doubling unfold"));
  else
    out->push_back(team_transfer(t, -1, nullptr, 0, i + 1, buf, nullptr, n, RecvOp::copy,
                                 "halving-doubling unfold"));
}

}  // namespace

void reduce_scatter_steps(const Team& t, float* buf, int64_t n, Schedule* out, int64_t* lo,
                          int64_t* hi) {
  const Shape sh(t.size());
  const Segment s = fold_and_halve(t, sh, buf, buf, n, nullptr, out);
  *lo = s.lo;
  *hi = s.hi;
}

void allgather_steps(const Team& t, float* buf, int64_t n, Schedule* out) {
  const Shape sh(t.size());
  const int me = sh.nid(t.me);
  const Segment s = me < 0 ? Segment{0, 0} : final_segment(me, sh.pp, n);
  double_and_unfold(t, sh, buf, n, s, trail_of(sh, me, n), -1, out);
}

void allreduce_steps(const Team& t, float* buf, int64_t n, Schedule* out) {
  int64_t lo = 0, hi = 0;
  reduce_scatter_steps(t, buf, n, out, &lo, &hi);
  allgather_steps(t, buf, n, out);
}

void allreduce(const Team& t, float* buf, int64_t n, ScratchFloats&) {
  if (t.size() == 1) return;
  Schedule s;
  allreduce_steps(t, buf, n, &s);
  run_schedule(t, s);
}

void reduce(const Team& t, const float* src, float* dst, int64_t n, int root, ScratchFloats& sc) {
  const Shape sh(t.size());
  if (sh.p == 1) {
    copy_floats(dst, src, n);
    return;
  }
  float* work = t.me == root ? dst : sc.at_least(n);
  Schedule steps;
  const Segment s = fold_and_halve(t, sh, src, work, n, nullptr, &steps);
  run_schedule(t, steps);
  const int me = sh.nid(t.me);
  if (t.me != root) {
    if (me >= 0) team_send(t, root, work + s.lo, s.hi - s.lo, "halving-doubling reduce (gather)");
    return;
  }
  for (int k = 0; k < sh.pp; ++k) {
    if (k == me) continue;
    const Segment g = final_segment(k, sh.pp, n);
    team_recv(t, sh.old(k), dst + g.lo, g.hi - g.lo, "halving-doubling reduce (gather)");
  }
}

void broadcast(const Team& t, float* buf, int64_t n, int root) {
  const Shape sh(t.size());
  if (sh.p == 1) return;
  const int me = sh.nid(t.me);
  std::vector<ScatterPiece> pieces;
  for (int k = 0; k < sh.pp; ++k) {
    const Segment g = final_segment(k, sh.pp, n);
    pieces.push_back({sh.old(k), g.lo, g.hi});
  }
  team_scatter(t, root, buf, pieces, "halving-doubling broadcast (scatter)");
  const Segment s = me < 0 ? Segment{0, 0} : final_segment(me, sh.pp, n);
  const int root_even = root < 2 * sh.r && root % 2 == 0 ? root : -1;
  Schedule steps;
  double_and_unfold(t, sh, buf, n, s, trail_of(sh, me, n), root_even, &steps);
  run_schedule(t, steps);
}

}  // namespace easel::halving_doubling
