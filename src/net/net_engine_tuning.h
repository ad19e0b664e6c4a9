// The network engine's scheduling constants (net/net_engine.cc), each with
// what it trades. The measurements behind the values are in
// bench/RESULTS.md ("Why": the network engine's scheduling).
#pragma once

#include <cstdint>

namespace uroce::core::tuning {

/// The engine thread re-checks deadlines at least this often when nothing
/// wakes it: a longer sleep only delays a timer whose kick was lost.
constexpr uint64_t kIdleWakeNs = 100'000'000;
/// Sources one round handles at most; the rest wait for the next round.
constexpr int kMaxEvents = 64;
/// Batches read from one readable socket per round: more favours a busy
/// flow, fewer the latency of the other sources.
constexpr int kMaxRoundsPerSocket = 8;
/// QPs whose held ACKs a batch tracks one by one; past that every QP's are
/// flushed (a small list against a sweep of all QPs).
constexpr int kMaxTouched = 16;
/// After a packet the engine thread keeps reading this long before it
/// sleeps: longer spends a core, shorter pays a wake-up per packet of a
/// stream (a wake-up costs more than the packet).
constexpr uint64_t kSpinIdleNs = 50'000;
/// While the application polls but may not read the sockets (it spins on
/// memory), the engine thread first looks at them after this long: shorter
/// finds such a program's packets sooner, at a context switch on its core
/// per look. (Its sleeps keep the kernel's default timer slack: exact
/// wake-ups cost the polling program more.)
constexpr uint64_t kAppCheckNs = 20'000;
/// The farthest apart those looks grow (they double) while the application
/// reads the sockets itself.
constexpr uint64_t kAppCheckMaxNs = 2'000'000;
/// A held ACK older than this goes out with the engine thread's look or a
/// posted receive: longer lets more ACKs ride with a reply, shorter frees
/// the sender's window sooner.
constexpr uint64_t kAckHoldNs = 10'000;
/// A poll sends a held ACK older than this; a younger one waits for the
/// post that may follow, so that the two leave in one send (a peer's
/// request and its ACK may reach two polls of a spinning program).
constexpr uint64_t kPollAckHoldNs = 3'000;
/// A receive posted this soon after a poll that read every source empty
/// does not look again (an epoll_wait): what came since raced with the
/// post, as it may on a NIC.
constexpr uint64_t kCatchUpFreshNs = 5'000;
/// With up to this many QPs a poll reads their sockets directly (a receive
/// call each); with more it asks epoll which are readable (one call, but a
/// packet's way in is longer).
constexpr int kDirectReadSockets = 2;
/// A poll reads the QPs' other sockets (groups, other addresses, the UDP
/// socket of a QP steered to AF_XDP) every this many times: more often finds
/// their rare packets sooner, at a receive call each.
constexpr unsigned kExtraReadEvery = 8;
/// A poll reads the process's inbox every this many times until a packet
/// has come through it (most programs never get one), every time after.
constexpr unsigned kIdleInboxReadEvery = 64;
/// An application that read the sockets within this long is reading them:
/// the engine thread leaves them alone.
constexpr uint64_t kAppActiveNs = 5'000;
/// An application that polled or posted within this long is taken to poll
/// still: the engine thread only watches the timers and looks now and then.
constexpr uint64_t kAppPollGraceNs = 200'000;
/// How long a raw QP's frame may wait on an AF_XDP port's send ring for its
/// kick when the application does not poll (net/raw_engine.cc kicks at
/// once every kRawKickBatch frames; an empty poll kicks what waits).
constexpr uint64_t kRawKickNs = 20'000;
constexpr uint32_t kRawKickBatch = 32;
/// A raw QP's frame that follows its previous one by more than this leaves
/// at once (one kick each): sends that far apart are a ping-pong's, which
/// a wait for the next poll only delays; closer ones share kicks.
constexpr uint64_t kRawKickSparseNs = 2'000;
/// Packets parked for evidence of their IPv4 identification
/// (link/id_trust.h) are looked at again at least this often (uroced
/// records a frame within tens of microseconds of its arrival).
constexpr uint64_t kParkedRecheckNs = 100'000;
/// While a QP of the process waits for ACKs to open its congestion window,
/// a poll that found nothing this many times in a row gives up its core
/// (sched_yield) every kWindowYieldEvery-th time after: the senders of an
/// incast on few cores then leave the receiver the CPU it needs to answer
/// them. Fewer empty polls yield sooner, at the risk of an ACK waiting for
/// the poller to run again; a QP whose window is not full (a ping-pong)
/// never yields.
constexpr unsigned kWindowYieldAfter = 32;
constexpr unsigned kWindowYieldEvery = 16;

}  // namespace uroce::core::tuning
