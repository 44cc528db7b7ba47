// data/csv.h — reading numeric CSV files into tensors, one dtype per column. The default is
// Float32: the "float64 trap" from the reference articles (data read as Float64, fed to a
// Float32 model: "expected scalar type Float but found Double") only happens here if you
// ask for Float64, and then the tensor says where it was created.
//
//   auto table = kiln::data::read_csv("houses.csv");             // header row, Float32 columns
//   kiln::Tensor x = table.to_tensor({"rooms", "area"});         // [rows, 2]
//   kiln::Tensor y = table.column("price");
//
// Read next: data/transforms.h.
#pragma once

#include <map>
#include <optional>
#include <source_location>
#include <string>
#include <string_view>
#include <vector>

#include "core/tensor.h"

namespace kiln::data {

struct CsvOptions {
  char delimiter = ',';
  bool header = true;
  DType default_dtype = kFloat32;
  /// Per-column dtypes by column name (or "0", "1", ... without a header).
  std::map<std::string, DType> column_dtypes{};
};

struct CsvTable {
  std::vector<std::string> names;
  TensorList columns;  // one 1-D tensor per column
  std::size_t rows() const { return columns.empty() ? 0 : static_cast<std::size_t>(columns.front().numel()); }
  const Tensor& column(const std::string& name) const;
  /// The named columns (all when empty) stacked as [rows, n], converted to `dtype` (default:
  /// the first column's).
  Tensor to_tensor(const std::vector<std::string>& names = {}, std::optional<DType> dtype = std::nullopt) const;
};

/// Parses CSV text. Ragged rows and unparsable numbers are errors naming the line and column.
CsvTable parse_csv(std::string_view text, const CsvOptions& options = {},
                   std::source_location loc = std::source_location::current());
CsvTable read_csv(const std::string& path, const CsvOptions& options = {},
                  std::source_location loc = std::source_location::current());

}  // namespace kiln::data
