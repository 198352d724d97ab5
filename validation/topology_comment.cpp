#include "validation/topology_comment.h"

#include <sstream>

namespace coconet::validation {

std::optional<std::map<std::string, double>> comment_fields(const std::string& text, const std::string& prefix) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(prefix, 0) != 0) continue;
    std::map<std::string, double> out;
    std::istringstream fields(line.substr(prefix.size()));
    std::string field;
    while (fields >> field) {
      const auto eq = field.find('=');
      if (eq == std::string::npos) continue;
      try {
        out[field.substr(0, eq)] = std::stod(field.substr(eq + 1));
      } catch (const std::exception&) {
        continue;
      }
    }
    return out;
  }
  return std::nullopt;
}

}  // namespace coconet::validation
