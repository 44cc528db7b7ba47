// profiler/profiler.h — kiln::profiler in one include: Profile (the recording guard),
// RecordFunction (marking spans of your own code), Schedule (which steps to record),
// key_averages' tables, the Chrome trace, the collapsed stacks and the HTML page of one step.
// Start at profiler/profile.h.
#pragma once

#include "profiler/chrome_trace.h"
#include "profiler/collapsed_stacks.h"
#include "profiler/event.h"
#include "profiler/html_report.h"
#include "profiler/key_averages.h"
#include "profiler/op_name.h"
#include "profiler/profile.h"
#include "profiler/record_function.h"
#include "profiler/schedule.h"
