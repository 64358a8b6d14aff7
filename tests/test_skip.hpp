// test_skip: a test that cannot run here says so, and ctest counts it as not run.
//
// Catch2 v2 has no skip. Under ctest (every discovered test case is its own process, started
// with MEITH_TEST_SKIP_EXIT=77 and SKIP_RETURN_CODE 77: tests/CMakeLists.txt), SKIP_TEST
// prints why and ends the process with 77, so the run's summary lists it under "did not run".
// Run by hand (the whole binary in one process), it warns and returns from the test case, so
// the other test cases still run. Use it before the test makes anything that needs cleaning up.
#pragma once

#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace meith::test {

/// Ends the process as skipped when ctest runs it (see above); returns otherwise.
inline void report_skip(const std::string& why) {
    if (const char* code = std::getenv("MEITH_TEST_SKIP_EXIT"); code != nullptr) {
        std::fprintf(stderr, "skipped: %s\n", why.c_str());
        std::fflush(nullptr);
        std::_Exit(std::atoi(code));
    }
}

} // namespace meith::test

/// Skips the current test case, saying `why` (a std::string or a literal).
#define SKIP_TEST(why)                                                                             \
    do {                                                                                           \
        ::meith::test::report_skip(why);                                                           \
        WARN("skipped: " << (why));                                                                \
        return;                                                                                    \
    } while (false)
