/* Memory: mappings, mm fields, auxv, vDSO and page contents; this header
 * gathers those of its parts (each file's prototypes are in its own).
 *
 * Dump: the mappings come from smaps (VmFlags, Rss, Anonymous), files are
 * identified through map_files, the pages to save are those present or
 * swapped and not the zero page (for private file mappings: only the
 * copied-on-write ones), found with the PAGEMAP_SCAN ioctl where the kernel
 * has it and /proc/PID/pagemap otherwise.  Page data is copied with
 * process_vm_readv (/proc/PID/mem for mappings without PROT_READ, and for
 * processes that may share pages with others: pages_may_share) into
 * pages-PID.img, raw and page aligned, with a crc32c per run.  Pages a
 * child shares copy-on-write with its parent (the same frame at the same
 * address) are the parent's: the child's pagemap says so (cow_parent) and
 * holds no data for them.
 *
 * Restore: mem_load() reads the images (mm-load.c); mem_plan() turns them
 * into the restorer's list of mappings and page runs (plan.c;
 * restorer/restorer.c maps them), the layers of images below a dump made
 * with --prev giving the pages it left out (layers.c).  A mapping whose
 * pages a process shares with its parent or a child is premapped: made
 * and filled before the process forks its children (mem_premap, in the
 * process: premap.c), at an address of its own; a child that inherits it
 * clears what is not its parent's and writes its own pages; each restorer
 * then moves it into place (RST_VMA_PREMAP). */
#ifndef CR_MEMORY_H
#define CR_MEMORY_H

#include "mappings.h" /* dump: the mappings */
#include "mm-load.h"  /* restore: the images loaded */
#include "mm-write.h" /* dump: the mm and pagemap images */
#include "plan.h"     /* restore: the restorer's mappings and runs */
#include "premap.h"   /* restore: copy-on-write sharing */
#include "scan.h"     /* dump: the pages to save */

#endif
