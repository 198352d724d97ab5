// Generated element-wise programs for bench_gpu (see bench_gpu_programs.cpp).
#pragma once

#include "model/elementwise_program.h"

namespace coconet::bench {

// Adam's m1, v1, w1 updates from workloads/adam.yaml ($COCONET_ROOT), compiled
// for the generic element-wise kernel: inputs named in program.input_names
// (g1 f16; m, v, w f32), outputs m1, v1, w1 (f32).
[[nodiscard]] model::ElementwiseProgram adam_program();

}  // namespace coconet::bench
