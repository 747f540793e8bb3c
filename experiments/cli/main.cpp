// specmoe command-line tool.
#include <cstdio>

int main() {
  std::puts("specmoe: no commands yet");
  return 0;
}
