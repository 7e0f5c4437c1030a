#pragma once
// Options without a file format: what a config passes to a layer factory (layers/registry.h)
// or a task factory (train/tasks/registry.h). train/config turns TOML tables into OptionMaps;
// a program builds them directly:
//     OptionMap options{{"d_model", 8}, {"eps", 1e-5}, {"affine", false}};
//     make_layer("layer_norm", options, rng);
// Each value may carry where it came from ("<file>:12:3", or "--set ...:1:9" for an override), so
// that the reader's error messages can point at it.

#include <concepts>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace headlab {

struct OptionValue;
using OptionArray = std::vector<OptionValue>;

struct OptionValue {
  // A value of a kind options do not hold (a date, a table), kept so that a reader's type
  // error can name it and the config can be written back: its type name ("date", "time",
  // "date-time", "table") and its text in the config's syntax.
  struct Unsupported {
    std::string type;
    std::string text;
  };
  using Data = std::variant<int64_t, double, bool, std::string, OptionArray, Unsupported>;

  OptionValue() = default;
  template <std::integral T>
  requires(!std::same_as<T, bool>) OptionValue(T v) : data(static_cast<int64_t>(v)) {}
  OptionValue(double v) : data(v) {}
  OptionValue(bool v) : data(v) {}
  OptionValue(const char* v) : data(std::string(v)) {}
  OptionValue(std::string v) : data(std::move(v)) {}
  OptionValue(OptionArray v) : data(std::move(v)) {}
  OptionValue(Unsupported v) : data(std::move(v)) {}

  template <class T>
  const T* get_if() const {
    return std::get_if<T>(&data);
  }
  // "an integer", "a float", "a boolean", "a string", "an array", "a table", "a date/time".
  const char* type_article() const;
  // "integer", "float", "boolean", "string", "array", or Unsupported::type (TOML's names).
  std::string type_name() const;

  Data data = int64_t{0};
  std::string where;      // the value's position, "" when not from a file
  std::string key_where;  // its key's position (for "unknown option" messages), or ""
};

// Name -> value, in insertion order (a reader may care: the dependency task's options are
// written back in the order it reads them). Setting an existing name replaces its value in place.
class OptionMap {
 public:
  using Entry = std::pair<std::string, OptionValue>;

  OptionMap() = default;
  OptionMap(std::initializer_list<Entry> entries);

  const OptionValue* find(std::string_view key) const;
  bool contains(std::string_view key) const { return find(key) != nullptr; }
  void set(std::string key, OptionValue value);
  bool empty() const { return entries_.empty(); }
  size_t size() const { return entries_.size(); }
  std::vector<Entry>::const_iterator begin() const { return entries_.begin(); }
  std::vector<Entry>::const_iterator end() const { return entries_.end(); }
  // Reorders the entries by name.
  void sort();

 private:
  std::vector<Entry> entries_;
};

}  // namespace headlab
