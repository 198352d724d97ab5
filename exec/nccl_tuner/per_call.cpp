#include "exec/nccl_tuner/per_call.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <iterator>
#include <system_error>
#include <utility>

#include "exec/nccl_tuner/nccl_ids.h"

namespace coconet::exec::nccl_tuner {

std::size_t call_bytes(std::int64_t send_elements, std::int64_t recv_elements, int element_bytes) {
  return static_cast<std::size_t>(std::max(send_elements, recv_elements)) * static_cast<std::size_t>(element_bytes);
}

std::string installed_plugin() {
  namespace fs = std::filesystem;
  constexpr const char* kFile = "libcoconet_nccl_tuner.so";
  std::error_code ec;
  const fs::path program = fs::read_symlink("/proc/self/exe", ec);
  std::vector<fs::path> places;
  if (!ec) places = {program.parent_path() / kFile, program.parent_path() / "lib" / kFile};
#ifdef COCONET_NCCL_TUNER_BUILT
  places.emplace_back(COCONET_NCCL_TUNER_BUILT);
#endif
  for (const fs::path& p : places)
    if (fs::is_regular_file(p, ec)) return p.string();
  return {};
}

bool name_plugin(std::string& why_not) {
  if (const char* named = std::getenv("NCCL_TUNER_PLUGIN"); named != nullptr && *named != '\0') {
    const PerCallChoices link(named);
    why_not = link.why_inactive();
    return link.active();
  }
  const std::string plugin = installed_plugin();
  if (plugin.empty()) {
    why_not = "no libcoconet_nccl_tuner.so beside this program or in this build";
    return false;
  }
  setenv("NCCL_TUNER_PLUGIN", plugin.c_str(), 1);
  return true;
}

PerCallChoices::PerCallChoices(const std::string& plugin_path) {
  if (plugin_path.empty()) {
    why_inactive_ = "NCCL_TUNER_PLUGIN is not set";
    return;
  }
  handle_ = dlopen(plugin_path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle_ == nullptr) {
    const char* e = dlerror();
    why_inactive_ = "cannot load " + plugin_path + ": " + (e != nullptr ? e : "unknown error");
    return;
  }
  expect_ = reinterpret_cast<decltype(expect_)>(dlsym(handle_, "coconet_tuner_expect"));
  clear_ = reinterpret_cast<decltype(clear_)>(dlsym(handle_, "coconet_tuner_clear"));
  if (expect_ == nullptr || clear_ == nullptr) {
    expect_ = nullptr;
    why_inactive_ = plugin_path + " is another tuner plugin than coconet's (no coconet_tuner_expect)";
  }
}

PerCallChoices PerCallChoices::from_environment() {
  const char* path = std::getenv("NCCL_TUNER_PLUGIN");
  return PerCallChoices(path != nullptr ? path : "");
}

PerCallChoices::~PerCallChoices() {
  if (handle_ != nullptr) dlclose(handle_);
}

PerCallChoices::PerCallChoices(PerCallChoices&& other) noexcept
    : handle_(std::exchange(other.handle_, nullptr)),
      expect_(std::exchange(other.expect_, nullptr)),
      clear_(std::exchange(other.clear_, nullptr)),
      why_inactive_(std::move(other.why_inactive_)),
      choices_(std::move(other.choices_)),
      calls_of_kind_(std::move(other.calls_of_kind_)) {}

void PerCallChoices::choose(std::span<const plan::CallChoice> choices) {
  choices_.assign(choices.begin(), choices.end());
  calls_of_kind_.clear();
  if (active()) clear_();
}

std::size_t PerCallChoices::before_call(model::OpKind kind, std::int64_t sent, std::int64_t received,
                                        int element_bytes) {
  const std::size_t bytes = call_bytes(sent, received, element_bytes);
  const auto k = static_cast<std::size_t>(kind);
  if (calls_of_kind_.size() <= k) calls_of_kind_.resize(k + 1, 0);
  const int n = calls_of_kind_[k]++;
  if (!active()) return bytes;
  const auto of_kind = [kind](const plan::CallChoice& c) { return c.op == kind; };
  const auto kinds = std::count_if(choices_.begin(), choices_.end(), of_kind);
  if (kinds == 0) return bytes;
  auto it = std::find_if(choices_.begin(), choices_.end(), of_kind);
  for (auto skip = n % kinds; skip > 0; --skip) it = std::find_if(std::next(it), choices_.end(), of_kind);
  const plan::CollectiveChoice& c = it->choice;
  const int coll = coll_id(kind), algo = algo_id(c.algo), proto = proto_id(c.proto);
  if (coll >= 0 && algo >= 0 && proto >= 0) expect_(coll, bytes, algo, proto, c.channels);
  return bytes;
}

}  // namespace coconet::exec::nccl_tuner
