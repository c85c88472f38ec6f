/* Unix connections between trees restored apart (links.c) */
#ifndef KUPDATE_LINKS_H
#define KUPDATE_LINKS_H

#include <stddef.h>
#include <sys/types.h>

#include "cr.h"

/* How long a made connection's other end waits for the restore that
 * takes it; then it is closed (that end's peer sees the connection end). */
#define LINK_HOLD_S 120

/* The ends of imgdir's links (cr_images_links) whose peers are in one of
 * peer_dirs, for cr_restore_opts.links: each taken from the restore that
 * made the connection first, or made here, its other end then held for
 * the peer's restore by a child of this process (its pid none of the two
 * trees' ids).  They meet in the rendezvous directory rdv.  A link whose
 * peer is in none of peer_dirs is refused, naming it.  0 or -errno, said;
 * on failure nothing is left. */
int links_gather(const char *imgdir, const char *const *peer_dirs, size_t npeers, const char *rdv,
		 struct cr_unix_link **out, size_t *nr);
/* the ends' fds closed (after the restore took its copies), *l freed */
void links_close(struct cr_unix_link **l, size_t *nr);

#endif
