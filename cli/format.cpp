// Text, CSV and JSON rendering of result tables; atomic file writes.
#include "cli/format.h"

#include <algorithm>
#include <cctype>
#include <cstdio>

#include <fmt/core.h>


namespace coconet::cli {

void add_format_option(CLI::App* cmd, Format& out) {
  // CLI11 reads an enum as its number: the transform turns a name into it, and
  // words any other value our way ("--format: expected table, json or csv").
  const CLI::Validator names(
      [](std::string& s) -> std::string {
        std::string v = s;
        std::transform(v.begin(), v.end(), v.begin(), [](unsigned char c) { return std::tolower(c); });
        if (v == "table" || v == "text") s = std::to_string(int(Format::table));
        else if (v == "json") s = std::to_string(int(Format::json));
        else if (v == "csv") s = std::to_string(int(Format::csv));
        else return "expected table, json or csv, got '" + s + "'";
        return "";
      },
      "", "format");
  cmd->add_option("--format", out, "Output format (default table)")->transform(names)->type_name("table|json|csv");
}

namespace {
std::string cell_text(const Cell& c, int precision) {
  return std::visit(
      [&](const auto& v) -> std::string {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::string>) return v;
        else if constexpr (std::is_same_v<T, double>) return fmt::format("{:.{}f}", v, precision);
        else if constexpr (std::is_same_v<T, bool>) return v ? "true" : "false";
        else return std::to_string(v);
      },
      c);
}

bool is_numeric(const Cell& c) { return !std::holds_alternative<std::string>(c); }

std::string csv_escape(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char ch : s) out += ch == '"' ? std::string("\"\"") : std::string(1, ch);
  return out + "\"";
}
}  // namespace

std::string render_text(const Table& t) {
  std::vector<std::size_t> width(t.columns.size());
  for (std::size_t i = 0; i < t.columns.size(); ++i) width[i] = t.columns[i].size();
  for (const auto& r : t.rows)
    for (std::size_t i = 0; i < r.size() && i < width.size(); ++i)
      width[i] = std::max(width[i], cell_text(r[i], t.precision).size());
  std::string out;
  for (std::size_t i = 0; i < t.columns.size(); ++i)
    out += fmt::format("{}{:<{}}", i ? "  " : "", t.columns[i],
                       i + 1 == t.columns.size() ? 0 : width[i]);
  out += "\n";
  for (const auto& r : t.rows) {
    for (std::size_t i = 0; i < r.size() && i < width.size(); ++i) {
      const auto s = cell_text(r[i], t.precision);
      out += i ? "  " : "";
      const bool last = i + 1 == r.size();
      if (is_numeric(r[i])) out += fmt::format("{:>{}}", s, width[i]);
      else out += last ? s : fmt::format("{:<{}}", s, width[i]);
    }
    out += "\n";
  }
  return out;
}

std::string render_csv(const Table& t) {
  std::string out;
  for (std::size_t i = 0; i < t.columns.size(); ++i) out += (i ? "," : "") + csv_escape(t.columns[i]);
  out += "\n";
  for (const auto& r : t.rows) {
    for (std::size_t i = 0; i < r.size(); ++i) {
      out += i ? "," : "";
      out += std::holds_alternative<double>(r[i]) ? fmt::format("{}", std::get<double>(r[i]))
                                                  : csv_escape(cell_text(r[i], t.precision));
    }
    out += "\n";
  }
  return out;
}

nlohmann::json rows_json(const Table& t) {
  auto rows = nlohmann::json::array();
  for (const auto& r : t.rows) {
    nlohmann::json o = nlohmann::json::object();
    for (std::size_t i = 0; i < r.size() && i < t.columns.size(); ++i)
      std::visit([&](const auto& v) { o[t.columns[i]] = v; }, r[i]);
    rows.push_back(std::move(o));
  }
  return rows;
}

void print(const Table& t, Format f, nlohmann::json envelope) {
  switch (f) {
    case Format::table: std::fputs(render_text(t).c_str(), stdout); break;
    case Format::csv: std::fputs(render_csv(t).c_str(), stdout); break;
    case Format::json:
      envelope["rows"] = rows_json(t);
      std::fputs((envelope.dump(2) + "\n").c_str(), stdout);
      break;
  }
}

}  // namespace coconet::cli
