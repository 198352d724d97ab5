// Where workloads, topologies and experiments are found: a name (`adam`,
// `dgx-h100`) is looked up in the repository's workloads/ and configs/ folders
// (or $COCONET_ROOT), a path is used as it is.
#pragma once

#include <string>
#include <vector>

namespace coconet::model {

// The repository root holding workloads/ and configs/.
[[nodiscard]] std::string data_root();
[[nodiscard]] std::string resolve_workload(const std::string& name_or_path);     // throws UserError
[[nodiscard]] std::string resolve_topology(const std::string& name_or_path);     // throws UserError
[[nodiscard]] std::string resolve_experiment(const std::string& name_or_path);   // throws UserError
[[nodiscard]] std::vector<std::string> list_names(const std::string& folder);    // e.g. "workloads"
[[nodiscard]] std::string read_file(const std::string& path);                    // throws UserError
// The name among `choices` nearest to `word` by edit distance, empty when none
// is close (within a third of the word's length, at least 2 edits): what a
// "did you mean" suggests.
[[nodiscard]] std::string nearest_name(const std::string& word, const std::vector<std::string>& choices);
// " (did you mean 'X'?)" for the nearest of `choices`, "" when none is close.
[[nodiscard]] std::string did_you_mean(const std::string& word, const std::vector<std::string>& choices);
// "a, b and c" ("(none)" when empty).
[[nodiscard]] std::string joined_names(const std::vector<std::string>& names);
// Writes `text` to `path` atomically (model/safe_write.h: a random O_EXCL
// temporary in the same folder, then rename; a target that is not a regular
// file is refused), so a failed run never leaves a half-written file. Throws UserError.
void write_file_atomic(const std::string& path, const std::string& text);

}  // namespace coconet::model
