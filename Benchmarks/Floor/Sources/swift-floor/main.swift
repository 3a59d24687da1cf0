// The floor of the footprint rows: the smallest Swift program a daemon could be, built as
// the shipped programs are (the Swift runtime linked statically). It says READY=1 at once,
// waits for SIGTERM and exits 0 — what no runtime on top of Swift can do faster or smaller.

import ReadyNotification

#if canImport(Glibc)
    import Glibc
#endif

var signals = sigset_t()
sigemptyset(&signals)
sigaddset(&signals, SIGTERM)
// Blocked before READY=1, so a SIGTERM right after it waits for sigwait instead of killing.
pthread_sigmask(SIG_BLOCK, &signals, nil)
notifyReady()
var received: Int32 = 0
sigwait(&signals, &received)
exit(0)
