// The bounds on what coconet accepts, stated once and checked at the boundary
// (parsing, the expansion into points, lowering, a topology's node count), so
// that no input reaches undefined behaviour (a signed overflow), a stack
// overflow or unbounded work. Each check throws UserError (exit 2) with a
// message that names the input and the limit.
//
// All size arithmetic goes through checked_mul/checked_add: a product past
// 64 bits is a UserError, never a wrapped value.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "model/error.h"

namespace coconet::model {

struct Program;
struct Schedule;

// Text and structure of programs.
// A YAML file: 4 MiB. The largest file coconet writes, a tune file, takes about
// 600 bytes a point (7,000 points fit); yaml-cpp cannot be stopped inside one
// scalar, and reads a 4 MiB one in about 1 s (15 MB took 4 s, measured on 2
// loaded cores), so the size is checked before the file is read.
inline constexpr std::size_t kMaxInputBytes = std::size_t{4} << 20;
inline constexpr std::size_t kMaxExprLength = 65536;                  // characters of one statement
inline constexpr int kMaxExprDepth =
    512;  // nesting of an expression tree (parentheses, calls, operators)
inline constexpr std::size_t kMaxStatements = 100000;  // statements of one program
inline constexpr int kMaxYamlDepth = 64;               // nesting of a YAML document
// Values (keys, items, scalars) of a YAML file, all its documents together,
// and of one document with its aliases expanded. yaml-cpp spends about 0.5 KB
// per value of a tree, so 2^18 values stay near 150 MB; the largest files
// coconet reads are tune files (about 40 values per point: 5,000 points fit).
inline constexpr std::size_t kMaxYamlNodes = std::size_t{1} << 18;
// Aliases (*name) of a YAML file: none of coconet's files needs one; a few
// thousand leave room for hand-written reuse, not for an alias bomb.
inline constexpr std::int64_t kMaxYamlAliases = 4096;
// Documents of a YAML file: a tune file holds one per point, and an
// experiment entry expands to at most kMaxPoints points.
inline constexpr std::int64_t kMaxYamlDocuments = 10000;

// Experiments and machines.
inline constexpr std::int64_t kMaxPoints =
    10000;  // points (size combinations) per experiment entry
inline constexpr std::int64_t kMaxRanks = std::int64_t{1}
                                          << 20;  // ranks per group / world size, simulated
inline constexpr int kMaxLocalRanks = 256;  // ranks `--ranks N` starts with mpirun on this machine
inline constexpr std::int64_t kMaxNodes = std::int64_t{1} << 16;  // nodes of a topology
inline constexpr std::int64_t kMaxGpusPerNode = 1024;             // GPUs (or cores) of one node
inline constexpr std::int64_t kMaxGpus = kMaxRanks;               // nodes x GPUs per node
inline constexpr int kMaxGroups = 1024;  // process groups (pipeline stages) of a program

// Tensors and knobs. 2^42 bytes (4 TiB) per global tensor keeps every product
// with a rank count (<= 2^20) inside 63 bits.
inline constexpr std::int64_t kMaxTensorBytes = std::int64_t{1} << 42;
inline constexpr int kMaxChunks =
    1 << 16;  // chunks of an overlap group (and never more than its rows)
inline constexpr int kMaxChannels = 64;                  // NCCL channels (NCCL's MAXCHANNELS)
inline constexpr double kMaxTimeoutS = 7 * 24 * 3600.0;  // a timeout: one week

// a * b and a + b of non-negative counts; `what` names the quantity in the
// UserError thrown when the result does not fit in 64 bits.
[[nodiscard]] std::int64_t checked_mul(std::int64_t a, std::int64_t b, const std::string& what);
[[nodiscard]] std::int64_t checked_add(std::int64_t a, std::int64_t b, const std::string& what);

// Throws UserError unless lo <= v <= hi: "<what> = v is out of range: ... (limit hi)".
void check_range(std::int64_t v, std::int64_t lo, std::int64_t hi, const std::string& what);
// Throws UserError unless v is finite (and > 0 when `positive`).
void check_finite(double v, const std::string& what, bool positive = false);

// The offset of the first byte of `text` that is not valid UTF-8, or -1.
[[nodiscard]] std::int64_t first_invalid_utf8(const std::string& text);

// A timeout in seconds: finite, positive, at most kMaxTimeoutS.
void check_timeout(double seconds, const std::string& what);

// Every tensor of `p` (inputs and statement values) at `sizes`: elements and
// bytes are checked products, each at most kMaxTensorBytes bytes.
void check_tensor_sizes(const Program& p, const std::string& sizes_label,
                        const std::map<std::string, std::int64_t>& sizes);

// What lowering needs bounded: ranks per group, chunks, channels, roots below the group size.
void check_schedule_bounds(const Schedule& s, std::int64_t ranks_per_group);

}  // namespace coconet::model
