// What a backend that runs NCCL does with the collective choices a plan
// resolved (Backend::choose_collectives): before each NCCL collective call it
// tells NCCL's tuner plugin (exec/nccl_tuner/tuner_plugin.h) which choice
// that call is to run, so that NCCL's answer for the call is the plan's.
// NCCL loads the plugin from NCCL_TUNER_PLUGIN; this loads the same file,
// which the dynamic loader keeps once per process, so what is told here is
// what NCCL's copy answers with. Host code only (no CUDA, no NCCL headers):
// the cuda backend calls it around its NCCL calls and a host test drives it
// the same way.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "model/program.h"
#include "plan/step_plan.h"

namespace coconet::exec::nccl_tuner {

// The size NCCL states a collective call at to its tuner (nBytes): the
// element size times the larger of the elements the call sends and receives
// (an allreduce's count, a reduce-scatter's input of every part, an
// all-gather's output of every part).
[[nodiscard]] std::size_t call_bytes(std::int64_t send_elements, std::int64_t recv_elements, int element_bytes);

// The plugin file to name in NCCL_TUNER_PLUGIN: libcoconet_nccl_tuner.so
// beside the running program or in its lib/ (a bundle), else where this
// build made it; empty when none is there.
[[nodiscard]] std::string installed_plugin();

// Makes NCCL_TUNER_PLUGIN name coconet's plugin (installed_plugin) for the
// NCCL communicators made after this, unless the environment names it
// already. False, with the reason in `why_not`, when NCCL's calls cannot take
// their own choices: NCCL_TUNER_PLUGIN names another plugin, or none was built.
[[nodiscard]] bool name_plugin(std::string& why_not);

class PerCallChoices {
 public:
  // Linked to the plugin at `plugin_path`. Inactive (every call keeps NCCL's
  // own choice) when the path is empty, cannot be loaded, or is not this
  // project's plugin; why_inactive() says which.
  explicit PerCallChoices(const std::string& plugin_path);
  // Linked to the plugin NCCL_TUNER_PLUGIN names, if any.
  [[nodiscard]] static PerCallChoices from_environment();
  ~PerCallChoices();
  PerCallChoices(PerCallChoices&& other) noexcept;
  PerCallChoices& operator=(PerCallChoices&&) = delete;
  PerCallChoices(const PerCallChoices&) = delete;
  PerCallChoices& operator=(const PerCallChoices&) = delete;

  [[nodiscard]] bool active() const { return expect_ != nullptr; }
  [[nodiscard]] const std::string& why_inactive() const { return why_inactive_; }

  // A launch's choices (Backend::choose_collectives): forgets what the
  // plugin was told before and starts each kind's count of calls again.
  void choose(std::span<const plan::CallChoice> choices);
  // Before a call of `kind` that sends and receives these elements of
  // `element_bytes` each: tells the plugin the choice of this call, the n-th
  // of its kind in the launch (counting round), for the size NCCL will state
  // the call at (call_bytes, returned). Nothing told when the launch has no
  // choice of that kind, or the kind or the choice has no NCCL number (a
  // send, alltoall, hierarchical): NCCL's own choice.
  std::size_t before_call(model::OpKind kind, std::int64_t sent, std::int64_t received, int element_bytes);

 private:
  void* handle_ = nullptr;
  void (*expect_)(int, std::size_t, int, int, int) = nullptr;
  void (*clear_)() = nullptr;
  std::string why_inactive_;
  std::vector<plan::CallChoice> choices_;
  std::vector<int> calls_of_kind_;  // calls of each model::OpKind so far in the launch
};

}  // namespace coconet::exec::nccl_tuner
