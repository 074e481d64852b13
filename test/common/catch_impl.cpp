// Catch2's implementation, compiled once at -O0 (it is large and slow to optimize). Catch2 v2
// declares Catch::Session only here, so the runners call run_catch_session instead.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <atomic>
#include <cstdio>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include <spsd/runtime/runtime.hpp>

#include "catch_runner.hpp"

namespace {

// Catch2 v2's assertions are not thread-safe, and simulated ranks are threads: rank-side code
// records into spsd_test::Failures and the test asserts on its own thread (failures.hpp). This
// listener sees every assertion (expressions, messages, the THROWS family) and notes those made
// elsewhere; the run then fails. One thread other than the test's may assert when it is the rank
// of a one-rank simulate: the test's thread waits in simulate's join meanwhile.
class AssertionThreads : public Catch::TestEventListenerBase {
 public:
  using TestEventListenerBase::TestEventListenerBase;

  // What was noted, one "test case: file:line" per place.
  static std::set<std::string>& places() {
    static std::set<std::string> p;
    return p;
  }
  static std::mutex& mutex() {
    static std::mutex m;
    return m;
  }

  void testCaseStarting(Catch::TestCaseInfo const& info) override {
    TestEventListenerBase::testCaseStarting(info);
    test_thread_ = std::this_thread::get_id();
    std::lock_guard lock(mutex());
    test_case_ = info.name;
  }
  void assertionStarting(Catch::AssertionInfo const& info) override { note(info.lineInfo); }
  bool assertionEnded(Catch::AssertionStats const& stats) override {
    note(stats.assertionResult.getSourceInfo());
    return true;
  }

 private:
  static bool alone_off_the_test_thread() {
    try {
      return spsd::world_size() == 1;
    } catch (...) {  // no spsd context: a thread of the test's own
      return false;
    }
  }
  void note(const Catch::SourceLineInfo& where) {
    if (std::this_thread::get_id() == test_thread_.load() || alone_off_the_test_thread()) return;
    std::lock_guard lock(mutex());
    places().insert(test_case_ + ": " + where.file + ":" + std::to_string(where.line));
  }

  std::atomic<std::thread::id> test_thread_;
  std::string test_case_;
};

}  // namespace

CATCH_REGISTER_LISTENER(AssertionThreads)

int run_catch_session(int argc, char** argv) {
  Catch::Session session;
  // A test filter that selects no test case fails the run (Catch passes it by default): the meson
  // tests select their areas by tag, and a renamed tag would otherwise empty an area silently.
  session.configData().warnings = Catch::WarnAbout::NoTests;
  if (session.applyCommandLine(argc, argv) != 0) return 1;
  const Catch::ConfigData& config = session.configData();
  const bool listing = config.listTests || config.listTestNamesOnly || config.listTags || config.listReporters;
  const int result = session.run();
  if (listing) return 0;  // Catch returns the number of entries listed
  bool threads_ok = true;
  {
    std::lock_guard lock(AssertionThreads::mutex());
    for (const std::string& place : AssertionThreads::places()) {
      if (threads_ok)
        std::fprintf(stderr, "Catch assertions ran off the test's thread, where other threads could assert at the same "
                             "time (Catch is not thread-safe: record into spsd_test::Failures and assert on the "
                             "test's thread, test/common/failures.hpp):\n");
      std::fprintf(stderr, "  %s\n", place.c_str());
      threads_ok = false;
    }
  }
  // Catch returns the number of failed assertions: 77 of them would read as SKIP to meson.
  return result == 0 && threads_ok ? 0 : 1;
}
