// Reference kernels of the kinds of several inputs (element-wise add, channel concatenation),
// written to be read. They implement forward_n/backward_n; forward/backward, which see one input
// only, must not be called on them.
#include <algorithm>
#include <cstring>
#include <vector>

#include "devices/cpu/ref_ops.hpp"

namespace easel {

namespace {

// The base of both: forward/backward of one input abort.
class RefJoin : public MultiInputOp<Op> {
 public:
  std::string impl() const override { return "ref"; }

 protected:
  explicit RefJoin(const OpDesc& d) : MultiInputOp(d) {}
};

// ---------------------------------------------------------------------------------------------
// dst = sum_i srcs[i] (one shape, so one memory order); every diff_srcs[i] = diff_dst.
class RefAdd final : public RefJoin {
 public:
  explicit RefAdd(const OpDesc& d) : RefJoin(d) {}

  void forward_n(std::span<const float* const> srcs, float* dst, std::span<const float* const>,
                 bool) override {
    const int64_t count = desc_.src.count();
    for (int64_t j = 0; j < count; ++j) {
      float sum = 0.f;
      for (size_t i = 0; i < inputs(); ++i)
        sum += srcs[i][j];
      dst[j] = sum;
    }
  }

  void backward_n(std::span<const float* const>, const float*, const float* diff_dst,
                  std::span<float* const> diff_srcs, std::span<const float* const>,
                  std::span<float* const>) override {
    const int64_t count = desc_.src.count();
    for (size_t i = 0; i < inputs(); ++i)
      if (diff_srcs[i] && diff_srcs[i] != diff_dst)
        std::copy(diff_dst, diff_dst + count, diff_srcs[i]);
  }
};

// ---------------------------------------------------------------------------------------------
// dst's channels are the inputs' in order: input i's channel c is dst's channel c0(i) + c.
// Backward copies each input's channels of diff_dst back.
class RefConcat final : public RefJoin {
 public:
  explicit RefConcat(const OpDesc& d) : RefJoin(d), o_(dst_shape(d)) {}

  void forward_n(std::span<const float* const> srcs, float* dst, std::span<const float* const>,
                 bool) override {
    int64_t c0 = 0;
    for (size_t i = 0; i < inputs(); ++i) {
      const Shape4& s = src_shape(i);
      for_each(s, [&](int64_t n, int64_t c, int64_t h, int64_t w) {
        dst[offset4(o_, desc_.layout, n, c0 + c, h, w)] =
            srcs[i][offset4(s, desc_.layout, n, c, h, w)];
      });
      c0 += s.c;
    }
  }

  void backward_n(std::span<const float* const>, const float*, const float* diff_dst,
                  std::span<float* const> diff_srcs, std::span<const float* const>,
                  std::span<float* const>) override {
    int64_t c0 = 0;
    for (size_t i = 0; i < inputs(); ++i) {
      const Shape4& s = src_shape(i);
      if (float* ds = diff_srcs[i]) {
        for_each(s, [&](int64_t n, int64_t c, int64_t h, int64_t w) {
          ds[offset4(s, desc_.layout, n, c, h, w)] =
              diff_dst[offset4(o_, desc_.layout, n, c0 + c, h, w)];
        });
      }
      c0 += s.c;
    }
  }

 private:
  template <typename F>
  static void for_each(const Shape4& s, F f) {
    for (int64_t n = 0; n < s.n; ++n)
      for (int64_t c = 0; c < s.c; ++c)
        for (int64_t h = 0; h < s.h; ++h)
          for (int64_t w = 0; w < s.w; ++w)
            f(n, c, h, w);
  }
  Shape4 o_;  // dst shape
};

}  // namespace

Result<std::unique_ptr<Op>> make_ref_add(const OpDesc& d) {
  return std::unique_ptr<Op>(new RefAdd(d));
}
Result<std::unique_ptr<Op>> make_ref_concat(const OpDesc& d) {
  return std::unique_ptr<Op>(new RefConcat(d));
}

}  // namespace easel
