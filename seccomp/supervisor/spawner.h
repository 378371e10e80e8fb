/* A live session's spawner (spawner.c), started by the guest start-up
 * (guestinit.c) in place of a guest program. */
#ifndef KBOX_SPAWNER_H
#define KBOX_SPAWNER_H

/* The first argument of the getppid call by which a spawned child asks
 * kbox for its standard fds (spawn.go: spawnMagic). */
#define KBOX_SPAWN_MAGIC 0x6b626f7873706e21ULL

#include <stddef.h>

/* kbox_read_full reads exactly n bytes (guestinit.c): 0, or -1 at an
 * error or end of file. */
int kbox_read_full(int fd, void *buf, size_t n);

/* kbox_run_spawner serves kbox's spawn requests on sock until kbox closes
 * its end; it never returns. */
void kbox_run_spawner(int sock) __attribute__((noreturn));

#endif
