#include "kernels/dtype.h"
