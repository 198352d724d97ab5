// The host's fast fill of an input block: element for element the values of
// model::input_at (input_pattern.h), computed row by row. input_at divides
// the block index by the block's columns for every element; at BERT-large
// sizes (hundreds of millions of elements per tensor, every schedule filling
// its inputs afresh) that and the per-element work were most of a run's host
// time. Here a row's global index is carried from element to element and
// each row's elements are computed in one loop the compiler vectorizes
// (input_fill.cpp: with AVX-512 where the host has it, 8 elements at a
// time). The value stream is input_at's, unchanged:
// tests/unit/test_host_fill.cpp holds the two equal.
#pragma once

#include <cstdint>
#include <span>

#include "model/input_pattern.h"

namespace coconet::model {

// Writes input_at(p, first + k) into out[k] for every k (float: the value a
// double -> float conversion gives, as Backend::write does; every input
// value is a small integer times a power of two, exact in both).
void fill_input_values(const InputPattern& p, std::int64_t first, std::span<float> out);
void fill_input_values(const InputPattern& p, std::int64_t first, std::span<double> out);

}  // namespace coconet::model
