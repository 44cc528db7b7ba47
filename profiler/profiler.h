// profiler/profiler.h — kiln::profiler in one include: Profile (the recording guard),
// RecordFunction (marking spans of your own code), key_averages' tables and the Chrome trace.
// Start at profiler/profile.h.
#pragma once

#include "profiler/chrome_trace.h"
#include "profiler/event.h"
#include "profiler/key_averages.h"
#include "profiler/op_name.h"
#include "profiler/profile.h"
#include "profiler/record_function.h"
