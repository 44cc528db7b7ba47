// kiln.h — the umbrella header: everything a Kiln user needs.
//
//   #include <kiln.h>
//   auto w = kiln::randn({3, 2}, kiln::requires_grad());
//   auto loss = kiln::matmul(kiln::ones({4, 3}), w).relu().sum();
//   loss.backward();
//   std::cout << w.grad() << "\n";
//
// Read next: docs/internals.md (the reading path through the code).
#pragma once

#include "core/backends.h"
#include "core/creation.h"
#include "core/cuda/cuda.h"
#include "core/device.h"
#include "core/dtype.h"
#include "core/io/npy.h"
#include "core/random.h"
#include "core/scalar.h"
#include "core/tensor.h"
#include "core/tensor_options.h"
#include "core/threads.h"
#include "core/type_promotion.h"
#include "core/warning.h"

#include "autograd/anomaly_mode.h"
#include "autograd/engine.h"
#include "autograd/functions/attention.h"
#include "autograd/functions/elementwise.h"
#include "autograd/functions/index.h"
#include "autograd/functions/linalg.h"
#include "autograd/functions/nn.h"
#include "autograd/functions/reduce.h"
#include "autograd/functions/rnn.h"
#include "autograd/functions/triangular.h"
#include "autograd/gradcheck.h"
#include "autograd/graph.h"
#include "autograd/node.h"
#include "core/grad_mode.h"

#include "amp/amp.h"
#include "checkpoint/checkpoint_dir.h"
#include "compile/compile.h"
#include "data/data.h"
#include "distributed/data_parallel.h"
#include "distributed/distributed.h"
#include "distributed/process_group_mpi.h"
#include "memory/plan.h"
#include "nn/nn.h"
#include "onnx/export.h"
#include "optim/optim.h"
#include "profiler/profiler.h"
