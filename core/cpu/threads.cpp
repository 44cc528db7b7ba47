// core/cpu/threads.cpp — one knob for OpenMP and Eigen (Note [CPU threads]).
#include "core/threads.h"

#include <omp.h>

#include <Eigen/Core>

#include "core/error.h"

namespace kiln {

void set_num_threads(int n) {
  KILN_CHECK_VALUE(n > 0, "set_num_threads expects a positive number, got ", n);
  omp_set_num_threads(n);
  Eigen::setNbThreads(n);
}

int get_num_threads() { return omp_get_max_threads(); }

}  // namespace kiln
