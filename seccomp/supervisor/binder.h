/* The socket binder (binder.c), started by the guest start-up
 * (guestinit.c). */
#ifndef KBOX_BINDER_H
#define KBOX_BINDER_H

/* kbox_run_binder serves kbox's requests on sock, in directory dir (its
 * root, by chroot when chroot_ok and the chroot works), until kbox closes
 * its end; it never returns. */
void kbox_run_binder(int sock, const char *dir, int chroot_ok) __attribute__((noreturn));

#endif
