// Transport::run_streams' default: the streams in slots of blocking steps (transport.hpp).
#include "engine/comm/transport.hpp"

#include "engine/status.hpp"

namespace easel {

int run_streams_in_slots(Transport& t, int rank, const std::vector<Stream>& streams,
                         const char* what, bool reversed) {
  const size_t count = streams.size();
  std::vector<size_t> done(count, 0), at_start(count, 0);
  int side_by_side = 0;
  for (;;) {
    at_start = done;
    bool left = false, moved = false;
    int ran = 0;
    for (size_t i = 0; i < count; ++i) {
      const size_t k = reversed ? count - 1 - i : i;
      if (done[k] == streams[k].size()) continue;
      left = true;
      const StreamStep& st = streams[k][done[k]];
      if (st.after_stream >= 0 &&
          at_start[static_cast<size_t>(st.after_stream)] < static_cast<size_t>(st.after_count))
        continue;
      if (!st.idle()) {
        t.step(rank, st.x, what);
        ++ran;
      }
      ++done[k];
      moved = true;
    }
    if (!left) return side_by_side;
    EASEL_CHECK_MSG(moved, "streams that wait on each other");
    side_by_side += ran >= 2;
  }
}

void Transport::run_streams(int rank, const std::vector<Stream>& streams, const char* what) {
  run_streams_in_slots(*this, rank, streams, what);
}

}  // namespace easel
