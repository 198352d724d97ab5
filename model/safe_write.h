// Writing the files a user names (--out, --trace) safely against hostile
// paths: the target must be a regular file or not exist yet (a symlink, FIFO,
// device or folder is refused before any work and again before the rename);
// the temporary is created with O_EXCL | O_NOFOLLOW under a random name in
// the target's folder, so nothing planted there is followed or overwritten;
// the finished file is renamed over the target, so a reader sees the old
// file or the new one. Temporaries are registered while they exist, so that
// a signal handler can remove them (remove_registered_temporaries).
#pragma once

#include <string>

namespace coconet::model {

// Throws UserError unless `path` is non-empty and names a regular file or
// nothing (its folder must exist). `flag` names the input in the message ("--out").
void check_output_file(const std::string& path, const std::string& flag);

// Writes `text` to `path` as described above. Throws UserError.
void write_file_safely(const std::string& path, const std::string& text,
                       const std::string& flag = "the output");

// A random name ".<base>.<16 hex digits>.<suffix>" for a sibling of `base`.
[[nodiscard]] std::string random_sibling_name(const std::string& base, const std::string& suffix);

// Temporaries (files or folders) to remove if the process is interrupted.
// register returns a slot for unregister; at most a few live at once.
int register_temporary(const std::string& path);
void unregister_temporary(int slot);
// Async-signal-safe: unlinks the registered files and removes the registered
// (flat or two-level) folders. For a SIGINT/SIGTERM handler.
void remove_registered_temporaries() noexcept;

// Installs a SIGINT/SIGTERM handler that removes the registered temporaries,
// prints "coconet: interrupted" and ends the process with `exit_code` (130).
// A rank of a job that a supervising coconet started (COCONET_RANK_STATUS_DIR
// set, exec/mpirun.h) stays silent: the supervisor says it once.
void remove_temporaries_on_interrupt(int exit_code);

}  // namespace coconet::model
