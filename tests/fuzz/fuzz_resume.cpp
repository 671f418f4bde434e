// libFuzzer target: resume_args (tools/cli/train_flags.cpp), the reader of a resumed run's
// config.json. The input is the file; the flags given on the command line are none, or
// --epochs (which drops the file's iterations), chosen by the input's length.
#include <stdlib.h>
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <string>

#include "tools/cli/cli.hpp"

namespace {

const std::string& run_dir() {
  static const std::string dir = [] {
    // tmpfs where there is one: the file is rewritten for every input.
    std::string tmpl = std::string(::access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp") +
                       "/easel_fuzz_resume_XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr) std::abort();
    return tmpl;
  }();
  return dir;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  {
    std::ofstream f(run_dir() + "/config.json", std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  const std::vector<std::string> given =
      size % 2 ? std::vector<std::string>{"epochs"} : std::vector<std::string>{};
  auto r = easel::cli::resume_args(run_dir(), given);
  if (r.ok()) {
    for (const std::string& a : r.value())
      if (a.rfind("--", 0) != 0 || a.find('=') == std::string::npos) __builtin_trap();
  } else if (r.status().message().rfind("--resume: ", 0) != 0 ||
             r.status().message().find('\n') != std::string::npos) {
    __builtin_trap();  // every error names --resume, on one line
  }
  return 0;
}
