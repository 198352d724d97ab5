// Unit conversions of the cost model, each defined once.
#pragma once

namespace coconet::sim {

inline constexpr double kBytesPerGBpsUs = 1e3;  // 1 GB/s moves 1e3 bytes per microsecond
inline constexpr double kBitsPerByte = 8.0;     // NIC rates are Gb/s
inline constexpr double kFlopsPerTflopsUs = 1e6;  // 1 TFLOP/s does 1e6 FLOPs per microsecond
inline constexpr double kFlopsPerGflopsUs = 1e3;  // 1 GFLOP/s does 1e3 FLOPs per microsecond
inline constexpr double kGflopsPerTflops = 1e3;

// Microseconds to move `bytes` at `GBps`.
[[nodiscard]] inline double transfer_us(double bytes, double GBps) { return bytes / (GBps * kBytesPerGBpsUs); }
// GB/s reached moving `bytes` in `us` (0 when no time passed).
[[nodiscard]] inline double rate_GBps(double bytes, double us) { return us > 0 ? bytes / (us * kBytesPerGBpsUs) : 0.0; }

}  // namespace coconet::sim
