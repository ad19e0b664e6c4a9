// Holding every write to a range of this process's memory for a moment, so
// that the range can be copied and the copy moved over it without losing a
// store made meanwhile (memory/mr_backing.cc re-backs registered pages that
// way, and back again at deregistration).
//
// The hold is userfaultfd write protection: a thread of this process that
// stores into the range, and the kernel writing there for anyone (a read()
// into it, another process's process_vm_writev), sleeps in its page fault
// until the hold ends, then retries the store on whatever is mapped there
// by then. Nothing is lost and nobody sees an error.
//
// The kernel's faults are held only by a userfaultfd that may handle them:
// one made by a process with CAP_SYS_PTRACE, one made with
// vm.unprivileged_userfaultfd=1, or one from /dev/userfaultfd (its file mode
// says who may). Without that, hold() fails and the caller must not move
// the pages.
#pragma once

#include <cstdint>

namespace uroce::core {

class WriteHold {
 public:
  WriteHold() = default;
  WriteHold(const WriteHold&) = delete;
  WriteHold& operator=(const WriteHold&) = delete;
  ~WriteHold() { release(); }

  /// True if this process can hold writes at all (checked once).
  static bool available();

  /// Holds writes to [addr, addr+len) (whole pages; private anonymous memory,
  /// or shmem when `shmem`). False, holding nothing, if it cannot.
  /// Between hold() and release() the caller must not allocate, log or take a
  /// lock: a held writer may be a thread inside malloc holding its lock.
  bool hold(uint64_t addr, uint64_t len, bool shmem);

  /// Ends the hold: held writers retry. Call after the range was replaced
  /// (or left as it was). No system call if nothing is held.
  void release();

 private:
  int fd_ = -1;
  uint64_t addr_ = 0, len_ = 0;
};

}  // namespace uroce::core
