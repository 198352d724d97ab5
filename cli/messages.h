// Messages of our own for everything the command-line parser (CLI11) reports:
// each names the flag and what it accepts, an unknown command suggests the
// nearest, and `coconet --version` prints the build's version, commit, build
// type and the CUDA, NCCL and MPI versions it was built with.
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace coconet::cli {

// Installs the messages and `--version` on the top-level app; `argv` is kept
// to name an unknown command.
void configure_messages(CLI::App& app, int argc, char** argv);

// What `--version` prints.
[[nodiscard]] std::string version_text();

// A whole number of at least `min`: "--ranks: needs a whole number of at least 1, got 0".
[[nodiscard]] CLI::Validator at_least(long min);

// One of `names`: "--backend: expected cuda or cpu, got 'gpu'". Set the option's
// type_name to names joined by '|' so help shows them.
[[nodiscard]] CLI::Validator one_of(std::vector<std::string> names);

// The name among `choices` nearest to `word` (edit distance), empty when none is close.
[[nodiscard]] std::string nearest(const std::string& word, const std::vector<std::string>& choices);

}  // namespace coconet::cli
