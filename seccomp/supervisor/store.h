#ifndef KBOX_STORE_H
#define KBOX_STORE_H

/* kbox_run_store serves the content store's requests on sock until kbox's
 * end closes (store.c); it returns the helper's exit status. */
int kbox_run_store(int sock);

#endif
