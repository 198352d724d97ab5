// Host conversions for write() / read() (see host_convert.h).
#include "exec/cuda/host_convert.h"

#include <cstring>

#include "model/half.h"
#include "model/error.h"

namespace coconet::exec::cuda {
namespace {

int width(model::DType t) { return t == model::DType::f32 ? 4 : 2; }

}  // namespace

std::vector<std::uint8_t> encode(std::span<const double> values, model::DType t) {
  std::vector<std::uint8_t> out(values.size() * static_cast<std::size_t>(width(t)));
  for (std::size_t i = 0; i < values.size(); ++i) {
    const float f = static_cast<float>(values[i]);
    std::uint8_t* dst = out.data() + i * static_cast<std::size_t>(width(t));
    if (t == model::DType::f32) {
      std::memcpy(dst, &f, sizeof f);
    } else {
      const std::uint16_t h =
          t == model::DType::f16 ? model::float_to_f16(f) : model::float_to_bf16(f);
      std::memcpy(dst, &h, sizeof h);
    }
  }
  return out;
}

std::vector<double> decode(std::span<const std::uint8_t> bytes, model::DType t,
                           std::int64_t count) {
  COCONET_ASSERT(static_cast<std::int64_t>(bytes.size()) >= count * width(t),
                 "decode: too few bytes");
  std::vector<double> out(static_cast<std::size_t>(count));
  for (std::size_t i = 0; i < out.size(); ++i) {
    const std::uint8_t* src = bytes.data() + i * static_cast<std::size_t>(width(t));
    if (t == model::DType::f32) {
      float f = 0.0f;
      std::memcpy(&f, src, sizeof f);
      out[i] = f;
    } else {
      std::uint16_t h = 0;
      std::memcpy(&h, src, sizeof h);
      out[i] = t == model::DType::f16 ? model::f16_to_float(h) : model::bf16_to_float(h);
    }
  }
  return out;
}

}  // namespace coconet::exec::cuda
