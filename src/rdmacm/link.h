// The process's connections to uroced's connection manager
// (contract/cm_protocol.h): an event link, whose reader thread turns uroced's
// events into events on the ids' channels (connect.cc says what each one
// does), and a call channel, on which a caller sends its request and reads
// the answer itself (one call at a time; posts go the same way, so uroced
// sees every request in the order they were made).
#pragma once

#include <cstdint>

#include "contract/cm_protocol.h"
#include "rdmacm/cm.h"

namespace uroce::rdmacm {

/// Sends `m` (its seq is set here) and waits for the answer, which replaces
/// `m`. Returns 0 or an errno: the answer's status, or why there was none.
int cm_call(cmproto::Msg* m);
/// Sends `m` without waiting (uroced sends no answer): for a request whose
/// only possible refusals the library rules out itself, and from the reader
/// thread. uroced takes it in order with every call. 0 or an errno.
int cm_post(cmproto::Msg* m);

/// The id's handle in uroced, made at first need. 0 or an errno.
int cm_ensure_handle(CmId* id);
/// Forgets the id's handle (its uroced side is destroyed first).
void cm_drop_handle(CmId* id);
/// Registers an id that came with an event (CONNECT_REQUEST).
void cm_adopt_handle(CmId* id, uint64_t handle);

// connect.cc: an event from uroced, on the reader thread.
void on_cm_event(const cmproto::Msg& m);
/// The id with uroced handle `h` (nullptr if none); called with the
/// reader's lock held, so the id cannot go meanwhile.
CmId* cm_find(uint64_t h);

}  // namespace uroce::rdmacm
