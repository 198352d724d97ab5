// An enum's names, written once in a table and read both ways: to_string and
// parse of every enum a user writes (dtypes, algorithms, protocols, backends,
// model and layout keys of `coconet step`) go through it, so a name is
// spelled in one place and the error for an unknown one lists exactly the
// names the table has.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace coconet::model {

template <typename E>
struct EnumName {
  E value;
  std::string_view name;
};

// The name of `v`; "?" for a value the table lacks.
template <typename E, std::size_t N>
[[nodiscard]] constexpr std::string_view name_of(const EnumName<E> (&table)[N], E v) {
  for (const auto& e : table)
    if (e.value == v) return e.name;
  return "?";
}

// The value named `s`, if the table has it.
template <typename E, std::size_t N>
[[nodiscard]] constexpr std::optional<E> value_named(const EnumName<E> (&table)[N], std::string_view s) {
  for (const auto& e : table)
    if (e.name == s) return e.value;
  return std::nullopt;
}

// The names in table order, joined with `separator` ("a, b, c").
template <typename E, std::size_t N>
[[nodiscard]] std::string names_of(const EnumName<E> (&table)[N], std::string_view separator = ", ") {
  std::string out;
  for (const auto& e : table) {
    if (!out.empty()) out += separator;
    out += e.name;
  }
  return out;
}

// "a, b or c": the names as the errors that list them read.
template <typename E, std::size_t N>
[[nodiscard]] std::string names_or(const EnumName<E> (&table)[N]) {
  std::string out;
  for (std::size_t i = 0; i < N; ++i) {
    if (i > 0) out += i + 1 == N ? " or " : ", ";
    out += table[i].name;
  }
  return out;
}

}  // namespace coconet::model
