#!/usr/bin/env bash
# Shared by the tests that run uroce as another user than the one who built
# it (isolation/other_user_test.sh, netns/xdp_noprivs.sh; the
# clone_anywhere test runs each again from a clone under a mode-0700
# directory: a new one goes in its list too). Source it; it defines:
#   copy_for_user AS...  copies what the other user must read and run (the
#       drop-in libraries of $UROCE_LIBDIR, libibverbs.so* and librdmacm.so*,
#       links as links, and the daemon $UROCE_UROCED) into a new directory
#       under /tmp, laid out as the build tree (lib/, bin/uroced, so the
#       copied library finds the copied daemon by its own location as well);
#       points UROCE_LIBDIR, LD_LIBRARY_PATH and UROCE_UROCED at the copies
#       and changes to that directory, so the other user's processes run
#       from a place they can read. AS... is the command prefix that runs a
#       command as the other user (setpriv ...): it must be able to read the
#       library and run the daemon there. Sets user_copy to the directory;
#       the caller removes it on exit (rm -rf "$user_copy" in its trap).
#       If the copy cannot be made or used, removes what it made, prints one
#       SKIP line saying why and exits 77.
#
# Why a copy: a clone under a mode-0700 directory (as /root is) keeps every
# other user out of its build tree (a process setpriv --reuid starts has
# none of root's capabilities, CAP_DAC_OVERRIDE among them), so the other
# user's loader would skip the unreadable LD_LIBRARY_PATH entry and load
# Debian's libibverbs.so.1, and could not run the build's uroced either.
# /tmp, not $TMPDIR: a private TMPDIR would keep the other user out in the
# same way.

user_copy=

copy_for_user() {
  local lib=${UROCE_LIBDIR:?UROCE_LIBDIR (set by CTest)}
  local uroced=${UROCE_UROCED:?UROCE_UROCED (set by CTest)}
  user_copy=$(mktemp -d /tmp/uroce-other-user-copy.XXXXXX 2>/dev/null) || {
    echo "SKIP: cannot create a directory under /tmp for the other user's copy of the library and uroced"
    exit 77
  }
  local err
  if ! err=$({
    mkdir "$user_copy/lib" "$user_copy/bin" &&
      cp -P "$lib"/libibverbs.so* "$lib"/librdmacm.so* "$user_copy/lib/" &&
      cp "$uroced" "$user_copy/bin/uroced" &&
      chmod 755 "$user_copy" "$user_copy/lib" "$user_copy/bin" "$user_copy/bin/uroced" &&
      find "$user_copy/lib" -type f -exec chmod 644 {} +
  } 2>&1); then
    rm -rf "$user_copy"
    echo "SKIP: cannot copy the library and uroced under /tmp for the other user: ${err%%$'\n'*}"
    exit 77
  fi
  if ! "$@" test -r "$user_copy/lib/libibverbs.so.1" 2>/dev/null ||
    ! "$@" test -x "$user_copy/bin/uroced" 2>/dev/null; then
    rm -rf "$user_copy"
    echo "SKIP: the other user cannot read and run a copy of the library and uroced under /tmp (not traversable, or mounted noexec?)"
    exit 77
  fi
  export UROCE_LIBDIR=$user_copy/lib LD_LIBRARY_PATH=$user_copy/lib UROCE_UROCED=$user_copy/bin/uroced
  cd "$user_copy" || exit 1
}
