// Backend factory: the backends this build was compiled with, by name.
#include "exec/backend.h"

#include <algorithm>
#include <vector>

#include "model/error.h"
#include "model/input_fill.h"

#if defined(COCONET_EXEC_HAVE_MPI)
#include "exec/cpu/cpu_backend.h"
#endif

namespace coconet::exec {

std::vector<std::string> available_backends() {
  std::vector<std::string> names;
#if defined(COCONET_EXEC_HAVE_MPI)
  names.emplace_back("cpu");
#endif
#if defined(COCONET_EXEC_HAVE_CUDA)
  names.emplace_back("cuda");
#endif
  return names;
}

#if defined(COCONET_EXEC_HAVE_MPI)
std::unique_ptr<Backend> make_cpu_backend() { return cpu::create(); }
#endif

// Elements computed on the host per write: 8 MiB of doubles, so a large
// tensor never needs a host copy of itself.
constexpr std::int64_t kHostFillBlock = std::int64_t{1} << 20;

std::int64_t total_count(std::span<const View> views) {
  std::int64_t n = 0;
  for (const View& v : views) n += v.count;
  return n;
}

void Backend::fill_input(View dst, const model::InputPattern& pattern) {
  std::vector<double> values;
  for (std::int64_t begin = 0; begin < dst.count; begin += kHostFillBlock) {
    const std::int64_t end = std::min(dst.count, begin + kHostFillBlock);
    values.resize(static_cast<std::size_t>(end - begin));
    model::fill_input_values(pattern, begin, std::span<double>(values));
    write(View{dst.buffer, dst.offset + begin, end - begin}, values);
  }
}

NodeShared Backend::share_on_node(std::span<const std::int64_t> key, std::int64_t bytes) {
  COCONET_ASSERT(key.size() <= kNodeKeyLength && bytes >= 0, "share_on_node: a key too long or a negative size");
  return NodeShared{std::shared_ptr<std::byte>(new std::byte[static_cast<std::size_t>(bytes)](),
                                               std::default_delete<std::byte[]>()),
                    true};
}

BufferId Backend::alias(BufferId /*target*/, std::int64_t /*offset*/, std::int64_t /*count*/) {
  throw InternalError("the " + name() + " backend does not alias buffers (updates_in_place is false)");
}

void Backend::read_f32(View src, std::span<float> out) {
  COCONET_ASSERT(static_cast<std::int64_t>(out.size()) == src.count, "read_f32: size mismatch");
  const std::vector<float> values = read_f32(src);
  std::copy(values.begin(), values.end(), out.begin());
}

std::optional<std::span<const float>> Backend::host_f32(View /*src*/) { return std::nullopt; }

std::vector<float> Backend::read_f32(View src) {
  const std::vector<double> values = read(src);
  return {values.begin(), values.end()};
}

std::vector<Event> Backend::tile_events(int /*blocks*/) {
  throw InternalError("backend " + name() + " runs no tiled GEMM (plan::Capabilities::tile_overlap)");
}

void Backend::tiled_matmul(std::span<const std::vector<MatmulArgs>> /*blocks*/, std::span<const Event> /*events*/) {
  throw InternalError("backend " + name() + " runs no tiled GEMM (plan::Capabilities::tile_overlap)");
}

void Backend::tiled_matmul_collective(std::span<const std::vector<MatmulArgs>> /*blocks*/,
                                      const TileCollective& /*collective*/) {
  throw InternalError("backend " + name() + " runs no tile unit's collective as one call "
                      "(plan::Capabilities::tile_one_collective)");
}

double Backend::start_timer() {
  synchronize();
  return now_us();
}

double Backend::elapsed_us(double mark) {
  synchronize();
  return now_us() - mark;
}

std::unique_ptr<Backend> make_backend(const std::string& name) {
#if defined(COCONET_EXEC_HAVE_MPI)
  if (name == "cpu") return make_cpu_backend();
#endif
#if defined(COCONET_EXEC_HAVE_CUDA)
  if (name == "cuda") return make_cuda_backend();
#endif
  std::string offered;
  for (const auto& n : available_backends()) offered += (offered.empty() ? "" : ", ") + n;
  throw UserError("backend '" + name + "' is not available in this build (available: " +
                  (offered.empty() ? std::string("none; install Open MPI and rebuild") : offered) + ")");
}

}  // namespace coconet::exec
