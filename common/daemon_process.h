// What both daemons do to their process before they start a thread.
#pragma once

#include <signal.h>

#include <initializer_list>

namespace podscope::common {

// Blocks `signals` in the calling thread, and so in every thread it starts afterwards: they are
// then taken only by a sigwait on the main thread, never delivered to some other thread (whose
// default action would end the process). Call before any thread exists. Returns the set.
sigset_t BlockSignals(std::initializer_list<int> signals);

// Raises the soft limit on open descriptors to the hard limit: every connection is a
// descriptor, so running out then takes a real flood.
void RaiseDescriptorLimit();

}  // namespace podscope::common
