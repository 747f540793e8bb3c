#include "core/gguf.h"
