// JPEG (libjpeg-turbo) and PNG (libpng) decoding to RGB, and the resize + centre crop of image
// folders. Both libraries report errors by calling a handler that must not return (libjpeg's
// default one calls exit()): ours record the message and longjmp back to the function that set
// the jump (with_jpeg, decode_png, encode_jpeg_raw, encode_png_raw); no frame between holds an
// object with a destructor, so the jump skips nothing.
#include "nets/data/image_decode.hpp"

// clang-format off
#include <cstdio>  // before jpeglib.h, which uses FILE
#include <jpeglib.h>
#include <jerror.h>
// clang-format on
#include <png.h>

#include <algorithm>
#include <cmath>
#include <csetjmp>
#include <cstdlib>
#include <cstring>

#include "engine/status.hpp"
#include "nets/data/resample.hpp"

namespace easel {
namespace {

constexpr size_t kWhy = 320;  // room for one library message and our words around it

// ---- JPEG ----

struct JpegErrors {
  jpeg_error_mgr mgr;  // first, so that libjpeg's cinfo->err points at the whole struct
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
  bool truncated;
};

[[noreturn]] void jpeg_fail(j_common_ptr cinfo) {
  auto* e = reinterpret_cast<JpegErrors*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, e->message);
  std::longjmp(e->jump, 1);
}

// Warnings (level -1) are counted, not printed; the one for a file that ends early makes the
// image an error (as PIL refuses a truncated image). Trace messages are dropped.
void jpeg_note(j_common_ptr cinfo, int level) {
  if (level >= 0) return;
  ++cinfo->err->num_warnings;
  if (cinfo->err->msg_code == JWRN_JPEG_EOF)
    reinterpret_cast<JpegErrors*>(cinfo->err)->truncated = true;
}

// Refuses a w x h image of more than max_pixels: 1 and the reason in why[kWhy] (what: "JPEG").
int refuse_pixels(const char* what, int64_t w, int64_t h, int64_t max_pixels, char* why) {
  std::snprintf(why, kWhy, "a %s of %lldx%lld pixels, more than the %lld-pixel limit", what,
                static_cast<long long>(w), static_cast<long long>(h),
                static_cast<long long>(max_pixels));
  return 1;
}

// Opens the JPEG in data[size], reads its header (refusing CMYK) and runs body(cinfo, err),
// which returns 0 on success, else 1 with the reason in why[kWhy]; then destroys cinfo, and a
// success that met the end of the file early becomes a refusal. libjpeg's errors, raised
// anywhere in body, jump back to this frame: body must hold no object with a destructor, and
// must not destroy cinfo itself.
template <class Body>
int with_jpeg(const uint8_t* data, size_t size, char* why, const Body& body) {
  jpeg_decompress_struct cinfo;
  JpegErrors err;
  std::memset(&cinfo, 0, sizeof cinfo);
  std::memset(&err, 0, sizeof err);
  cinfo.err = jpeg_std_error(&err.mgr);
  err.mgr.error_exit = jpeg_fail;
  err.mgr.emit_message = jpeg_note;
  if (setjmp(err.jump)) {
    jpeg_destroy_decompress(&cinfo);
    std::snprintf(why, kWhy, "corrupt JPEG (libjpeg: %s)", err.message);
    return 1;
  }
  jpeg_create_decompress(&cinfo);
  jpeg_mem_src(&cinfo, data, static_cast<unsigned long>(size));
  jpeg_read_header(&cinfo, TRUE);
  int failed = 0;
  if (cinfo.jpeg_color_space == JCS_CMYK || cinfo.jpeg_color_space == JCS_YCCK) {
    std::snprintf(why, kWhy, "unsupported JPEG colour space (CMYK): convert the image to RGB");
    failed = 1;
  } else {
    failed = body(cinfo, static_cast<const JpegErrors&>(err));
  }
  jpeg_destroy_decompress(&cinfo);
  if (!failed && err.truncated) {
    std::snprintf(why, kWhy, "truncated JPEG (libjpeg: Premature end of JPEG file)");
    return 1;
  }
  return failed;
}

// jpeg_start_decompress: 0, else 1 and the reason in why[kWhy] when the image is not RGB.
int start_rgb(jpeg_decompress_struct& cinfo, char* why) {
  jpeg_start_decompress(&cinfo);
  if (cinfo.output_components == 3) return 0;  // libjpeg converts every 1- and 3-channel space
  std::snprintf(why, kWhy, "JPEG decodes to %d channels, not RGB", cinfo.output_components);
  return 1;
}

// 0 on success, else 1 and the reason in why[kWhy].
int decode_jpeg(const uint8_t* data, size_t size, int64_t min_side, int64_t max_pixels,
                RgbImage* out, char* why) {
  return with_jpeg(data, size, why, [&](jpeg_decompress_struct& cinfo, const JpegErrors& err) {
    // A JPEG of several scans (progressive, or one scan per component) is held whole as DCT
    // coefficients until its last scan is read: 2 bytes per sample of the full image, whatever
    // the scale it is decoded at. Its full size is limited too (a header of 65500x65500 decoded
    // at 1/8 asked libjpeg for 13 GB).
    const int64_t full_w = cinfo.image_width, full_h = cinfo.image_height;
    if (jpeg_has_multiple_scans(&cinfo) && full_w * full_h > max_pixels) {
      std::snprintf(why, kWhy,
                    "a progressive JPEG of %lldx%lld pixels, more than the %lld-pixel limit (it "
                    "is held whole to be decoded, at any scale)",
                    static_cast<long long>(full_w), static_cast<long long>(full_h),
                    static_cast<long long>(max_pixels));
      return 1;
    }
    cinfo.out_color_space = JCS_RGB;
    const int64_t shorter = std::min(cinfo.image_width, cinfo.image_height);
    unsigned denom = 1;
    while (denom < 8 && min_side > 0 && (shorter + 2 * denom - 1) / (2 * denom) >= min_side)
      denom *= 2;
    cinfo.scale_num = 1;
    cinfo.scale_denom = denom;
    jpeg_calc_output_dimensions(&cinfo);
    const int64_t w = cinfo.output_width, h = cinfo.output_height;
    if (w * h > max_pixels) return refuse_pixels("JPEG", w, h, max_pixels, why);
    if (start_rgb(cinfo, why)) return 1;
    out->width = w;
    out->height = h;
    // Room reserved once, rows added as they are decoded, and the first row past the end of the
    // file stops it: a short file claiming a large image touches only the rows it holds (one of
    // 922 bytes claiming 65500x65500 decoded 8188 grey rows, 5 s under ASan, before the
    // refusal).
    out->rgb.clear();
    out->rgb.reserve(static_cast<size_t>(w * h * 3));
    while (cinfo.output_scanline < cinfo.output_height && !err.truncated) {
      out->rgb.resize(out->rgb.size() + static_cast<size_t>(w * 3));
      JSAMPROW row = out->rgb.data() + int64_t{cinfo.output_scanline} * w * 3;
      jpeg_read_scanlines(&cinfo, &row, 1);
    }
    if (!err.truncated) jpeg_finish_decompress(&cinfo);
    return 0;
  });
}

// What decode_jpeg_box leaves for the resampling (held by its caller: the decoding frame holds
// no object with a destructor).
struct BoxWork {
  std::vector<Taps> tx, ty;
  std::vector<uint8_t> region;  // rows of region_w * 3 bytes; pixel (0, 0) is (origin_x, origin_y)
  int64_t region_w = 0, origin_x = 0, origin_y = 0;
};

// Decodes the rows [y0, y1) and columns [x0, x1) (widened to iMCUs) of a started decode into
// work's region.
void read_region(jpeg_decompress_struct& cinfo, const JpegErrors& err, int64_t x0, int64_t x1,
                 int64_t y0, int64_t y1, BoxWork* work) {
  JDIMENSION xoff = static_cast<JDIMENSION>(x0), cw = static_cast<JDIMENSION>(x1 - x0);
  if (cw < cinfo.output_width) jpeg_crop_scanline(&cinfo, &xoff, &cw);  // widened to iMCUs
  work->origin_x = xoff;
  work->region_w = cw;
  work->origin_y = y0;
  if (y0 > 0) jpeg_skip_scanlines(&cinfo, static_cast<JDIMENSION>(y0));
  work->region.resize(static_cast<size_t>((y1 - y0) * int64_t{cw} * 3));
  while (int64_t{cinfo.output_scanline} < y1 && !err.truncated) {
    JSAMPROW row = work->region.data() + (int64_t{cinfo.output_scanline} - y0) * cw * 3;
    jpeg_read_scanlines(&cinfo, &row, 1);
  }
}

// decode_jpeg for a box: 0 on success, else 1 and the reason in why[kWhy].
int decode_jpeg_box(const uint8_t* data, size_t size, const BoxDecode& how, int64_t max_pixels,
                    BoxWork* work, char* why) {
  return with_jpeg(data, size, why, [&](jpeg_decompress_struct& cinfo, const JpegErrors& err) {
    const int64_t full_w = cinfo.image_width, full_h = cinfo.image_height;
    if (full_w * full_h > max_pixels)  // as decode_jpeg's, at any scale
      return refuse_pixels("JPEG", full_w, full_h, max_pixels, why);
    cinfo.out_color_space = JCS_RGB;
    const ImageBox box = how.choose(full_w, full_h);
    unsigned denom = 1;
    const double side = static_cast<double>(how.side);
    while (how.dct_scaling && denom < 8 && box.w / (2 * denom) >= side &&
           box.h / (2 * denom) >= side)
      denom *= 2;
    cinfo.scale_num = 1;
    cinfo.scale_denom = denom;
    jpeg_calc_output_dimensions(&cinfo);
    const int64_t w = cinfo.output_width, h = cinfo.output_height;
    const double sx = static_cast<double>(w) / static_cast<double>(full_w);
    const double sy = static_cast<double>(h) / static_cast<double>(full_h);
    work->tx = box_taps(w, box.x0 * sx, box.w * sx, how.side);
    work->ty = box_taps(h, box.y0 * sy, box.h * sy, how.side);
    // A margin of one iMCU (at most 16 pixels) around what the taps read: fancy upsampling of
    // subsampled chroma reads the neighbouring samples, which a tighter crop would replicate
    // from its edge instead (then the bytes would differ from the full decode's).
    constexpr int64_t kMargin = 16;
    const int64_t x0 = how.crop ? std::max<int64_t>(taps_begin(work->tx) - kMargin, 0) : 0;
    const int64_t x1 = how.crop ? std::min<int64_t>(taps_end(work->tx) + kMargin, w) : w;
    const int64_t y0 = how.crop ? std::max<int64_t>(taps_begin(work->ty) - kMargin, 0) : 0;
    const int64_t y1 = how.crop ? std::min<int64_t>(taps_end(work->ty) + kMargin, h) : h;
    if (start_rgb(cinfo, why)) return 1;
    read_region(cinfo, err, x0, x1, y0, y1, work);
    return 0;  // the rows below the box are never decoded
  });
}

// ---- PNG ----

struct PngSource {
  const uint8_t* data;
  size_t size, at;
};

struct PngErrors {
  char message[kWhy / 2];
};

[[noreturn]] void png_fail(png_structp png, png_const_charp message) {
  auto* e = static_cast<PngErrors*>(png_get_error_ptr(png));
  std::snprintf(e->message, sizeof e->message, "%s", message);
  png_longjmp(png, 1);
}

void png_ignore(png_structp, png_const_charp) {}  // warnings (bad ancillary chunks)

void png_source(png_structp png, png_bytep dst, size_t n) {
  auto* s = static_cast<PngSource*>(png_get_io_ptr(png));
  if (n > s->size - s->at) png_error(png, "the file ends early (truncated)");
  std::memcpy(dst, s->data + s->at, n);
  s->at += n;
}

int decode_png(const uint8_t* data, size_t size, int64_t max_pixels, RgbImage* out, char* why) {
  PngErrors err;
  err.message[0] = '\0';
  PngSource src{data, size, 0};
  png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &err, png_fail, png_ignore);
  png_infop info = png ? png_create_info_struct(png) : nullptr;
  if (info == nullptr) {
    png_destroy_read_struct(&png, nullptr, nullptr);
    std::snprintf(why, kWhy, "libpng: out of memory");
    return 1;
  }
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_read_struct(&png, &info, nullptr);
    std::snprintf(why, kWhy, "corrupt PNG (libpng: %s)", err.message);
    return 1;
  }
  png_set_read_fn(png, &src, png_source);
  png_read_info(png, info);
  const int64_t w = png_get_image_width(png, info), h = png_get_image_height(png, info);
  const int depth = png_get_bit_depth(png, info), type = png_get_color_type(png, info);
  if (w * h > max_pixels) {
    png_destroy_read_struct(&png, &info, nullptr);
    return refuse_pixels("PNG", w, h, max_pixels, why);
  }
  // What the header claims must fit in the file: deflate inflates at most 1032:1 (as
  // nets/data/idx.cpp takes for gzip), so a short file claiming a large image is refused before
  // its buffer is allocated (70 bytes claiming 11585x11585 zeroed 402 MB, then failed).
  const int64_t pixel_bytes = (w * h * depth * png_get_channels(png, info) + 7) / 8;
  if (pixel_bytes > int64_t{1032} * static_cast<int64_t>(size)) {
    png_destroy_read_struct(&png, &info, nullptr);
    std::snprintf(why, kWhy,
                  "truncated PNG: its header claims %lldx%lld pixels (%lld bytes), more than its "
                  "%zu bytes can hold",
                  static_cast<long long>(w), static_cast<long long>(h),
                  static_cast<long long>(pixel_bytes), size);
    return 1;
  }
  // To 8-bit RGB: 16 -> 8 bits, palette -> RGB, 1/2/4-bit grey -> 8, alpha (and the alpha a
  // palette's transparency expands to) dropped, grey -> RGB.
  if (depth == 16) png_set_strip_16(png);
  if (type == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
  if (type == PNG_COLOR_TYPE_GRAY && depth < 8) png_set_expand_gray_1_2_4_to_8(png);
  png_set_strip_alpha(png);
  if (type == PNG_COLOR_TYPE_GRAY || type == PNG_COLOR_TYPE_GRAY_ALPHA) png_set_gray_to_rgb(png);
  const int passes = png_set_interlace_handling(png);
  png_read_update_info(png, info);
  if (png_get_channels(png, info) != 3 || png_get_bit_depth(png, info) != 8 ||
      png_get_rowbytes(png, info) != static_cast<size_t>(w * 3)) {
    png_destroy_read_struct(&png, &info, nullptr);
    std::snprintf(why, kWhy, "unsupported PNG (colour type %d, %d bits) after conversion", type,
                  depth);
    return 1;
  }
  out->width = w;
  out->height = h;
  out->rgb.resize(static_cast<size_t>(w * h * 3));
  for (int pass = 0; pass < passes; ++pass)  // an interlaced image fills each row in passes
    for (int64_t y = 0; y < h; ++y)
      png_read_row(png, out->rgb.data() + y * w * 3, nullptr);
  png_read_end(png, nullptr);
  png_destroy_read_struct(&png, &info, nullptr);
  return 0;
}

