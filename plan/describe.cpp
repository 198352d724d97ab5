// Printing a StepPlan (`coconet show W --plan NAME`).
#include <algorithm>

#include <fmt/core.h>

#include "model/enum_names.h"
#include "plan/step_plan.h"

namespace coconet::plan {

std::string to_string(OpClass c) {
  static constexpr model::EnumName<OpClass> kClasses[] = {
      {OpClass::elementwise, "elementwise"}, {OpClass::matmul, "matmul"},         {OpClass::norm, "norm"},
      {OpClass::rowreduce, "rowreduce"},     {OpClass::collective, "collective"}, {OpClass::fused, "fused"}};
  return std::string(model::name_of(kClasses, c));
}

std::string to_string(Stream s) { return s == Stream::compute ? "compute" : "comm"; }

std::string to_string(const CollectiveChoice& c) {
  if (c.local) return "local (one rank)";
  if (!c.concrete()) return "unresolved";
  return fmt::format("{}/{} x{}", model::to_string(c.algo), model::to_string(c.proto), c.channels);
}

namespace {

std::string join(const std::vector<std::string>& parts, const char* sep) {
  std::string out;
  for (const auto& x : parts) out += (out.empty() ? "" : sep) + x;
  return out;
}

// A collective's resolved choice: one for every chunk, or chunk by chunk
// where they differ; nothing before resolution.
std::string choice_text(const Collective& c) {
  if (c.chosen.empty()) return "";
  if (std::all_of(c.chosen.begin(), c.chosen.end(), [&](const CollectiveChoice& x) { return x == c.chosen.front(); }))
    return " as " + to_string(c.chosen.front());
  std::vector<std::string> parts;
  for (std::size_t k = 0; k < c.chosen.size(); ++k) parts.push_back(fmt::format("chunk {} {}", k, to_string(c.chosen[k])));
  return " as " + join(parts, ", ");
}

std::string work_text(const Work& w) {
  std::vector<std::string> parts;
  if (w.gemm)
    parts.push_back(fmt::format("gemm {}[{}x{}]x[{}x{}] {}",
                                w.gemm->batch > 1 ? fmt::format("{} x ", w.gemm->batch) : "", w.gemm->m,
                                w.gemm->k, w.gemm->k, w.gemm->n, model::to_string(w.gemm->dtype)));
  for (const auto& c : w.collectives)
    parts.push_back(fmt::format("{} {:.0f} B{}", model::to_string(c.op), c.bytes, choice_text(c)));
  if (w.hbm_bytes > 0) parts.push_back(fmt::format("{:.0f} B over memory", w.hbm_bytes));
  if (w.flops > 0) parts.push_back(fmt::format("{:.0f} flop", w.flops));
  for (int k = 0; k < model::kCostlyOps; ++k)
    if (w.costly[std::size_t(k)] > 0)
      parts.push_back(fmt::format("{:.0f} {}", w.costly[std::size_t(k)], model::to_string(model::CostlyOp(k))));
  if (w.norm_across_group) parts.push_back("+ scalar allreduce");
  return join(parts, ", ");
}

std::string norms_text(const std::vector<FusedNorm>& norms) {
  std::vector<std::string> parts;
  for (const auto& n : norms) parts.push_back(n.stmt + (n.across_group ? " (across the group)" : ""));
  return join(parts, ", ");
}

// A fused op's form: what runs in which pass, what stays in scratch.
std::string fused_text(const FusedForm& f) {
  std::string out;
  if (!f.norms_before.empty()) out += "        first: norm " + norms_text(f.norms_before) + "\n";
  out += fmt::format("        head {}, {} piece(s) per chunk\n", f.head, f.pieces);
  for (std::size_t k = 0; k < f.passes.size(); ++k) {
    const auto& pass = f.passes[k];
    out += fmt::format("        pass {}: [{}] ({} instructions)", k, join(pass.stmts, ", "), pass.program.code.size());
    if (!pass.norms_after.empty()) out += ", then norm " + norms_text(pass.norms_after);
    out += "\n";
  }
  if (!f.gathers.empty()) out += "        gathers " + join(f.gathers, ", ") + "\n";
  if (!f.scratch.empty())
    out += "        in scratch: " + join(std::vector<std::string>(f.scratch.begin(), f.scratch.end()), ", ") + "\n";
  return out;
}

std::string op_line(const Op& op) {
  std::string line = fmt::format("      op {} {} ({}) [{}] group {}", op.id, op.code, to_string(op.cls),
                                 join(op.stmts, ", "), op.group);
  if (op.dest_group >= 0) line += fmt::format("->{}", op.dest_group);
  line += fmt::format(", {} stream", to_string(op.stream));
  if (op.lag > 0) line += fmt::format(", lag {}", op.lag);
  if (!op.producers.empty()) {
    std::vector<std::string> ids;
    for (int p : op.producers) ids.push_back(std::to_string(p));
    line += ", after op " + join(ids, ",");
  }
  line += "\n        rank 0: " + work_text(op.work) + "\n";
  if (op.fused) line += fused_text(*op.fused);
  return line;
}

}  // namespace

std::string describe(const StepPlan& p) {
  std::string out = fmt::format("plan of {} for {} rank(s) per group x {} group(s) on backend {}\n", p.schedule,
                                p.ranks_per_group, p.groups, describe(p.caps));
  std::vector<std::string> sizes;
  for (const auto& [k, v] : p.sizes) sizes.push_back(fmt::format("{}={}", k, v));
  out += fmt::format("  sizes {}; knobs chunks={} algo={} proto={} channels={} overlap={}\n", join(sizes, " "),
                     p.knobs.chunks, model::to_string(p.knobs.algo), model::to_string(p.knobs.proto),
                     p.knobs.channels, model::to_string(p.knobs.overlap));
  out += p.resolved_on.empty() ? "  collectives: not resolved (a topology resolves each one's algorithm, protocol and channels)\n"
                               : fmt::format("  collectives resolved on {}: algorithm/protocol x channels per call\n",
                                             p.resolved_on);
  for (std::size_t i = 0; i < p.units.size(); ++i) {
    const Unit& u = p.units[i];
    out += fmt::format("  unit {}: {}{}{}{}\n", i, u.name, u.as_parts.empty() ? "" : " (as parts: " + u.as_parts + ")",
                       u.chunks > 1 ? fmt::format(", {} chunks over {} rows{}", u.chunks, u.rows,
                                                  u.slice_mode ? " of each slice" : "")
                                    : "",
                       u.tile ? ", tiles: one GEMM, its blocks done in the collective's order"
                       : u.untiled.empty() ? ""
                                           : ", by chunks, not tiles: " + u.untiled);
    for (int id : u.ops) out += op_line(p.op(id));
  }
  return out;
}

}  // namespace coconet::plan
