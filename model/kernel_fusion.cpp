// fuse_kernel and flash_attention (see kernel_fusion.h). Statements keep
// their names and order, so only the stages change, as in fuse.cpp.
#include "model/kernel_fusion.h"

#include <fmt/core.h>

#include <algorithm>
#include <optional>

#include "model/error.h"
#include "model/transforms.h"

namespace coconet::model {

namespace {

const Stmt& named(const Program& p, const std::string& n) {
  const Stmt* s = p.find_stmt(n);
  COCONET_ASSERT(s != nullptr, "stage names unknown statement '" + n + "'");
  return *s;
}

// A GEMM over a batch: the heads of an attention core, not a linear layer's.
bool batched_gemm(const Program& p, const std::string& n) {
  const Stmt& s = named(p, n);
  return s.op == OpKind::matmul && s.type.shape.size() >= 3;
}

// Stages [i, j] become one kernel stage; the overlap groups after them move up.
Schedule merge(Schedule s, int i, int j, Directive d) {
  Stage k{StageKind::kernel, {}};
  for (int x = i; x <= j; ++x) {
    const auto& names = s.stages[std::size_t(x)].stmts;
    k.stmts.insert(k.stmts.end(), names.begin(), names.end());
  }
  s.stages.erase(s.stages.begin() + i + 1, s.stages.begin() + j + 1);
  s.stages[std::size_t(i)] = std::move(k);
  for (auto& g : s.overlaps)
    if (g.first > j) {
      g.first -= j - i;
      g.last -= j - i;
    }
  s.history.push_back(std::move(d));
  return s;
}

std::optional<Schedule> try_apply(const Schedule& s, const Directive& d) {
  try {
    return apply(s, d);
  } catch (const UserError&) {
    return std::nullopt;
  }
}

}  // namespace

Schedule fuse_kernel(Schedule s, const std::string& first, const std::string& last) {
  const int i = s.stage_of(first);
  if (i < 0 || s.stage_of(last) < 0)
    throw UserError(fmt::format("fuse_kernel {} {}: '{}' is not a statement of the schedule", first, last,
                                i < 0 ? first : last));
  const Stage& st = s.stages[std::size_t(i)];
  if (st.kind != StageKind::compute)
    throw UserError(fmt::format("fuse_kernel {} {}: '{}' is in a {} stage; only a compute stage's statements "
                                "become one kernel",
                                first, last, first, st.code(s.program)));
  if (st.stmts.front() != first || st.stmts.back() != last)
    throw UserError(fmt::format("fuse_kernel {} {}: name the first and last statement of one compute stage "
                                "(this one runs from '{}' to '{}')",
                                first, last, st.stmts.front(), st.stmts.back()));
  if (st.stmts.size() < 2)
    throw UserError(fmt::format("fuse_kernel {} {}: the stage has one statement, one kernel already", first, last));
  if (s.overlap_of(i) >= 0)
    throw UserError(fmt::format("fuse_kernel {} {}: the stage overlaps with others", first, last));
  return merge(std::move(s), i, i, FuseKernel{first, last});
}

Schedule flash_attention(Schedule s, const std::string& first, const std::string& last, const std::string& mask) {
  const std::string what = fmt::format("flash_attention {} {} {}", first, last, mask);
  if (mask != kCausalMask && mask != kFullMask)
    throw UserError(fmt::format("{}: the mask is '{}'; write {} or {}", what, mask, kCausalMask, kFullMask));
  const int i = s.stage_of(first);
  const int j = s.stage_of(last);
  if (i < 0 || j < 0)
    throw UserError(fmt::format("{}: '{}' is not a statement of the schedule", what, i < 0 ? first : last));
  if (i >= j)
    throw UserError(fmt::format("{}: name the core's first GEMM first and its last GEMM second (stages {} and {})",
                                what, i, j));
  const Program& p = s.program;
  const auto& a = s.stages[std::size_t(i)];
  const auto& b = s.stages[std::size_t(j)];
  if (a.stmts.front() != first || b.stmts.back() != last || !batched_gemm(p, first) || !batched_gemm(p, last))
    throw UserError(fmt::format("{}: an attention core begins and ends with a batched GEMM (over the heads) of a "
                                "stage of its own",
                                what));
  bool softmax = false;
  for (int k = i; k <= j; ++k) {
    const Stage& st = s.stages[std::size_t(k)];
    if (s.overlap_of(k) >= 0) throw UserError(fmt::format("{}: stage {} overlaps with others", what, k));
    const bool gemm = st.kind == StageKind::matmul && batched_gemm(p, st.stmts.front());
    if (st.kind != StageKind::compute && !gemm)
      throw UserError(fmt::format("{}: stage {} ({}) is neither a computation nor a batched GEMM", what, k,
                                  st.code(p)));
    for (const auto& n : st.stmts) softmax = softmax || named(p, n).op == OpKind::rowreduce;
  }
  if (!softmax) throw UserError(fmt::format("{}: no row reduction (a softmax) between the GEMMs", what));
  return merge(std::move(s), i, j, FlashAttention{first, last, mask});
}

std::vector<Schedule> kernel_choices(const Schedule& s, const std::string& mask) {
  std::vector<Schedule> out{s};
  // Every attention core: from a batched GEMM stage, the furthest batched
  // GEMM stage reached through compute and batched GEMM stages.
  std::optional<Schedule> flash;
  for (int i = 0; i < int(s.stages.size()); ++i) {
    const Stage& a = s.stages[std::size_t(i)];
    if (a.kind != StageKind::matmul || !batched_gemm(s.program, a.stmts.front())) continue;
    int j = -1;
    for (int k = i + 1; k < int(s.stages.size()); ++k) {
      const Stage& st = s.stages[std::size_t(k)];
      const bool gemm = st.kind == StageKind::matmul && batched_gemm(s.program, st.stmts.front());
      if (st.kind != StageKind::compute && !gemm) break;
      if (gemm) j = k;
    }
    if (j < 0) continue;
    const Schedule& base = flash ? *flash : s;
    if (auto f = try_apply(base, FlashAttention{a.stmts.front(), s.stages[std::size_t(j)].stmts.back(),
                                                std::string(mask)})) {
      flash = std::move(f);
      i = j;
    }
  }
  const auto fuse_all = [](const Schedule& from) -> std::optional<Schedule> {
    Schedule x = from;
    bool any = false;
    for (std::size_t k = 0; k < from.stages.size(); ++k) {
      const Stage& st = from.stages[k];
      if (st.kind != StageKind::compute || st.stmts.size() < 2) continue;
      if (auto f = try_apply(x, FuseKernel{st.stmts.front(), st.stmts.back()})) {
        x = std::move(*f);
        any = true;
      }
    }
    return any ? std::optional<Schedule>(std::move(x)) : std::nullopt;
  };
  if (auto k = fuse_all(s)) out.push_back(std::move(*k));
  if (flash) {
    auto both = fuse_all(*flash);
    out.push_back(std::move(*flash));
    if (both) out.push_back(std::move(*both));
  }
  return out;
}

bool uses_flash_attention(const Schedule& s) {
  return std::any_of(s.history.begin(), s.history.end(),
                     [](const Directive& d) { return std::holds_alternative<FlashAttention>(d); });
}

bool uses_fused_kernels(const Schedule& s) {
  return std::any_of(s.history.begin(), s.history.end(),
                     [](const Directive& d) { return std::holds_alternative<FuseKernel>(d); });
}

}  // namespace coconet::model
