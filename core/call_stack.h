// core/call_stack.h — the C++ call stack of the running thread, for the two readers that show
// users where their code called an op: anomaly mode's creation traces (autograd/anomaly_mode.h)
// and the profiler's with_stack (profiler/profile.h). Capturing is cheap (return addresses
// only); naming is done later, once per distinct address.
//
//   void* frames[64];
//   const int n = capture_call_stack(frames);
//   for (const std::string& f : symbolize_frames({frames, n})) std::puts(f.c_str());
//   // kiln::log(kiln::Tensor const&)   <- demangled; needs the program linked with -rdynamic
//
// Read next: profiler/profile.cpp (how with_stack keeps only the user's frames).
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kiln {

/// Fills `frames` with the return addresses of this thread's callers, innermost first, and
/// returns how many it wrote (glibc's backtrace(); capture_call_stack's own frame is frames[0]).
int capture_call_stack(std::span<void*> frames);

/// One readable name per frame: the demangled function ("kiln::log(kiln::Tensor const&)"), or,
/// for a function the dynamic symbol table does not name (a static or anonymous-namespace
/// function, a program not linked with -rdynamic), what backtrace_symbols() says
/// ("train_cnn(+0x1c2f0)").
std::vector<std::string> symbolize_frames(std::span<void* const> frames);

/// Whether a frame, as symbolize_frames names it, is a function of namespace kiln (Kiln's own
/// code, which a profile's stacks leave out, as PyTorch's leave out its C++ internals). The
/// example programs' kiln::examples is a user's code to a profile: their training loops show. A
/// function template's name begins with its return type ("kiln::Tensor f<float>(...)"): that
/// part is skipped, so only where the function itself lives counts.
bool is_kiln_frame(std::string_view frame);

/// Whether symbolize_frames could not name the frame ("train_cnn(+0x1c2f0) [0x...]").
bool is_unnamed_frame(std::string_view frame);

}  // namespace kiln
