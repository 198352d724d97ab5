// The machine a calibration was taken on (see machine_identity.h).
#include "validation/machine_identity.h"

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <sstream>

#include <fmt/core.h>
#include <unistd.h>

#include "exec/mpi_session.h"
#include "model/catalog.h"
#include "model/error.h"
#include "sim/topology.h"

namespace coconet::validation {

namespace {

constexpr double kKiBPerGiB = 1024.0 * 1024.0;

// FNV-1a, 64 bits (Fowler, Noll, Vo): offset basis and prime as published.
constexpr std::uint64_t kFnvOffset = 14695981039346656037ULL;
constexpr std::uint64_t kFnvPrime = 1099511628211ULL;

std::string trimmed(const std::string& s) {
  const auto b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1);
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("model name", 0) == 0) return trimmed(line.substr(line.find(':') + 1));
  return "";
}

double memory_GiB() {
  std::ifstream in("/proc/meminfo");
  for (std::string key; in >> key;) {
    double kib = 0;
    if (key == "MemTotal:" && in >> kib) return kib / kKiBPerGiB;
    in.ignore(1 << 10, '\n');
  }
  return 0;
}

std::string today() {
  const std::time_t t = std::time(nullptr);
  char buf[32] = {};
  std::strftime(buf, sizeof buf, "%Y-%m-%d", std::gmtime(&t));
  return buf;
}

// A value as the comment holds it: on one line, without the separator.
std::string field_text(std::string v) {
  for (char& c : v)
    if (c == ';' || c == '\n' || c == '\r') c = ' ';
  return trimmed(v);
}

double number(const std::string& key, const std::string& v, const std::string& where) {
  try {
    std::size_t used = 0;
    const double x = std::stod(v, &used);
    if (used == v.size() && std::isfinite(x) && x >= 0) return x;
  } catch (const std::exception&) {
  }
  throw UserError(fmt::format("{}: {}={} is not a number (write e.g. {}=2)", where, key, v, key));
}

bool memory_differs(double a, double b) {
  return a > 0 && b > 0 && std::abs(a - b) > kMemoryTolerance * std::max(a, b);
}

}  // namespace

MachineIdentity this_machine() {
  MachineIdentity m{cpu_model(), static_cast<int>(::sysconf(_SC_NPROCESSORS_ONLN)), memory_GiB(),
                    exec::mpi_library(), today()};
  if (const char* env = std::getenv(kMachineEnv); env && *env) m = parse_machine_fields(env, m, kMachineEnv);
  return m;
}

std::string machine_comment(const MachineIdentity& m) {
  std::vector<std::string> parts;
  if (!m.cpu.empty()) parts.push_back("cpu=" + field_text(m.cpu));
  if (m.cores > 0) parts.push_back(fmt::format("cores={}", m.cores));
  if (m.memory_GiB > 0) parts.push_back(fmt::format("memory_GiB={:.1f}", m.memory_GiB));
  if (!m.mpi.empty()) parts.push_back("mpi=" + field_text(m.mpi));
  if (!m.date.empty()) parts.push_back("date=" + field_text(m.date));
  std::string s = kMachineComment;
  for (std::size_t i = 0; i < parts.size(); ++i) s += (i == 0 ? " " : "; ") + parts[i];
  return s;
}

MachineIdentity parse_machine_fields(const std::string& body, MachineIdentity m, const std::string& where) {
  std::istringstream in(body);
  for (std::string field; std::getline(in, field, ';');) {
    field = trimmed(field);
    if (field.empty()) continue;
    const auto eq = field.find('=');
    if (eq == std::string::npos)
      throw UserError(fmt::format("{}: '{}' is not key=value (keys: cpu, cores, memory_GiB, mpi, date)", where, field));
    const std::string key = trimmed(field.substr(0, eq));
    const std::string v = trimmed(field.substr(eq + 1));
    if (key == "cpu") m.cpu = v;
    else if (key == "cores") m.cores = static_cast<int>(number(key, v, where));
    else if (key == "memory_GiB") m.memory_GiB = number(key, v, where);
    else if (key == "mpi") m.mpi = v;
    else if (key == "date") m.date = v;
    else
      throw UserError(fmt::format("{}: unknown key '{}' (keys: cpu, cores, memory_GiB, mpi, date)", where, key));
  }
  return m;
}

