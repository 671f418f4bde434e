// WebDataset-style tar shards (stream_source.hpp's load_shards): each shard indexed from its
// headers (tar_index.hpp), its members grouped into samples by key, each sample's image and
// class found, nothing decoded.
#include <fcntl.h>
#include <glob.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <map>

#include "engine/log.hpp"
#include "nets/data/stream_source.hpp"
#include "nets/data/tar_index.hpp"

namespace easel {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kMaxClasses = 100'000;
constexpr const char* kForm =
    "shards:DIR (DIR/train-*.tar and DIR/val-*.tar) or shards:GLOB of training shards (their "
    "val-*.tar beside them), then :SIDE to decode them once at SIDE; each sample KEY.jpg|png "
    "with KEY.cls or in a CLASS/ folder";

// WebDataset's split of a member name: the key is everything up to the first '.' of the last
// path component, the extension the rest (lower case).
void split_name(const std::string& name, std::string* key, std::string* ext) {
  const size_t slash = name.rfind('/');
  const size_t dot = name.find('.', slash == std::string::npos ? 0 : slash + 1);
  *key = name.substr(0, dot);
  *ext = dot == std::string::npos ? "" : name.substr(dot + 1);
  for (char& c : *ext)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
}

// A member name or a class text as an error message shows it: control characters (a newline
// would break the one-line message) and bytes past ASCII as \xNN, at most 200 characters.
std::string shown(std::string_view s) {
  std::string out;
  for (const char ch : s.substr(0, 200)) {
    const auto c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c >= 0x7f) {
      char b[8];
      std::snprintf(b, sizeof b, "\\x%02x", c);
      out += b;
    } else {
      out += ch;
    }
  }
  return s.size() > 200 ? out + "..." : out;
}

// One sample of a shard: its image member and its label (-1: none yet), or its class folder.
struct Sample {
  int64_t offset = 0, size = 0;
  std::string member, folder;
  int64_t label = -1;
};

struct ShardList {
  std::vector<std::string> files;
  std::vector<std::vector<Sample>> samples;  // per file
};

Result<std::vector<std::string>> glob_files(const std::string& pattern) {
  glob_t g{};
  const int rc = ::glob(pattern.c_str(), 0, nullptr, &g);
  std::vector<std::string> out;
  if (rc == 0)
    for (size_t i = 0; i < g.gl_pathc; ++i)
      out.emplace_back(g.gl_pathv[i]);
  ::globfree(&g);
  if (rc != 0 && rc != GLOB_NOMATCH) return io_error(pattern + ": cannot list the shards");
  std::sort(out.begin(), out.end());
  return out;
}

// Makes m the image of sample smp; its class folder is the parent directory of its key
// (empty for a member at the top of the tar).
void set_image(const TarMember& m, const std::string& key, Sample* smp) {
  smp->offset = m.offset;
  smp->size = m.size;
  smp->member = m.name;
  const size_t slash = key.rfind('/');
  if (slash != std::string::npos) {
    const size_t prev = key.rfind('/', slash - 1);
    smp->folder = key.substr(prev == std::string::npos ? 0 : prev + 1,
                             slash - (prev == std::string::npos ? 0 : prev + 1));
  }
}

// Reads the class of sample smp from its .cls member m: an integer in [0, kMaxClasses), white
// space after it allowed. A bad one is an error unless skip_bad, which logs it and marks the
// sample bad (label -2, kept so by any later .cls of the key).
Status read_label(const TarReadAt& read_at, const TarMember& m, const std::string& path,
                  bool skip_bad, Sample* smp) {
  char text[32] = {};
  const size_t n = static_cast<size_t>(std::min<int64_t>(m.size, 31));
  EASEL_RETURN_IF_ERROR(read_at(m.offset, reinterpret_cast<uint8_t*>(text), n));
  std::string_view v(text, n);
  while (!v.empty() && (v.back() == '\n' || v.back() == ' ' || v.back() == '\r'))
    v.remove_suffix(1);
  int64_t label = -1;
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), label);
  if (m.size > 31 || v.empty() || ec != std::errc() || end != v.data() + v.size() || label < 0 ||
      label >= kMaxClasses) {
    const std::string why = path + ": member " + shown(m.name) + ": the class '" + shown(v) +
                            "' is not an integer in [0, 100000)";
    if (!skip_bad) return data_error(why);
    log_warn("data", why + ": its sample skipped (--skip-bad-images)");
    smp->label = -2;  // marks the sample bad
    return {};
  }
  if (smp->label != -2) smp->label = label;
  return {};
}

