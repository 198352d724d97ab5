// The default way a backend runs a fused op (Backend::fused): the call's
// pieces pipelined through the backend's own methods, so that piece k's
// program runs while piece k+1's head collective and piece k-1's allgathers
// run on the comm stream. Every backend gets a real fused op from this:
// no full-size intermediate (the head's result lives in two piece-sized
// scratch places, gathered results are written in place), one pass over
// the state per element-wise pass.
#pragma once

#include "exec/backend.h"

namespace coconet::exec {

void run_fused(Backend& b, const FusedCall& call);

// Issues one head collective of a piece (no waiting).
void issue_head(Backend& b, const HeadCall& h);

}  // namespace coconet::exec
