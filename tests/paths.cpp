// The paths of tests/paths.h, given by tests/CMakeLists.txt as definitions of this source only.
#include "tests/paths.h"

#include <stdexcept>

namespace coconet::test {

std::string source_root() { return COCONET_SOURCE_ROOT; }

std::string coconet_binary() {
#ifdef COCONET_BINARY
  return COCONET_BINARY;
#else
  throw std::logic_error("this build has no coconet program");
#endif
}

std::string nccl_tuner_plugin() {
#ifdef COCONET_NCCL_TUNER_PLUGIN
  return COCONET_NCCL_TUNER_PLUGIN;
#else
  throw std::logic_error("this build has no NCCL tuner plugin");
#endif
}

}  // namespace coconet::test
