#include "tools/cli/pytorch_export.hpp"

#include <stdlib.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "nets/graph.hpp"
#include "tools/cli/child.hpp"
#include "tools/cli/trained_run.hpp"

namespace easel::cli {

namespace fs = std::filesystem;

namespace {

// The arena with every inner product that reads a C x H x W input in an nhwc run given its
// columns in chw order: PyTorch's nn.Flatten (and torch.flatten) give chw.
Result<std::vector<float>> nchw_arena(const NetSpec& spec, Layout layout, const ArenaLayout& params,
                                      const float* weights) {
  std::vector<float> arena(weights, weights + params.total_floats());
  if (layout != Layout::nhwc) return arena;
  EASEL_ASSIGN_OR_RETURN(NetGraph graph, resolve_graph(spec));
  EASEL_RETURN_IF_ERROR(
      infer_shapes(graph, spec, {1, spec.channels, spec.height, spec.width}, layout).status());
  int last = -1;
  for (const Segment& s : params.segments()) {
    const bool first = s.layer != last;  // a layer's weights come before its bias
    last = s.layer;
    if (!first || s.layer < 0) continue;
    const OpDesc& d = graph.layers[static_cast<size_t>(s.layer)].op;
    if (d.kind != OpKind::inner_product || d.src.h * d.src.w == 1) continue;
    const std::vector<float> chw = chw_inner_product(d, weights + s.offset);
    std::copy(chw.begin(), chw.end(), arena.begin() + s.offset);
  }
  return arena;
}

// DIR/meta.json and DIR/data.bin as tools/bench/net_dump writes them, the weights alone.
Status write_dump(const NetSpec& spec, const ArenaLayout& params, const std::vector<float>& arena,
                  int64_t step, const fs::path& dir) {
  nlohmann::json arrays = nlohmann::json::array();
  for (const Segment& s : params.segments())
    arrays.push_back({{"name", s.name},
                      {"role", "weights"},
                      {"dims", s.dims},
                      {"dtype", "float32"},
                      {"offset", s.offset * static_cast<int64_t>(sizeof(float))},
                      {"count", s.count},
                      {"state", s.state}});
  const nlohmann::json meta = {{"net", spec.name},
                               {"input", {spec.channels, spec.height, spec.width}},
                               {"classes", spec.classes},
                               {"layout", "nchw"},
                               {"step", step},
                               {"arrays", arrays}};
  std::ofstream(dir / "meta.json") << meta.dump(1) << "\n";
  std::ofstream bin(dir / "data.bin", std::ios::binary);
  bin.write(reinterpret_cast<const char*>(arena.data()),
            static_cast<std::streamsize>(arena.size() * sizeof(float)));
  bin.close();
  if (!bin) return io_error("cannot write the weights to " + dir.string());
  return {};
}

// export_state_dict.py: $EASEL_PYTORCH_EXPORT, else beside the program (the build tree copies
// it there with net_equivalence.py), else in its share/easel (installed).
std::string find_tool() {
  if (const char* e = std::getenv("EASEL_PYTORCH_EXPORT"); e != nullptr && *e != '\0') return e;
  const fs::path dir = fs::path(self_exe()).parent_path();
  std::error_code ec;
  for (const fs::path& p :
       {dir / "export_state_dict.py", dir / ".." / "share" / "easel" / "export_state_dict.py"})
    if (fs::is_regular_file(p, ec)) return p.string();
  return {};
}

std::string last_line(const fs::path& log) {
  std::ifstream in(log);
  std::string line, last;
  while (std::getline(in, line))
    if (!line.empty()) last = line;
  return last;
}

// Runs the tool on the dump in `dir`; its summary, or its one-line refusal.
Result<std::string> run_tool(const fs::path& dir, const std::string& out) {
  const std::string tool = find_tool();
  if (tool.empty())
    return invalid_argument(
        "--format pytorch: export_state_dict.py not found beside the program nor in its "
        "share/easel (set EASEL_PYTORCH_EXPORT)");
  const char* py = std::getenv("EASEL_PYTHON");
  std::error_code ec;  // Debian's python3-torch is /usr/bin/python3's, not a pyenv's
  const std::string python = py != nullptr && *py != '\0'         ? py
                             : fs::exists("/usr/bin/python3", ec) ? "/usr/bin/python3"
                                                                  : "python3";
  const int rc = run_child(python, {tool, dir.string(), out}, dir / "log.txt");
  const std::string line = last_line(dir / "log.txt");
  if (rc == 0) return line;
  if (rc == 127 || rc < 0)
    return invalid_argument("--format pytorch: cannot run " + python +
                            " (apt-get install "
                            "python3-torch python3-torchvision)");
  if (rc == 2 || rc == 3) return invalid_argument(line);
  return io_error(tool + " failed (exit " + std::to_string(rc) + "): " + line);
}

}  // namespace

Result<std::string> write_state_dict(const NetSpec& spec, Layout layout, const ArenaLayout& params,
                                     const float* weights, int64_t step, const std::string& out) {
  EASEL_ASSIGN_OR_RETURN(std::vector<float> arena, nchw_arena(spec, layout, params, weights));
  std::string tmpl = (fs::temp_directory_path() / "easel_pytorch_XXXXXX").string();
  if (::mkdtemp(tmpl.data()) == nullptr)
    return io_error("cannot make a temporary folder in " + fs::temp_directory_path().string());
  const fs::path dir(tmpl);
  Result<std::string> r = [&]() -> Result<std::string> {
    EASEL_RETURN_IF_ERROR(write_dump(spec, params, arena, step, dir));
    return run_tool(dir, fs::absolute(out).string());
  }();
  std::error_code ec;
  fs::remove_all(dir, ec);
  return r;
}

}  // namespace easel::cli
