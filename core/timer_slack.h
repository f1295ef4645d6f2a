// How late a napping thread may wake. Linux lets a sleep end up to the thread's "timer slack"
// after the time asked for (50 us by default), so that wake-ups can be batched. A rank that naps
// between looks at its transport (harness/executor/mailbox.h, harness/mpi/mpi_transport.h) would
// then see a message that arrived during a 20 us nap up to 70 us late, and that lateness shows
// as bubble the simulator does not have. Ranks with a core of their own ask for 1 us instead;
// ranks sharing cores keep the default, as their waits sleep until woken.
#pragma once

#if defined(__linux__)
#include <sys/prctl.h>
#endif

namespace ppbench {

// For the calling thread only; false where the system has no such setting or refuses it.
inline bool tighten_timer_slack() {
#if defined(__linux__)
  constexpr unsigned long kSlackNanoseconds = 1000;
  return prctl(PR_SET_TIMERSLACK, kSlackNanoseconds, 0UL, 0UL, 0UL) == 0;
#else
  return false;
#endif
}

}  // namespace ppbench
