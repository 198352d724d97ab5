// The one mapping from exceptions to the `coconet` command's exit codes
// (model/error.h): each error channel, its subclasses, and what is not one.
#include <exception>
#include <stdexcept>

#include <gtest/gtest.h>

#include "model/error.h"

namespace coconet {
namespace {

// A subclass keeps its channel's code (e.g. the backends' DeviceError is a RunFailure).
class SomeRunFailure : public RunFailure {
 public:
  SomeRunFailure() : RunFailure("a library call failed") {}
};

TEST(ExitCodes, AreTheDocumentedNumbers) {
  EXPECT_EQ(kExitOk, 0);
  EXPECT_EQ(kExitRunFailed, 1);
  EXPECT_EQ(kExitUserError, 2);
  EXPECT_EQ(kExitInternal, 3);
  EXPECT_EQ(kExitInterrupted, 130);
}

TEST(ExitCodes, EachChannelMapsToItsCode) {
  EXPECT_EQ(exit_code_for(UserError("bad input")), kExitUserError);
  EXPECT_EQ(exit_code_for(RunFailure("mismatch")), kExitRunFailed);
  EXPECT_EQ(exit_code_for(SomeRunFailure()), kExitRunFailed);
  EXPECT_EQ(exit_code_for(InternalError("broken invariant")), kExitInternal);
  EXPECT_EQ(exit_code_for(std::out_of_range("map::at")), kExitInternal);
}

TEST(ExitCodes, CapturedExceptionsMapTheSameWay) {
  EXPECT_EQ(exit_code_of(nullptr), kExitOk);
  EXPECT_EQ(exit_code_of(std::make_exception_ptr(UserError("x"))), kExitUserError);
  EXPECT_EQ(exit_code_of(std::make_exception_ptr(SomeRunFailure())), kExitRunFailed);
  EXPECT_EQ(exit_code_of(std::make_exception_ptr(InternalError("x"))), kExitInternal);
  EXPECT_EQ(exit_code_of(std::make_exception_ptr(42)), kExitInternal);
}

TEST(ExitCodes, AssertIsAnInternalError) {
  try {
    COCONET_ASSERT(1 + 1 == 3, "arithmetic");
    FAIL() << "COCONET_ASSERT must throw";
  } catch (const std::exception& e) {
    EXPECT_EQ(exit_code_for(e), kExitInternal);
  }
}

}  // namespace
}  // namespace coconet
