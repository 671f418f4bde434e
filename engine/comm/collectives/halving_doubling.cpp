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

// The fold and the halving from src into work; returns the caller's final segment (none for the
// even rank of a folded pair).
Segment fold_and_halve(const Team& t, const Shape& sh, const float* src, float* work, int64_t n,
                       std::vector<Segment>* trail) {
  const int i = t.me;
  const float* cur = src;
  if (i < 2 * sh.r) {
    if (i % 2 == 0) {
      team_send(t, i + 1, src, n, "halving-doubling fold");
      return {0, 0};
    }
    team_step(t, -1, nullptr, 0, i - 1, work, src, n, RecvOp::add, "halving-doubling fold");
    cur = work;
  }
  const int me = sh.nid(i);
  Segment s{0, n};
  for (int mask = 1; mask < sh.pp; mask <<= 1) {
    const bool upper = (me & mask) != 0;
    const Segment keep = half(s, upper), give = half(s, !upper);
    const int partner = sh.old(me ^ mask);
    team_step(t, partner, cur + give.lo, give.hi - give.lo, partner, work + keep.lo, cur + keep.lo,
              keep.hi - keep.lo, RecvOp::add, "halving-doubling reduce-scatter");
    if (trail) trail->push_back(s);
    s = keep;
    cur = work;
  }
  if (cur != work) copy_floats(work, cur, n);  // p == 1
  return s;
}

// Recursive doubling from each taking-part rank's final segment (trail: the segments before each
// halving, in halving order), then the unfolding to the even ranks of folded pairs (skipping
// `skip`, which has the span already).
void double_and_unfold(const Team& t, const Shape& sh, float* buf, int64_t n, Segment s,
                       std::vector<Segment>& trail, int skip) {
  const int i = t.me;
  const int me = sh.nid(i);
  if (me >= 0) {
    int mask = sh.pp / 2;
    for (auto it = trail.rbegin(); it != trail.rend(); ++it, mask >>= 1) {
      const Segment whole = *it;
      const Segment other = s.lo == whole.lo ? Segment{s.hi, whole.hi} : Segment{whole.lo, s.lo};
      const int partner = sh.old(me ^ mask);
      team_step(t, partner, buf + s.lo, s.hi - s.lo, partner, buf + other.lo, nullptr,
                other.hi - other.lo, RecvOp::copy, "halving-doubling all-gather");
      s = whole;
    }
  }
  if (i < 2 * sh.r) {
    const int even = i - i % 2;
    if (even == skip) return;
    if (i % 2 == 1)
      team_send(t, even, buf, n, "halving-doubling unfold");
    else
      team_recv(t, i + 1, buf, n, "halving-doubling unfold");
  }
}

}  // namespace

void allreduce(const Team& t, float* buf, int64_t n, ScratchFloats&) {
  const Shape sh(t.size());
  if (sh.p == 1) return;
  std::vector<Segment> trail;
  const Segment s = fold_and_halve(t, sh, buf, buf, n, &trail);
  double_and_unfold(t, sh, buf, n, s, trail, -1);
}

void reduce(const Team& t, const float* src, float* dst, int64_t n, int root, ScratchFloats& sc) {
  const Shape sh(t.size());
  if (sh.p == 1) {
    copy_floats(dst, src, n);
    return;
  }
  float* work = t.me == root ? dst : sc.at_least(n);
  const Segment s = fold_and_halve(t, sh, src, work, n, nullptr);
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
  if (t.me == root) {
    for (int k = 0; k < sh.pp; ++k) {
      if (k == me) continue;
      const Segment g = final_segment(k, sh.pp, n);
      team_send(t, sh.old(k), buf + g.lo, g.hi - g.lo, "halving-doubling broadcast (scatter)");
    }
  } else if (me >= 0) {
    const Segment g = final_segment(me, sh.pp, n);
    team_recv(t, root, buf + g.lo, g.hi - g.lo, "halving-doubling broadcast (scatter)");
  }
  std::vector<Segment> trail;
  Segment s{0, n};
  if (me >= 0) {
    for (int mask = 1; mask < sh.pp; mask <<= 1) {
      trail.push_back(s);
      s = half(s, (me & mask) != 0);
    }
  }
  const int root_even = root < 2 * sh.r && root % 2 == 0 ? root : -1;
  double_and_unfold(t, sh, buf, n, s, trail, root_even);
}

}  // namespace easel::halving_doubling
