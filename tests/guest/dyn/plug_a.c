/* libplug_a.so: plug_call is getuid (102). */
#define PLUG_NR 102
#include "plug.h"