Status read_shard(const std::string& path, bool skip_bad, std::vector<Sample>* out) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return io_error(path + ": cannot open: " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return io_error(path + ": not a regular file");
  }
  const TarReadAt read_at = [fd, &path](int64_t off, uint8_t* dst, size_t n) -> Status {
    size_t got = 0;
    while (got < n) {
      const ssize_t r =
          ::pread(fd, dst + got, n - got, static_cast<off_t>(off) + static_cast<off_t>(got));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) return io_error(path + ": read failed at byte " + std::to_string(off));
      got += static_cast<size_t>(r);
    }
    return {};
  };
  std::vector<TarMember> members;
  Status s = scan_tar(read_at, st.st_size, path, &members);
  if (!s.ok()) {
    if (!skip_bad) {
      ::close(fd);
      return s;
    }
    log_warn("data", s.message() + ": the members before it are kept (--skip-bad-images)");
  }
  // Members of one key are adjacent (WebDataset's rule); a key's image and .cls make a sample.
  std::map<std::string, Sample> open;  // the current key's sample
  std::string key, ext, current;
  const auto flush = [&]() {
    for (auto& [k, smp] : open)
      if (!smp.member.empty()) out->push_back(std::move(smp));
    open.clear();
  };
  for (const TarMember& m : members) {
    split_name(m.name, &key, &ext);
    if (key != current) {
      flush();
      current = key;
    }
    Sample& smp = open[key];
    if (ext == "jpg" || ext == "jpeg" || ext == "png") {
      set_image(m, key, &smp);
    } else if (ext == "cls") {
      s = read_label(read_at, m, path, skip_bad, &smp);
      if (!s.ok()) {
        ::close(fd);
        return s;
      }
    }
  }
  flush();
  ::close(fd);
  out->erase(
      std::remove_if(out->begin(), out->end(), [](const Sample& x) { return x.label == -2; }),
      out->end());
  return {};
}

Result<ShardList> list_shards(const std::vector<std::string>& files, bool skip_bad) {
  ShardList l;
  l.files = files;
  l.samples.resize(files.size());
  for (size_t f = 0; f < files.size(); ++f)
    EASEL_RETURN_IF_ERROR(read_shard(files[f], skip_bad, &l.samples[f]));
  return l;
}

// The training and the val-*.tar shard files of spec (kForm), each list sorted: refused when
// a glob of training shards takes in a val-*.tar, or either list is empty.
Status find_shards(const std::string& spec, std::vector<std::string>* train,
                   std::vector<std::string>* val) {
  std::error_code ec;
  if (fs::is_directory(spec, ec)) {
    EASEL_ASSIGN_OR_RETURN(*train, glob_files((fs::path(spec) / "train-*.tar").string()));
    EASEL_ASSIGN_OR_RETURN(*val, glob_files((fs::path(spec) / "val-*.tar").string()));
  } else {
    EASEL_ASSIGN_OR_RETURN(*train, glob_files(spec));
    // Evaluation's shards trained on would be counted twice and make the test figures lie.
    for (const std::string& f : *train)
      if (fs::path(f).filename().string().starts_with("val-"))
        return invalid_argument("shards:" + spec + ": matches the validation shard " + f +
                                " (val-*.tar are evaluated, never trained on): give a glob of "
                                "training shards only, e.g. shards:DIR/train-*.tar");
    if (!train->empty()) {
      const fs::path dir = fs::path((*train)[0]).parent_path();
      EASEL_ASSIGN_OR_RETURN(*val, glob_files((dir / "val-*.tar").string()));
    }
  }
  if (train->empty()) return not_found("shards:" + spec + ": no training shards (" + kForm + ")");
  if (val->empty())
    return not_found("shards:" + spec + ": no val-*.tar beside the training shards");
  return {};
}

