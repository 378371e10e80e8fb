/* libplug_b.so: plug_call is getpid (39). */
#define PLUG_NR 39
#include "plug.h"
