// Runs a libFuzzer target over files (or every file in directories) without
// libFuzzer: how the checked-in corpus is replayed in the gcc and ASan builds.
#include <dirent.h>
#include <sys/stat.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

static int run_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  LLVMFuzzerTestOneInput(bytes.data(), bytes.size());
  return 1;
}

int main(int argc, char** argv) {
  int n = 0;
  for (int i = 1; i < argc; ++i) {
    struct stat st;
    if (stat(argv[i], &st) != 0) {
      fprintf(stderr, "replay: cannot stat %s\n", argv[i]);
      return 1;
    }
    if (!S_ISDIR(st.st_mode)) {
      n += run_file(argv[i]);
      continue;
    }
    DIR* d = opendir(argv[i]);
    while (dirent* e = d ? readdir(d) : nullptr)
      if (e->d_name[0] != '.') n += run_file(std::string(argv[i]) + "/" + e->d_name);
    if (d) closedir(d);
  }
  printf("replayed %d inputs\n", n);
  return n > 0 ? 0 : 1;
}
