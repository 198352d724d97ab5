// Host-side conversions between doubles and the storage types of device
// buffers, for the cuda backend's write() and read(): doubles are narrowed
// with round-to-nearest-even (through f32 for f16/bf16, exact for the
// integer-valued inputs coconet verifies with) and widened exactly.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "model/types.h"

namespace coconet::exec::cuda {

// The bytes of `values` stored as `t`.
[[nodiscard]] std::vector<std::uint8_t> encode(std::span<const double> values, model::DType t);
// The values of `count` elements of type `t` held in `bytes`.
[[nodiscard]] std::vector<double> decode(std::span<const std::uint8_t> bytes, model::DType t,
                                         std::int64_t count);

}  // namespace coconet::exec::cuda
