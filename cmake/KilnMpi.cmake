# cmake/KilnMpi.cmake — decides whether distributed/ gets its MPI backend (KILN_MPI=AUTO|ON|OFF)
# and sets KILN_MPI_SOURCES: distributed/mpi/process_group_mpi.cpp when Debian's
# libopenmpi-dev is found, else distributed/mpi/stub.cpp, whose init_process_group says how to
# get MPI. kiln_configure_mpi(target) links MPI into a target; KILN_MPIEXEC is the launcher the
# distributed tests run under.
set(KILN_MPI AUTO CACHE STRING "Build the MPI backend of kiln::distributed: AUTO, ON or OFF")
set_property(CACHE KILN_MPI PROPERTY STRINGS AUTO ON OFF)
set(KILN_WITH_MPI OFF)

if(NOT KILN_MPI STREQUAL "OFF")
  # Kiln calls MPI's C API from C++: the deprecated C++ bindings are not wanted.
  set(MPI_CXX_SKIP_MPICXX ON)
  find_package(MPI COMPONENTS CXX QUIET)
  if(MPI_CXX_FOUND AND MPIEXEC_EXECUTABLE)
    set(KILN_WITH_MPI ON)
    message(STATUS "Kiln distributed MPI backend: ON (MPI ${MPI_CXX_VERSION}, ${MPIEXEC_EXECUTABLE})")
  elseif(KILN_MPI STREQUAL "ON")
    message(FATAL_ERROR "KILN_MPI=ON but MPI was not found (Debian: apt-get install libopenmpi-dev openmpi-bin)")
  else()
    message(STATUS "Kiln distributed MPI backend: OFF (MPI not found)")
  endif()
else()
  message(STATUS "Kiln distributed MPI backend: OFF (KILN_MPI=OFF)")
endif()

if(KILN_WITH_MPI)
  set(KILN_MPI_SOURCES ${PROJECT_SOURCE_DIR}/distributed/mpi/process_group_mpi.cpp)
  set(KILN_MPIEXEC ${MPIEXEC_EXECUTABLE})
else()
  set(KILN_MPI_SOURCES ${PROJECT_SOURCE_DIR}/distributed/mpi/stub.cpp)
endif()

function(kiln_configure_mpi target)
  if(KILN_WITH_MPI)
    # PUBLIC for the static library's consumers (KilnConfig.cmake finds MPI for them).
    target_link_libraries(${target} PUBLIC MPI::MPI_CXX)
  endif()
endfunction()