// ---- resize ----

// PIL's precompute_coeffs for its bilinear (triangle) filter: output coordinate j of `out`
// samples input `in` around (j + 0.5) * in / out, over a support widened by the scale when
// shrinking; weights normalised to sum 1. Only j in [from, from + n).
std::vector<Taps> taps(int64_t in, int64_t out, int64_t from, int64_t n) {
  const double scale = static_cast<double>(in) / static_cast<double>(out);
  std::vector<Taps> t(static_cast<size_t>(n));
  for (int64_t j = 0; j < n; ++j)
    t[static_cast<size_t>(j)] =
        triangle_taps(in, (static_cast<double>(from + j) + 0.5) * scale, std::max(scale, 1.0));
  return t;
}

}  // namespace

Status decode_image(const uint8_t* data, size_t size, const std::string& path, int64_t min_side,
                    RgbImage* out, int64_t max_pixels) {
  EASEL_CHECK(max_pixels > 0 && max_pixels <= kMaxImagePixels);
  static constexpr uint8_t kPng[8] = {0x89, 'P', 'N', 'G', 0x0d, 0x0a, 0x1a, 0x0a};
  char why[kWhy] = "";
  int failed = 0;
  if (size >= 3 && data[0] == 0xff && data[1] == 0xd8 && data[2] == 0xff) {
    failed = decode_jpeg(data, size, min_side, max_pixels, out, why);
  } else if (size >= 8 && std::memcmp(data, kPng, 8) == 0) {
    failed = decode_png(data, size, max_pixels, out, why);
  } else {
    if (size == 0) return data_error(path + ": empty file");
    return data_error(path + ": neither a JPEG nor a PNG image (by its first bytes)");
  }
  if (failed) return data_error(path + ": " + why);
  return {};
}

