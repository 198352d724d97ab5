// Printing results the same way in every command: an aligned text table, CSV,
// or JSON rows (each command wraps the rows in its own JSON object).
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

namespace coconet::cli {

enum class Format { table, json, csv };

// Adds `--format table|json|csv` (or text for `show`) to a subcommand.
void add_format_option(CLI::App* cmd, Format& out);

using Cell = std::variant<std::string, double, std::int64_t, bool>;

struct Table {
  std::vector<std::string> columns;
  std::vector<std::vector<Cell>> rows;
  int precision = 2;  // digits after the point for doubles in table and CSV

  void add(std::vector<Cell> row) { rows.push_back(std::move(row)); }
};

[[nodiscard]] std::string render_text(const Table& t);
[[nodiscard]] std::string render_csv(const Table& t);
[[nodiscard]] nlohmann::json rows_json(const Table& t);

// Prints a table in the chosen format; for json prints `envelope` with "rows" set.
void print(const Table& t, Format f, nlohmann::json envelope = nlohmann::json::object());

}  // namespace coconet::cli
