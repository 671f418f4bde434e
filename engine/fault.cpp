#include "engine/fault.hpp"

#include <cstdlib>

#include "engine/comm/run_env.hpp"

namespace easel {

namespace {

// A whole non-negative number, all of `s`.
std::optional<int64_t> whole(const std::string& s) {
  if (s.empty() || s.size() > 18 || s.find_first_not_of("0123456789") != std::string::npos)
    return std::nullopt;
  return std::stoll(s);
}

}  // namespace

Result<std::optional<Fault>> parse_fault(const std::string& text) {
  if (text.empty()) return std::optional<Fault>();
  const auto bad = [&] {
    return invalid_argument("EASEL_FAULT: '" + text +
                            "' is not ACTION:TARGET@STEP (ACTION kill, nan, throw, stall or hang; "
                            "TARGET rankR or groupG; e.g. kill:rank1@30)");
  };
  const size_t colon = text.find(':'), at = text.find('@');
  if (colon == std::string::npos || at == std::string::npos || at < colon) return bad();
  const std::string action = text.substr(0, colon), target = text.substr(colon + 1, at - colon - 1);
  Fault f;
  if (action == "kill")
    f.action = Fault::Action::kill;
  else if (action == "nan")
    f.action = Fault::Action::nan;
  else if (action == "throw")
    f.action = Fault::Action::raise;
  else if (action == "stall")
    f.action = Fault::Action::stall;
  else if (action == "hang")
    f.action = Fault::Action::hang;
  else
    return bad();
  std::optional<int64_t> n;
  if (target.rfind("rank", 0) == 0) {
    n = whole(target.substr(4));
  } else if (target.rfind("group", 0) == 0) {
    f.rank_target = false;
    n = whole(target.substr(5));
  }
  const std::optional<int64_t> step = whole(text.substr(at + 1));
  if (!n || !step || *n > (1 << 20)) return bad();
  f.target = static_cast<int>(*n);
  f.step = *step;
  return std::optional<Fault>(f);
}

Result<std::optional<Fault>> injected_fault() {
  const char* v = run_env("EASEL_FAULT");
  return parse_fault(v ? v : "");
}

bool fault_targets(const Fault& f, int rank, int local, int group) {
  return f.rank_target ? (rank == f.target && local == 0) : group == f.target;
}

}  // namespace easel
