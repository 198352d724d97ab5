// Reading the limit: one line of `ompi_info --parsable`, e.g.
//   mca:btl:vader:param:btl_vader_max_send_size:value:32768
// The largest send fragment rather than the eager limit: on the machine this
// was measured on (Open MPI 4.1.4, vader, eager limit 4096, max send size
// 32768, the f16 sums still in software) an 8 KB allreduce cost what the
// small sizes cost, and so did a 32 KB one (58 us, 16 KB: 38 us), while a
// 64 KB one cost 158 us (docs/validation.md): a message that fits one
// fragment is sent whole, so the large regime starts one byte past the
// fragment size.
#include "validation/mpi_limits.h"

#include <array>
#include <cstdio>
#include <memory>
#include <sstream>

#include <fmt/core.h>

namespace coconet::validation {

std::optional<MpiLimit> parse_ompi_info(const std::string& text) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line))
    for (const char* component : {"sm", "vader"}) {
      const std::string key = fmt::format("btl_{}_max_send_size", component);
      const std::string prefix = fmt::format("mca:btl:{}:param:{}:value:", component, key);
      if (line.rfind(prefix, 0) != 0) continue;
      try {
        std::size_t used = 0;
        const double v = std::stod(line.substr(prefix.size()), &used);
        if (v > 0 && used == line.size() - prefix.size())
          return MpiLimit{v + 1, fmt::format("`{}`: {} + 1 (one fragment is sent whole)", kOmpiInfoCommand, key)};
      } catch (const std::exception&) {
      }
    }
  return std::nullopt;
}

std::optional<MpiLimit> read_mpi_limit() {
  const std::string cmd = std::string(kOmpiInfoCommand) + " 2>/dev/null";
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(::popen(cmd.c_str(), "r"), ::pclose);
  if (!pipe) return std::nullopt;
  std::string text;
  std::array<char, 4096> buf{};
  while (const std::size_t n = std::fread(buf.data(), 1, buf.size(), pipe.get())) text.append(buf.data(), n);
  return parse_ompi_info(text);
}

}  // namespace coconet::validation
