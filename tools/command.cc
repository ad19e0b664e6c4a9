#include "tools/command.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace uroce::tools {

int run_with(const std::vector<std::string>& argv, const char* name, const std::string& value) {
  signal(SIGINT, SIG_IGN);
  signal(SIGQUIT, SIG_IGN);
  const pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    signal(SIGINT, SIG_DFL);
    signal(SIGQUIT, SIG_DFL);
    setenv(name, value.c_str(), 1);
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execvp(args[0], args.data());
    fprintf(stderr, "uroce: cannot run %s: %s\n", args[0], strerror(errno));
    _exit(127);
  }
  int st = 0;
  while (waitpid(pid, &st, 0) < 0)
    if (errno != EINTR) return -1;
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

std::string make_temp_dir(const char* prefix) {
  const char* tmp = getenv("TMPDIR");
  std::string dir = std::string(tmp && *tmp ? tmp : "/tmp") + "/" + prefix + "XXXXXX";
  if (!mkdtemp(dir.data())) {
    fprintf(stderr, "uroce: cannot create a directory in %s: %s\n", tmp ? tmp : "/tmp", strerror(errno));
    return "";
  }
  return dir;
}

}  // namespace uroce::tools
