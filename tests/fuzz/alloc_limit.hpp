// Fuzz support: the most memory one input may make a parser hold at once. Counts the bytes that
// become live while an AllocLimit exists, through AddressSanitizer's allocation hooks, and traps
// (at the allocation, so that the report shows who asked) when they pass the limit: a header
// that claims a huge size must be refused before anything that size is allocated, not after.
// libFuzzer's -malloc_limit_mb sees one call at a time; this sees the sum. Without ASan, nothing.
#pragma once

#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define EASEL_FUZZ_ALLOC_HOOKS 1
#include <sanitizer/allocator_interface.h>
#endif
#endif

namespace easel::fuzz {

class AllocLimit {
 public:
  // Live bytes above `limit` between construction and destruction trap.
  explicit AllocLimit(int64_t limit) {
    install();
    live().store(0);
    limit_ref().store(limit);
  }
  AllocLimit(const AllocLimit&) = delete;
  AllocLimit& operator=(const AllocLimit&) = delete;
  ~AllocLimit() { limit_ref().store(0); }

 private:
  // Bytes allocated less bytes freed since the limit was set (frees of older blocks count too,
  // which can only lower it).
  static std::atomic<int64_t>& live() {
    static std::atomic<int64_t> bytes{0};
    return bytes;
  }
  static std::atomic<int64_t>& limit_ref() {
    static std::atomic<int64_t> limit{0};  // 0: not counting
    return limit;
  }
#ifdef EASEL_FUZZ_ALLOC_HOOKS
  static void on_malloc(const volatile void*, size_t size) {
    const int64_t limit = limit_ref().load(std::memory_order_relaxed);
    if (limit == 0) return;
    const int64_t now = live().fetch_add(static_cast<int64_t>(size)) + static_cast<int64_t>(size);
    if (now > limit) {
      char line[160];
      const int n = std::snprintf(line, sizeof line,
                                  "AllocLimit: %lld bytes live after an allocation of %zu, more "
                                  "than this target's limit of %lld\n",
                                  static_cast<long long>(now), size, static_cast<long long>(limit));
      if (n > 0) (void)!::write(2, line, static_cast<size_t>(n));
      __builtin_trap();
    }
  }
  static void on_free(const volatile void* p) {
    if (limit_ref().load(std::memory_order_relaxed) == 0 || p == nullptr) return;
    live().fetch_sub(static_cast<int64_t>(__sanitizer_get_allocated_size(const_cast<void*>(p))));
  }
  static void install() {
    static const bool once = [] {
      __sanitizer_install_malloc_and_free_hooks(on_malloc, on_free);
      return true;
    }();
    (void)once;
  }
#else
  static void install() {}
#endif
};

}  // namespace easel::fuzz
