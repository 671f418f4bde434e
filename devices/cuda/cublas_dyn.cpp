#include "devices/cuda/cublas_dyn.hpp"

#include <dlfcn.h>

#include <mutex>
#include <string>
#include <vector>

namespace easel::cublas_dyn {

namespace {

#define EASEL_CUBLAS_STR2(x) #x
#define EASEL_CUBLAS_STR(x) EASEL_CUBLAS_STR2(x)  // after macro expansion: cublasCreate_v2

Api g_api;
Status g_status = internal_error("cuBLAS: not loaded");
std::once_flag g_once;

template <typename Fn>
bool resolve(void* lib, const char* symbol, Fn& out, std::string& missing) {
  out = reinterpret_cast<Fn>(dlsym(lib, symbol));
  if (out == nullptr && missing.empty()) missing = symbol;
  return out != nullptr;
}

void open_library() {
  // The build's own toolkit first (EASEL_CUDA_LIBDIR, which the binary's runpath also names),
  // then the loader's search path.
  const std::string soname = "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR);
  std::vector<std::string> tries;
#ifdef EASEL_CUDA_LIBDIR
  tries.push_back(std::string(EASEL_CUDA_LIBDIR) + "/" + soname);
#endif
  tries.push_back(soname);
  void* lib = nullptr;
  std::string errors;
  for (const std::string& t : tries) {
    lib = dlopen(t.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib != nullptr) break;
    const char* e = dlerror();
    errors += (errors.empty() ? "" : "; ") + std::string(e ? e : t);
  }
  if (lib == nullptr) {
    g_status = unavailable("cuBLAS: cannot open " + soname + ": " + errors);
    return;
  }
  std::string missing;
  resolve(lib, EASEL_CUBLAS_STR(cublasCreate), g_api.create, missing);
  resolve(lib, EASEL_CUBLAS_STR(cublasDestroy), g_api.destroy, missing);
  resolve(lib, EASEL_CUBLAS_STR(cublasSetStream), g_api.set_stream, missing);
  resolve(lib, EASEL_CUBLAS_STR(cublasSetPointerMode), g_api.set_pointer_mode, missing);
  resolve(lib, EASEL_CUBLAS_STR(cublasSgemm), g_api.sgemm, missing);
  resolve(lib, "cublasGemmEx", g_api.gemm_ex, missing);
  resolve(lib, EASEL_CUBLAS_STR(cublasGetStatusName), g_api.status_name, missing);
  resolve(lib, EASEL_CUBLAS_STR(cublasGetStatusString), g_api.status_string, missing);
  if (!missing.empty()) {
    g_status = unavailable("cuBLAS: " + soname + " has no symbol " + missing);
    return;  // the library stays open: unloading it again is not worth the risk
  }
  g_status = {};
}

}  // namespace

Result<const Api*> load() {
  std::call_once(g_once, open_library);
  if (!g_status.ok()) return g_status;
  return &g_api;
}

const Api& api() {
  EASEL_CHECK_MSG(g_api.sgemm != nullptr, "cublas_dyn::api() before a successful load()");
  return g_api;
}

}  // namespace easel::cublas_dyn
