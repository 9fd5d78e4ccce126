// engine/env/env.cc -- anchor for the Env interface (its implementations live
// in posix_env.cc and mem_env.cc).
#include "engine/env/env.h"
