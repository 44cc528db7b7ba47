// data/csv.cpp — CSV parsing (see data/csv.h).
#include "data/csv.h"

#include <charconv>
#include <cmath>
#include <fstream>
#include <iterator>

#include "autograd/functions/elementwise.h"
#include "core/creation.h"

namespace kiln::data {

namespace {

std::vector<std::string_view> split(std::string_view line, char delimiter) {
  std::vector<std::string_view> fields;
  std::size_t start = 0;
  while (true) {
    const std::size_t end = line.find(delimiter, start);
    fields.push_back(line.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start));
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  return fields;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

}  // namespace

const Tensor& CsvTable::column(const std::string& name) const {
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (names[i] == name) return columns[i];
  }
  KILN_CHECK_INDEX(false, "CSV has no column '", name, "'");
  return columns.front();
}

Tensor CsvTable::to_tensor(const std::vector<std::string>& wanted, std::optional<DType> dtype) const {
  TensorList parts;
  if (wanted.empty()) {
    parts = columns;
  } else {
    for (const std::string& n : wanted) parts.push_back(column(n));
  }
  KILN_CHECK(!parts.empty(), "CSV table has no columns");
  const DType d = dtype.value_or(parts.front().dtype());
  for (Tensor& p : parts) p = p.to(d);
  return stack(parts, 1);
}

CsvTable parse_csv(std::string_view text, const CsvOptions& options, std::source_location loc) {
  std::vector<std::string_view> lines;
  for (std::size_t start = 0; start < text.size();) {
    std::size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = trim(text.substr(start, end - start));
    if (!line.empty()) lines.push_back(line);
    start = end + 1;
  }
  CsvTable table;
  std::size_t first = 0;
  if (options.header) {
    KILN_CHECK_VALUE(!lines.empty(), "read_csv: the file is empty (expected a header row)");
    for (std::string_view f : split(lines[0], options.delimiter)) table.names.emplace_back(trim(f));
    first = 1;
  } else if (!lines.empty()) {
    const std::size_t n = split(lines[0], options.delimiter).size();
    for (std::size_t i = 0; i < n; ++i) table.names.push_back(std::to_string(i));
  }
  const std::size_t ncols = table.names.size();
  std::vector<DType> dtypes;
  for (const std::string& name : table.names) {
    auto it = options.column_dtypes.find(name);
    dtypes.push_back(it != options.column_dtypes.end() ? it->second : options.default_dtype);
  }
  for (const auto& [name, d] : options.column_dtypes) {
    bool known = false;
    for (const std::string& n : table.names) known = known || n == name;
    KILN_CHECK_VALUE(known, "read_csv: a dtype was given for column '", name, "', which the file does not have");
  }
  // Parse into double (floating columns) or int64 (integer/bool columns), then one converting
  // copy per column into its dtype.
  std::vector<std::vector<double>> floats(ncols);
  std::vector<std::vector<std::int64_t>> ints(ncols);
  for (std::size_t r = first; r < lines.size(); ++r) {
    const std::vector<std::string_view> fields = split(lines[r], options.delimiter);
    KILN_CHECK_VALUE(fields.size() == ncols, "read_csv: line ", r + 1, " has ", fields.size(), " fields, expected ", ncols);
    for (std::size_t c = 0; c < ncols; ++c) {
      const std::string_view f = trim(fields[c]);
      const char* b = f.data();
      const char* e = f.data() + f.size();
      if (is_floating_point(dtypes[c])) {
        double v = NAN;  // an empty field is a missing value
        if (!f.empty()) {
          const auto [ptr, ec] = std::from_chars(b, e, v);
          KILN_CHECK_VALUE(ec == std::errc() && ptr == e, "read_csv: line ", r + 1, ", column '", table.names[c],
                           "': cannot parse '", f, "' as ", scalar_type_name(dtypes[c]));
        }
        floats[c].push_back(v);
      } else {
        std::int64_t v = 0;
        const auto [ptr, ec] = std::from_chars(b, e, v);
        KILN_CHECK_VALUE(!f.empty() && ec == std::errc() && ptr == e, "read_csv: line ", r + 1, ", column '",
                         table.names[c], "': cannot parse '", f, "' as ", scalar_type_name(dtypes[c]));
        ints[c].push_back(v);
      }
    }
  }
  const auto rows = static_cast<std::int64_t>(lines.size() - first);
  for (std::size_t c = 0; c < ncols; ++c) {
    const bool fl = is_floating_point(dtypes[c]);
    table.columns.push_back(detail::tensor_from_values(fl ? static_cast<const void*>(floats[c].data()) : ints[c].data(),
                                                       fl ? kFloat64 : kInt64, {rows}, false, dtypes[c],
                                                       TensorOptions().dtype(dtypes[c]), loc, "read_csv"));
  }
  return table;
}

CsvTable read_csv(const std::string& path, const CsvOptions& options, std::source_location loc) {
  std::ifstream in(path, std::ios::binary);
  KILN_CHECK_VALUE(in.good(), "read_csv: cannot open '", path, "'");
  const std::string text{std::istreambuf_iterator<char>(in), {}};
  return parse_csv(text, options, loc);
}

}  // namespace kiln::data
