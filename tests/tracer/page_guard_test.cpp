// PageGuard (tracer/page_guard.h) on ordinary mmap'd memory, no CUDA: protect, fault, note,
// unprotect; faults that are not its own reach the program's handler or the default action.
//
// The program's own SIGSEGV handler is installed before the guard (as a program that sets
// one up at start and then initialises CUDA would), once for the whole binary.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <vector>

#include "tracer/page_guard.h"

namespace streamrace::tracer {
namespace {

const size_t kPage = size_t(sysconf(_SC_PAGESIZE));

// The program's handler: takes faults on the one page it protected itself, unprotects it and
// counts; anything else is a bug in the test (abort).
std::atomic<char*> g_program_page{nullptr};
std::atomic<int> g_program_faults{0};
std::atomic<uint64_t> g_program_addr{0};

void program_handler(int, siginfo_t* info, void*) {
  char* p = g_program_page.load();
  char* a = static_cast<char*>(info->si_addr);
  if (p == nullptr || a < p || a >= p + kPage) abort();
  g_program_addr.store(reinterpret_cast<uint64_t>(a));
  g_program_faults.fetch_add(1);
  mprotect(p, kPage, PROT_READ | PROT_WRITE);
}

std::vector<PageGuard::Fault> drain_all() {
  std::vector<PageGuard::Fault> out;
  PageGuard::process().drain([&](const PageGuard::Fault& f) { out.push_back(f); });
  return out;
}

char* map_pages(size_t n) {
  void* p = mmap(nullptr, n * kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  return static_cast<char*>(p);
}

uint64_t u(const void* p) { return reinterpret_cast<uint64_t>(p); }

// A write through a function of its own, so the noted stack can be checked against it.
__attribute__((noinline)) void store_byte(volatile char* p, char v) {
  *p = v;
  asm volatile("" ::: "memory");
}

std::atomic<uint64_t> g_seq{100};

class PageGuardTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    struct sigaction sa {};
    sa.sa_sigaction = program_handler;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    ASSERT_EQ(sigaction(SIGSEGV, &sa, nullptr), 0);
    ASSERT_TRUE(PageGuard::process().install(true));
    PageGuard::process().set_seq_source(&g_seq);
  }
  void SetUp() override {
    PageGuard::process().release_all();
    drain_all();
  }
};

TEST_F(PageGuardTest, AWriteToAGuardedPageIsNotedOnceAndStillHappens) {
  char* m = map_pages(4);
  ASSERT_NE(m, nullptr);
  PageGuard& g = PageGuard::process();
  const uint64_t seq_before = g_seq.load();
  uint32_t id = g.arm(u(m + kPage), u(m + 3 * kPage), PROT_READ, PROT_READ | PROT_WRITE);
  ASSERT_NE(id, 0u);
  EXPECT_EQ(m[kPage + 100], 0);  // reads of a write-protected page do not fault
  EXPECT_TRUE(drain_all().empty());
  store_byte(m + kPage + 100, 7);
  EXPECT_EQ(m[kPage + 100], 7);  // the write went through
  store_byte(m + kPage + 200, 8);  // same page, same window: unguarded now, not noted again
  store_byte(m + 10, 9);           // outside the window: never guarded
  auto faults = drain_all();
  ASSERT_EQ(faults.size(), 1u);
  const PageGuard::Fault& f = faults[0];
  EXPECT_EQ(f.addr, u(m + kPage + 100));
  EXPECT_EQ(f.page, u(m + kPage));
  EXPECT_EQ(f.page_bytes, kPage);
  EXPECT_EQ(f.dir, trace::AccessDir::kWrite);
  EXPECT_TRUE(f.exact_addr);
  EXPECT_EQ(f.tid, pid_t(syscall(SYS_gettid)));
  EXPECT_EQ(f.seq, seq_before);  // one seq taken, at the fault
  EXPECT_EQ(g_seq.load(), seq_before + 1);
  // The innermost frame is the store itself, inside store_byte; the unwinder got past the
  // signal frame to its callers.
  ASSERT_GE(f.nframes, 2u);
  EXPECT_GE(f.pcs[0], u(reinterpret_cast<const void*>(&store_byte)));
  EXPECT_LT(f.pcs[0], u(reinterpret_cast<const void*>(&store_byte)) + 256);
  // The window's other page is still guarded.
  store_byte(m + 2 * kPage + 5, 1);
  faults = drain_all();
  ASSERT_EQ(faults.size(), 1u);
  EXPECT_EQ(faults[0].addr, u(m + 2 * kPage + 5));
  g.release(id);
  store_byte(m + kPage + 300, 2);
  store_byte(m + 2 * kPage + 6, 3);
  EXPECT_TRUE(drain_all().empty());
  EXPECT_EQ(g_program_faults.load(), 0);
  munmap(m, 4 * kPage);
}

TEST_F(PageGuardTest, AReadOfAReadProtectedPageIsNotedAsARead) {
  char* m = map_pages(1);
  ASSERT_NE(m, nullptr);
  m[64] = 42;
  PageGuard& g = PageGuard::process();
  uint32_t id = g.arm(u(m), u(m + kPage), PROT_NONE, PROT_READ | PROT_WRITE);
  ASSERT_NE(id, 0u);
  volatile char* p = m + 64;
  EXPECT_EQ(*p, 42);  // the read sees the data
  auto faults = drain_all();
  ASSERT_EQ(faults.size(), 1u);
#if defined(__x86_64__)
  EXPECT_EQ(faults[0].dir, trace::AccessDir::kRead);
#else
  EXPECT_EQ(faults[0].dir, trace::AccessDir::kReadWrite);
#endif
  EXPECT_EQ(faults[0].addr, u(m + 64));
  g.release(id);
  munmap(m, kPage);
}

TEST_F(PageGuardTest, ReleaseGivesEveryPageItsProtectionBackAndStaleIdsAreIgnored) {
  char* m = map_pages(2);
  ASSERT_NE(m, nullptr);
  PageGuard& g = PageGuard::process();
  uint32_t id = g.arm(u(m), u(m + 2 * kPage), PROT_READ, PROT_READ | PROT_WRITE);
  ASSERT_NE(id, 0u);
  g.release(id);
  g.release(id);  // already released: nothing happens
  store_byte(m, 1);
  store_byte(m + kPage, 1);
  EXPECT_TRUE(drain_all().empty());
  // A new window in the reused slot has a new id: the old one does not release it.
  uint32_t id2 = g.arm(u(m), u(m + kPage), PROT_READ, PROT_READ | PROT_WRITE);
  ASSERT_NE(id2, 0u);
  EXPECT_NE(id2, id);
  g.release(id);
  store_byte(m + 1, 2);
  EXPECT_EQ(drain_all().size(), 1u);
  g.release(id2);
  munmap(m, 2 * kPage);
}

TEST_F(PageGuardTest, AStricterWindowOnTheSamePageStaysStrict) {
  char* m = map_pages(1);
  ASSERT_NE(m, nullptr);
  PageGuard& g = PageGuard::process();
  uint32_t a = g.arm(u(m), u(m + kPage), PROT_NONE, PROT_READ | PROT_WRITE);
  uint32_t b = g.arm(u(m), u(m + kPage), PROT_READ, PROT_READ | PROT_WRITE);
  ASSERT_NE(a, 0u);
  ASSERT_NE(b, 0u);
  volatile char* p = m + 8;
  (void)*p;  // still read-protected: the pending destination's read is caught
  EXPECT_EQ(drain_all().size(), 1u);
  g.release(a);
  g.release(b);
  munmap(m, kPage);
}

// More faults than slots before a drain: the rest are counted as lost, every access still happens.
TEST_F(PageGuardTest, FaultsBeyondTheSlotsAreCountedAsLostAndStillProceed) {
  const size_t pages = 4096 + 100;
  char* m = map_pages(pages);
  ASSERT_NE(m, nullptr);
  PageGuard& g = PageGuard::process();
  uint32_t id = g.arm(u(m), u(m + pages * kPage), PROT_READ, PROT_READ | PROT_WRITE);
  ASSERT_NE(id, 0u);
  const auto before = g.counts();
  for (size_t p = 0; p < pages; ++p) store_byte(m + p * kPage, 1);
  for (size_t p = 0; p < pages; ++p) ASSERT_EQ(m[p * kPage], 1);
  EXPECT_EQ(g.counts().faults, before.faults + pages);
  EXPECT_EQ(g.counts().faults_dropped, before.faults_dropped + 100);
  EXPECT_EQ(drain_all().size(), 4096u);
  g.release(id);
  munmap(m, pages * kPage);
}

TEST_F(PageGuardTest, ArmRefusesWhatIsNotWholePages) {
  char* m = map_pages(1);
  ASSERT_NE(m, nullptr);
  PageGuard& g = PageGuard::process();
  EXPECT_EQ(g.arm(u(m) + 8, u(m + kPage), PROT_READ, PROT_READ | PROT_WRITE), 0u);
  EXPECT_EQ(g.arm(u(m), u(m) + 100, PROT_READ, PROT_READ | PROT_WRITE), 0u);
  EXPECT_EQ(g.arm(u(m), u(m), PROT_READ, PROT_READ | PROT_WRITE), 0u);
  EXPECT_EQ(g.arm(u(m), u(m + kPage), PROT_WRITE, PROT_READ | PROT_WRITE), 0u);
  store_byte(m, 1);
  EXPECT_TRUE(drain_all().empty());
  munmap(m, kPage);
}

TEST_F(PageGuardTest, AFaultOutsideEveryWindowReachesTheProgramsHandler) {
  char* guarded = map_pages(1);
  char* own = map_pages(1);
  ASSERT_NE(guarded, nullptr);
  ASSERT_NE(own, nullptr);
  PageGuard& g = PageGuard::process();
  uint32_t id = g.arm(u(guarded), u(guarded + kPage), PROT_READ, PROT_READ | PROT_WRITE);
  ASSERT_NE(id, 0u);
  // The program protects a page of its own and relies on its handler.
  g_program_page.store(own);
  g_program_faults.store(0);
  ASSERT_EQ(mprotect(own, kPage, PROT_READ), 0);
  const uint64_t passed = g.counts().passed_on;
  store_byte(own + 12, 5);
  EXPECT_EQ(g_program_faults.load(), 1);
  EXPECT_EQ(g_program_addr.load(), u(own + 12));
  EXPECT_EQ(own[12], 5);
  EXPECT_EQ(g.counts().passed_on, passed + 1);
  EXPECT_TRUE(drain_all().empty());  // not ours: nothing noted
  g_program_page.store(nullptr);
  g.release(id);
  munmap(guarded, kPage);
  munmap(own, kPage);
}

// A fault delivered after another thread released the page's window (the release raced with
// the fault): the page is accessible again, so the access is retried, never passed on.
TEST_F(PageGuardTest, AStaleFaultOnAPageReleasedMeanwhileIsRetried) {
  char* m = map_pages(1);
  char* own = map_pages(1);
  ASSERT_NE(m, nullptr);
  ASSERT_NE(own, nullptr);
  PageGuard& g = PageGuard::process();
  uint32_t id = g.arm(u(m), u(m + kPage), PROT_READ, PROT_READ | PROT_WRITE);
  ASSERT_NE(id, 0u);
  g.release(id);
  siginfo_t info;
  std::memset(&info, 0, sizeof info);
  info.si_signo = SIGSEGV;
  info.si_code = SEGV_ACCERR;
  info.si_addr = m + 40;
  const auto before = g.counts();
  g.on_signal(SIGSEGV, &info, nullptr);
  EXPECT_EQ(g.counts().retried, before.retried + 1);
  EXPECT_EQ(g.counts().passed_on, before.passed_on);
  EXPECT_TRUE(drain_all().empty());
  // The same on a page that is still protected by someone else: passed on, not retried.
  g_program_page.store(own);
  g_program_faults.store(0);
  ASSERT_EQ(mprotect(own, kPage, PROT_READ), 0);
  info.si_addr = own + 8;
  g.on_signal(SIGSEGV, &info, nullptr);
  EXPECT_EQ(g_program_faults.load(), 1);
  EXPECT_EQ(g.counts().retried, before.retried + 1);
  EXPECT_EQ(g.counts().passed_on, before.passed_on + 1);
  g_program_page.store(nullptr);
  munmap(m, kPage);
  munmap(own, kPage);
}

TEST_F(PageGuardTest, ArmRefusesOnceAnotherHandlerReplacedOurs) {
  char* m = map_pages(1);
  ASSERT_NE(m, nullptr);
  PageGuard& g = PageGuard::process();
  struct sigaction ours {}, other {};
  ASSERT_EQ(sigaction(SIGSEGV, nullptr, &ours), 0);
  other.sa_sigaction = program_handler;
  other.sa_flags = SA_SIGINFO;
  sigemptyset(&other.sa_mask);
  ASSERT_EQ(sigaction(SIGSEGV, &other, nullptr), 0);
  EXPECT_FALSE(g.still_on_top());
  EXPECT_EQ(g.arm(u(m), u(m + kPage), PROT_READ, PROT_READ | PROT_WRITE), 0u);
  store_byte(m, 1);  // never protected
  ASSERT_EQ(sigaction(SIGSEGV, &ours, nullptr), 0);
  EXPECT_TRUE(g.still_on_top());
  uint32_t id = g.arm(u(m), u(m + kPage), PROT_READ, PROT_READ | PROT_WRITE);
  EXPECT_NE(id, 0u);
  g.release(id);
  munmap(m, kPage);
}

TEST_F(PageGuardTest, AForkedChildGetsItsPagesBackAndNoParentFaults) {
  char* m = map_pages(1);
  ASSERT_NE(m, nullptr);
  PageGuard& g = PageGuard::process();
  uint32_t id = g.arm(u(m), u(m + kPage), PROT_READ, PROT_READ | PROT_WRITE);
  ASSERT_NE(id, 0u);
  store_byte(m + kPage / 2, 1);  // a fault the parent has not drained yet
  ASSERT_TRUE(g.has_faults());
  store_byte(m + kPage / 2, 0);
  // Re-guard the page so the child inherits a protected page.
  g.release(id);
  id = g.arm(u(m), u(m + kPage), PROT_READ, PROT_READ | PROT_WRITE);
  ASSERT_NE(id, 0u);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    g.reset_after_fork();
    int code = 0;
    if (g.has_faults()) code |= 1;  // the parent's fault is not the child's
    // With the program's handler aborting on any page but its own, a still protected page
    // would kill the child.
    store_byte(m + 3, 4);
    if (g.has_faults()) code |= 2;
    _exit(code);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_EQ(drain_all().size(), 1u);  // the parent still has its own
  g.release(id);
  munmap(m, kPage);
}

// Without a handler of the program's, a fault that is not the guard's must end the process
// the default way: killed by SIGSEGV, as it would have been untraced.
TEST(PageGuardDeathTest, AFaultNotOursWithTheDefaultActionKillsBySigsegv) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        signal(SIGSEGV, SIG_DFL);
        PageGuard::process().install(false);
        char* m = map_pages(2);
        uint32_t id = PageGuard::process().arm(u(m), u(m + kPage), PROT_READ, PROT_READ | PROT_WRITE);
        store_byte(m + 1, 1);  // the guard's own: handled, the process goes on
        if (id == 0 || !PageGuard::process().has_faults()) _exit(3);
        mprotect(m + kPage, kPage, PROT_READ);
        store_byte(m + kPage + 1, 1);  // not the guard's: the default action
        _exit(4);
      },
      ::testing::KilledBySignal(SIGSEGV), "");
}

TEST(PageGuardDeathTest, ASegvSentWithKillIsNotSwallowed) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        signal(SIGSEGV, SIG_DFL);
        PageGuard::process().install(false);
        char* m = map_pages(1);
        if (PageGuard::process().arm(u(m), u(m + kPage), PROT_READ, PROT_READ | PROT_WRITE) == 0) _exit(3);
        kill(getpid(), SIGSEGV);
        _exit(4);
      },
      ::testing::KilledBySignal(SIGSEGV), "");
}

}  // namespace
}  // namespace streamrace::tracer