std::optional<MachineIdentity> recorded_machine(const std::string& text) {
  std::istringstream in(text);
  const std::string prefix = kMachineComment;
  for (std::string line; std::getline(in, line);)
    if (line.rfind(prefix, 0) == 0)
      return parse_machine_fields(line.substr(prefix.size()), MachineIdentity{}, "the topology's '" + prefix + "' line");
  return std::nullopt;
}

std::string describe(const MachineIdentity& m) {
  std::vector<std::string> parts;
  parts.push_back(m.cpu.empty() ? "an unrecorded CPU" : m.cpu);
  if (m.cores > 0) parts.push_back(fmt::format("{} cores", m.cores));
  if (m.memory_GiB > 0) parts.push_back(fmt::format("{:.1f} GiB", m.memory_GiB));
  if (!m.mpi.empty()) parts.push_back(m.mpi);
  std::string s;
  for (std::size_t i = 0; i < parts.size(); ++i) s += (i == 0 ? "" : ", ") + parts[i];
  return s;
}

std::vector<std::string> differences(const MachineIdentity& a, const MachineIdentity& b) {
  std::vector<std::string> out;
  if (!a.cpu.empty() && !b.cpu.empty() && a.cpu != b.cpu) out.emplace_back("cpu");
  if (a.cores > 0 && b.cores > 0 && a.cores != b.cores) out.emplace_back("cores");
  if (memory_differs(a.memory_GiB, b.memory_GiB)) out.emplace_back("memory");
  if (!a.mpi.empty() && !b.mpi.empty() && a.mpi != b.mpi) out.emplace_back("mpi");
  return out;
}

std::string machine_key(const MachineIdentity& m) {
  const std::string text = fmt::format("{}|{}|{:.0f}|{}", m.cpu, m.cores, m.memory_GiB, m.mpi);
  std::uint64_t h = kFnvOffset;
  for (const unsigned char c : text) h = (h ^ c) * kFnvPrime;
  return fmt::format("{:016x}", h);
}

std::string user_cache_dir() {
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) return std::string(xdg) + "/coconet";
  if (const char* home = std::getenv("HOME"); home && *home) return std::string(home) + "/.cache/coconet";
  throw UserError("no folder for coconet's cache: set XDG_CACHE_HOME (or HOME), or pass --topology a file that "
                  "`coconet calibrate --out FILE` wrote on this machine");
}

std::string other_machine_warning(const std::string& name, const std::string& text, const MachineIdentity& here,
                                  const std::string& then) {
  const auto recorded = recorded_machine(text);
  if (!recorded) return "";
  const auto differ = differences(*recorded, here);
  if (differ.empty()) return "";
  std::string which;
  for (std::size_t i = 0; i < differ.size(); ++i)
    which += (i == 0 ? "" : i + 1 == differ.size() ? " and " : ", ") + differ[i];
  return fmt::format("{} was calibrated on another machine: {}{}; this one is {} ({} differ{}): {}", name,
                     describe(*recorded), recorded->date.empty() ? "" : " (" + recorded->date + ")", describe(here),
                     which, differ.size() == 1 ? "s" : "", then);
}

std::string other_machine_warning(const std::string& topology_ref, const std::string& then) {
  const std::string path = model::resolve_topology(topology_ref);
  const std::string text = model::read_file(path);
  return other_machine_warning(sim::parse_topology(text, path).name, text, this_machine(), then);
}

}  // namespace coconet::validation
