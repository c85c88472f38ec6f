#ifndef CR_PSTREE_H
#define CR_PSTREE_H

#include <stddef.h>

#include "images/pstree.pb-c.h"

/* Check pstree.img entries (parents first, unique ids, valid states). */
int pstree_validate(PstreeEntry **e, size_t n);

#endif
