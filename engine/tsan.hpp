// ThreadSanitizer annotations (docs/RELIABILITY.md, "Sanitizers"): they show TSan an ordering
// that is real but happens where TSan cannot see it. Each compiles to nothing unless easel is
// built with -fsanitize=thread (tools/sanitize tsan). None of them hides an access: a race
// between two of easel's accesses that nothing orders is still reported.
//  - tsan_release(p) / tsan_acquire(p): a hand-off inside a runtime that is not built with TSan.
//    oneTBB's parallel_pipeline passes a chunk from one stage to the next on its own threads,
//    inside libtbb (nets/data/pipeline_tbb.cpp): the stage that hands a chunk on releases the
//    chunk's tag, the stage that takes it acquires it. p names the hand-off (any address the
//    caller owns); acquire(p) orders after every release(p) before it.
//  - TsanTryLock: a timed lock that TSan's runtime does not intercept. libstdc++'s
//    std::timed_mutex::try_lock_for locks through pthread_mutex_clocklock, which GCC 12's (and
//    LLVM's, llvm-project issue 62623) TSan runtime does not know: without the annotation every
//    such lock is missing, its unlock is "unlock of an unlocked mutex" and every access under
//    it a race.
#pragma once

#if defined(__SANITIZE_THREAD__)
#define EASEL_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define EASEL_TSAN 1
#endif
#endif

#ifdef EASEL_TSAN
#include <sanitizer/tsan_interface.h>
#endif

namespace easel {

inline void tsan_release([[maybe_unused]] const void* p) {
#ifdef EASEL_TSAN
  __tsan_release(const_cast<void*>(p));
#endif
}

inline void tsan_acquire([[maybe_unused]] const void* p) {
#ifdef EASEL_TSAN
  __tsan_acquire(const_cast<void*>(p));
#endif
}

// Brackets one try-lock of the mutex at `m` (the address its unlock passes to
// pthread_mutex_unlock: a std::timed_mutex's native_handle()); done(true) when it was taken.
// Under TSan the lock is then known as if pthread_mutex_trylock had taken it.
class TsanTryLock {
 public:
  explicit TsanTryLock([[maybe_unused]] void* m) {
#ifdef EASEL_TSAN
    m_ = m;
    __tsan_mutex_pre_lock(m_, __tsan_mutex_try_lock);
#endif
  }
  void done([[maybe_unused]] bool locked) {
#ifdef EASEL_TSAN
    __tsan_mutex_post_lock(m_, __tsan_mutex_try_lock | (locked ? 0 : __tsan_mutex_try_lock_failed),
                           0);
#endif
  }

 private:
#ifdef EASEL_TSAN
  void* m_ = nullptr;
#endif
};

}  // namespace easel