void resize_center_crop(const RgbImage& src, int64_t side, uint8_t* dst) {
  EASEL_CHECK(src.width > 0 && src.height > 0 && side > 0);
  const int64_t w = src.width, h = src.height;
  // torchvision's Resize(side): the shorter side becomes side, the longer int(side * long /
  // short); CenterCrop(side): offsets int(round((resized - side) / 2.0)).
  int64_t rw = side, rh = side;
  if (w < h) rh = side * h / w;
  if (h < w) rw = side * w / h;
  const auto offset = [side](int64_t resized) {
    return static_cast<int64_t>(std::nearbyint(static_cast<double>(resized - side) / 2.0));
  };
  const std::vector<Taps> tx = taps(w, rw, offset(rw), side);
  const std::vector<Taps> ty = taps(h, rh, offset(rh), side);
  // Horizontal pass over the input rows the vertical pass reads: tmp [rows, side, 3].
  const int64_t row0 = ty.front().first;
  const int64_t row1 = ty.back().first + static_cast<int64_t>(ty.back().w.size());
  std::vector<float> tmp(static_cast<size_t>((row1 - row0) * side * 3));
  for (int64_t y = row0; y < row1; ++y) {
    const uint8_t* s = src.rgb.data() + y * w * 3;
    float* t = tmp.data() + (y - row0) * side * 3;
    for (int64_t x = 0; x < side; ++x) {
      const Taps& k = tx[static_cast<size_t>(x)];
      float acc[3] = {0, 0, 0};
      for (size_t i = 0; i < k.w.size(); ++i) {
        const uint8_t* p = s + (k.first + static_cast<int64_t>(i)) * 3;
        for (int c = 0; c < 3; ++c)
          acc[c] += k.w[i] * static_cast<float>(p[c]);
      }
      for (int c = 0; c < 3; ++c)
        t[x * 3 + c] = acc[c];
    }
  }
  // Vertical pass, rounded to bytes, chw.
  const int64_t plane = side * side;
  for (int64_t y = 0; y < side; ++y) {
    const Taps& k = ty[static_cast<size_t>(y)];
    for (int64_t x = 0; x < side; ++x) {
      float acc[3] = {0, 0, 0};
      for (size_t i = 0; i < k.w.size(); ++i) {
        const float* p = tmp.data() + ((k.first - row0 + static_cast<int64_t>(i)) * side + x) * 3;
        for (int c = 0; c < 3; ++c)
          acc[c] += k.w[i] * p[c];
      }
      for (int c = 0; c < 3; ++c)
        dst[c * plane + y * side + x] =
            static_cast<uint8_t>(std::clamp(std::lround(acc[c]), 0l, 255l));
    }
  }
}

