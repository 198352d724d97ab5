// A GoogleTest main for tests run under mpirun: every rank runs every test
// (they are collective), only rank 0 prints, and MPI is finalised at the end.
#pragma once

#include <gtest/gtest.h>
#include <mpi.h>

#include "exec/mpi_session.h"

#define COCONET_MPI_TEST_MAIN()                                                        \
  int main(int argc, char** argv) {                                                    \
    ::testing::InitGoogleTest(&argc, argv);                                            \
    ::coconet::exec::ensure_mpi();                                                     \
    int rank = 0;                                                                      \
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);                                              \
    if (rank != 0) {                                                                   \
      auto& listeners = ::testing::UnitTest::GetInstance()->listeners();               \
      delete listeners.Release(listeners.default_result_printer());                    \
    }                                                                                  \
    const int rc = RUN_ALL_TESTS();                                                    \
    ::coconet::exec::finalize_mpi();                                                   \
    return rc;                                                                         \
  }
