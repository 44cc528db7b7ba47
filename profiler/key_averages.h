// profiler/key_averages.h — PyTorch's key_averages(): a profile's events grouped by name (and,
// when asked, by input shapes and by the top frames of their stacks), and the table it prints,
// with PyTorch's columns and formats (a "Source Location" column when grouped by stack).
//
//   std::cout << prof.key_averages().table({.sort_by = "self_cpu_time_total", .row_limit = 3});
//   ------------------------  ------------  ------------  ...  ------------
//                       Name    Self CPU %      Self CPU  ...    # of Calls
//   ------------------------  ------------  ------------  ...  ------------
//           aten::convolution        41.20%       8.853ms  ...             2
//   ...
//   Self CPU time total: 21.487ms
//
// Read next: profiler/chrome_trace.h.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "profiler/event.h"

namespace kiln::profiler {

/// One row: every event with the same name (and input shapes).
struct FunctionEventAvg {
  std::string key;           // the name
  std::string input_shapes;  // "[[128, 784], [512, 784]]" when grouped by shape, else empty
  /// The first group_by_stack_n frames of the group's stack, innermost first (else empty).
  std::vector<std::string> stack;
  std::int64_t count = 0;
  std::int64_t self_cpu_time_total_ns = 0;
  std::int64_t cpu_time_total_ns = 0;
  std::int64_t cpu_memory_usage = 0;
  std::int64_t self_cpu_memory_usage = 0;
  double cpu_time_ns() const { return count == 0 ? 0.0 : static_cast<double>(cpu_time_total_ns) / count; }
};

/// table()'s options, as PyTorch's keyword arguments.
struct TableOptions {
  /// "self_cpu_time_total", "cpu_time_total", "cpu_time" (the average), "count",
  /// "cpu_memory_usage", "self_cpu_memory_usage"; empty keeps first-seen order.
  std::string sort_by;
  int row_limit = 100;  // negative: every row
};

class EventList {
 public:
  EventList(std::vector<FunctionEventAvg> rows, bool with_shapes, bool with_memory)
      : rows_(std::move(rows)), with_shapes_(with_shapes), with_memory_(with_memory) {}
  EventList(std::vector<FunctionEventAvg> rows, bool with_shapes, bool with_memory, bool with_stack)
      : rows_(std::move(rows)), with_shapes_(with_shapes), with_memory_(with_memory), with_stack_(with_stack) {}

  const std::vector<FunctionEventAvg>& rows() const { return rows_; }
  /// Sum of every row's self time: the time the recorded thread spent inside any event.
  std::int64_t self_cpu_time_total_ns() const;
  /// The table PyTorch prints, ending with "Self CPU time total: ...".
  std::string table(const TableOptions& options = {}) const;

 private:
  std::vector<FunctionEventAvg> rows_;
  bool with_shapes_;
  bool with_memory_;
  bool with_stack_ = false;
};

/// Groups `events` (profile.h's key_averages calls this); group_by_stack_n > 0 also groups by
/// the first that many frames of each event's stack, as PyTorch's key_averages(group_by_stack_n).
EventList key_averages(const std::vector<Event>& events, bool group_by_input_shape, bool with_memory,
                       int group_by_stack_n = 0);

/// PyTorch's formats: "1.234ms", "12.500us", "1.500s"; "1.50 Mb", "-512 b".
std::string format_time_us(double us);
std::string format_memory(std::int64_t bytes);
/// "[[128, 784], [512, 784], []]".
std::string format_shapes(const std::vector<std::vector<std::int64_t>>& shapes);

}  // namespace kiln::profiler