Status decode_box(const uint8_t* data, size_t size, const std::string& path, const BoxDecode& how,
                  uint8_t* dst, int64_t max_pixels) {
  EASEL_CHECK(how.side > 0 && max_pixels > 0 && max_pixels <= kMaxImagePixels);
  char why[kWhy] = "";
  thread_local BoxWork work;  // reused by the thread: no fresh (mmapped, zeroed) region per image
  if (size >= 3 && data[0] == 0xff && data[1] == 0xd8 && data[2] == 0xff) {
    if (decode_jpeg_box(data, size, how, max_pixels, &work, why))
      return data_error(path + ": " + why);
  } else {
    RgbImage image;
    EASEL_RETURN_IF_ERROR(decode_image(data, size, path, 0, &image, max_pixels));
    const ImageBox box = how.choose(image.width, image.height);
    work.tx = box_taps(image.width, box.x0, box.w, how.side);
    work.ty = box_taps(image.height, box.y0, box.h, how.side);
    work.region = std::move(image.rgb);
    work.region_w = image.width;
  }
  resample_box(work.region.data(), work.region_w, work.origin_x, work.origin_y, work.tx, work.ty,
               dst);
  return {};
}

namespace {

// 0 on success, else 1 and the reason in why[kWhy]; *buf (malloc'd by libjpeg) is the caller's.
int encode_jpeg_raw(const RgbImage& image, int quality, unsigned char** buf, unsigned long* size,
                    char* why) {
  jpeg_compress_struct c;
  JpegErrors err;
  std::memset(&c, 0, sizeof c);
  std::memset(&err, 0, sizeof err);
  c.err = jpeg_std_error(&err.mgr);
  err.mgr.error_exit = jpeg_fail;
  err.mgr.emit_message = jpeg_note;
  if (setjmp(err.jump)) {
    jpeg_destroy_compress(&c);
    std::snprintf(why, kWhy, "JPEG encoding failed (libjpeg: %s)", err.message);
    return 1;
  }
  jpeg_create_compress(&c);
  jpeg_mem_dest(&c, buf, size);
  c.image_width = static_cast<JDIMENSION>(image.width);
  c.image_height = static_cast<JDIMENSION>(image.height);
  c.input_components = 3;
  c.in_color_space = JCS_RGB;
  jpeg_set_defaults(&c);
  jpeg_set_quality(&c, quality, TRUE);
  jpeg_start_compress(&c, TRUE);
  while (c.next_scanline < c.image_height) {
    JSAMPROW row =
        const_cast<JSAMPROW>(image.rgb.data()) + int64_t{c.next_scanline} * image.width * 3;
    jpeg_write_scanlines(&c, &row, 1);
  }
  jpeg_finish_compress(&c);
  jpeg_destroy_compress(&c);
  return 0;
}

void png_sink(png_structp png, png_bytep src, size_t n) {
  static_cast<std::vector<uint8_t>*>(png_get_io_ptr(png))
      ->insert(static_cast<std::vector<uint8_t>*>(png_get_io_ptr(png))->end(), src, src + n);
}

void png_flush(png_structp) {}

int encode_png_raw(const RgbImage& image, std::vector<uint8_t>* out, char* why) {
  PngErrors err;
  err.message[0] = '\0';
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, &err, png_fail, png_ignore);
  png_infop info = png ? png_create_info_struct(png) : nullptr;
  if (info == nullptr) {
    png_destroy_write_struct(&png, nullptr);
    std::snprintf(why, kWhy, "PNG encoding failed (libpng: out of memory)");
    return 1;
  }
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_write_struct(&png, &info);
    std::snprintf(why, kWhy, "PNG encoding failed (libpng: %s)", err.message);
    return 1;
  }
  png_set_write_fn(png, out, png_sink, png_flush);
  png_set_IHDR(png, info, static_cast<png_uint_32>(image.width),
               static_cast<png_uint_32>(image.height), 8, PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE,
               PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_write_info(png, info);
  for (int64_t y = 0; y < image.height; ++y)
    png_write_row(png, image.rgb.data() + y * image.width * 3);
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  return 0;
}

}  // namespace

Status encode_jpeg(const RgbImage& image, int quality, std::vector<uint8_t>* out) {
  EASEL_CHECK(image.width > 0 && image.height > 0 &&
              image.rgb.size() == static_cast<size_t>(image.width * image.height * 3));
  unsigned char* buf = nullptr;
  unsigned long size = 0;
  char why[kWhy] = "";
  const int failed = encode_jpeg_raw(image, quality, &buf, &size, why);
  if (!failed) out->assign(buf, buf + size);
  std::free(buf);  // libjpeg's jpeg_mem_dest buffer
  if (failed) return internal_error(why);
  return {};
}

Status encode_png(const RgbImage& image, std::vector<uint8_t>* out) {
  EASEL_CHECK(image.width > 0 && image.height > 0 &&
              image.rgb.size() == static_cast<size_t>(image.width * image.height * 3));
  out->clear();
  char why[kWhy] = "";
  if (encode_png_raw(image, out, why) != 0) return internal_error(why);
  return {};
}

}  // namespace easel