// The classes of the training samples tl: the .cls labels (their count the largest + 1), or
// the sorted names of their class folders into *folders. Refused when the samples mix both.
Result<int64_t> training_classes(const std::string& spec, const ShardList& tl,
                                 std::vector<std::string>* folders) {
  int64_t max_label = -1;
  bool by_cls = false, by_folder = false;
  for (const auto& v : tl.samples)
    for (const Sample& s : v) {
      if (s.label >= 0) {
        by_cls = true;
        max_label = std::max(max_label, s.label);
      } else {
        by_folder = true;
        folders->push_back(s.folder);
      }
    }
  std::sort(folders->begin(), folders->end());
  folders->erase(std::unique(folders->begin(), folders->end()), folders->end());
  if (by_cls && by_folder)
    return data_error("shards:" + spec + ": some samples have a .cls and some not (" + kForm + ")");
  return by_cls ? max_label + 1 : static_cast<int64_t>(folders->size());
}

// The StreamSource of shard list l (the val shards when is_val), each sample labelled by its
// .cls or by its folder's index in `folders` (the training classes): refused when a sample has
// neither, a class the training shards lack, or l has no sample.
Result<std::shared_ptr<StreamSource>> shard_source(const std::string& spec, const ShardList& l,
                                                   bool is_val, bool skip_bad,
                                                   const std::vector<std::string>& folders,
                                                   int64_t classes) {
  auto src = std::make_shared<StreamSource>();
  src->files = l.files;
  src->skip_bad = skip_bad;
  for (size_t f = 0; f < l.files.size(); ++f)
    for (const Sample& s : l.samples[f]) {
      int64_t label = s.label;
      if (label < 0) {
        const auto at = std::lower_bound(folders.begin(), folders.end(), s.folder);
        if (s.folder.empty() || at == folders.end() || *at != s.folder)
          return data_error(l.files[f] + ": member " + shown(s.member) + ": no .cls and " +
                            (s.folder.empty() ? std::string("no class folder")
                                              : "its folder '" + shown(s.folder) +
                                                    "' is not a class of "
                                                    "the training shards"));
        label = at - folders.begin();
      } else if (label >= classes) {
        return data_error(l.files[f] + ": member " + shown(s.member) + ": class " +
                          std::to_string(label) + " but the training shards have " +
                          std::to_string(classes) + (is_val ? "" : " classes"));
      }
      src->entries.push_back(
          {static_cast<int32_t>(f), static_cast<int32_t>(label), s.offset, s.size});
      src->members.push_back(s.member);
    }
  if (src->entries.empty())
    return data_error("shards:" + spec + ": no samples in the " +
                      (is_val ? std::string("val") : std::string("training")) + " shards");
  return src;
}

}  // namespace

Result<DataSplit> load_shards(const std::string& spec, int64_t side, bool skip_bad) {
  std::vector<std::string> train, val;
  EASEL_RETURN_IF_ERROR(find_shards(spec, &train, &val));
  EASEL_ASSIGN_OR_RETURN(ShardList tl, list_shards(train, skip_bad));
  EASEL_ASSIGN_OR_RETURN(ShardList vl, list_shards(val, skip_bad));
  std::vector<std::string> folders;
  EASEL_ASSIGN_OR_RETURN(const int64_t classes, training_classes(spec, tl, &folders));
  if (classes < 2) return data_error("shards:" + spec + ": fewer than 2 classes");
  EASEL_ASSIGN_OR_RETURN(auto tsrc, shard_source(spec, tl, false, skip_bad, folders, classes));
  EASEL_ASSIGN_OR_RETURN(auto vsrc, shard_source(spec, vl, true, skip_bad, folders, classes));
  std::string name = fs::path(spec).lexically_normal().filename().string();
  if (name.empty()) name = "shards";
  DataSplit split;
  split.train = streamed_dataset(std::move(tsrc), name + "/train", side, classes);
  split.test = streamed_dataset(std::move(vsrc), name + "/val", side, classes);
  return split;
}

}  // namespace easel
