// Device names: see device.h.
#include "base/device.h"

#include <charconv>

#include "base/error.h"

namespace specmoe {

std::string Device::name() const { return kind == Kind::Cpu ? "cpu" : "cuda:" + std::to_string(index); }

Device parse_device(const std::string& text) {
  Device d;
  if (text == "cpu") return d;
  if (text == "cuda") {
    d.kind = Device::Kind::Cuda;
    return d;
  }
  if (text.rfind("cuda:", 0) == 0 && text.size() > 5) {
    const char* first = text.data() + 5;
    const char* last = text.data() + text.size();
    int index = -1;
    const auto [end, ec] = std::from_chars(first, last, index);
    if (ec == std::errc() && end == last && index >= 0) {
      d.kind = Device::Kind::Cuda;
      d.index = index;
      return d;
    }
  }
  throw_error(ErrorKind::InvalidArgument, "device '{}': expected cpu, cuda or cuda:N (N = 0, 1, ...)", text);
}

}  // namespace specmoe
