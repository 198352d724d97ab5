// Where the tests find the repository's data and the programs they start.
// The paths are compiled into one small source (tests/paths.cpp) so that no
// other test source depends on the folder the repository was cloned into:
// the compiler cache (CMakeLists.txt) reads every other test object back in
// any clone of the same commit.
#pragma once

#include <string>

namespace coconet::test {

// The repository's root folder (workloads/, configs/, models/, docs/).
std::string source_root();

// The built `coconet` program; an exception in a build without it.
std::string coconet_binary();

// The built NCCL tuner plugin library; an exception in a build without it.
std::string nccl_tuner_plugin();

}  // namespace coconet::test
