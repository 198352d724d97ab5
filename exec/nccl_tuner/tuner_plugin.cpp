// NCCL tuner plugin (interface v4) that applies each call's resolved choice
// (exec/nccl_tuner/tuner_plugin.h). NCCL asks getCollInfo once per
// collective with a table of its own cost estimates per algorithm and
// protocol, and takes the cheapest entry; the plugin makes the expected
// entry the cheapest (cost 0) and sets the channel count. The interface's
// types are declared here from NCCL's documented ABI (its ext-tuner
// README), so the plugin builds without NCCL's headers; results are
// NCCL's ncclResult_t values (0 success).
#include "exec/nccl_tuner/tuner_plugin.h"

#include <cstdarg>
#include <map>
#include <mutex>
#include <tuple>

namespace {

using Logger = void (*)(int level, unsigned long flags, const char* file, int line, const char* fmt,
                        ...);

// NCCL's tuner interface v4, field for field.
struct TunerV4 {
  const char* name;
  int (*init)(std::size_t n_ranks, std::size_t n_nodes, Logger log, void** context);
  int (*get_coll_info)(void* context, int coll, std::size_t bytes, int pipe_ops, float** cost_table,
                       int n_algo, int n_proto, int reg_buff, int* n_channels);
  int (*destroy)(void* context);
};

constexpr int kSuccess = 0;
constexpr float kIgnored =
    -1.0f;  // NCCL's mark of an algorithm/protocol it does not offer for the call

struct Choice {
  int algo = -1;
  int proto = -1;
  int channels = 0;
};

std::mutex& lock() {
  static std::mutex m;
  return m;
}
std::map<std::tuple<int, std::size_t>, Choice>& expected() {
  static std::map<std::tuple<int, std::size_t>, Choice> e;
  return e;
}

int init(std::size_t, std::size_t, Logger, void** context) {
  *context = nullptr;
  return kSuccess;
}

int get_coll_info(void*, int coll, std::size_t bytes, int, float** cost_table, int n_algo,
                  int n_proto, int, int* n_channels) {
  Choice c;
  {
    const std::lock_guard<std::mutex> guard(lock());
    const auto it = expected().find({coll, bytes});
    if (it == expected().end()) return kSuccess;  // not told: NCCL's own choice
    c = it->second;
  }
  if (c.algo < 0 || c.algo >= n_algo || c.proto < 0 || c.proto >= n_proto) return kSuccess;
  // The table is n_algo rows of n_proto costs (NCCL passes its 2-D array as float**).
  float* row = reinterpret_cast<float*>(cost_table) + c.algo * n_proto;
  if (row[c.proto] == kIgnored) return kSuccess;  // NCCL cannot run it here: its own choice
  row[c.proto] = 0.0f;
  if (c.channels > 0) *n_channels = c.channels;
  return kSuccess;
}

int destroy(void*) { return kSuccess; }

}  // namespace

extern "C" {

__attribute__((visibility("default")))
TunerV4 ncclTunerPlugin_v4 = {"coconet", init, get_coll_info, destroy};

__attribute__((visibility("default"))) void coconet_tuner_expect(int coll, std::size_t bytes,
                                                                 int algo, int proto,
                                                                 int channels) {
  const std::lock_guard<std::mutex> guard(lock());
  expected()[{coll, bytes}] = Choice{algo, proto, channels};
}

__attribute__((visibility("default"))) void coconet_tuner_clear() {
  const std::lock_guard<std::mutex> guard(lock());
  expected().clear();
}

}  // extern "C"
