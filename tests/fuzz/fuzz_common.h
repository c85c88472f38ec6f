/* Shared by the fuzz targets and the seed maker: the input format.
 *
 *   u8 flags            bit 0: wrap (see below)
 *   then up to FZ_MAX_FILES files, each
 *     u8  name length, that many bytes of name ([a-z0-9.-], not starting with '.')
 *     u32 length (little endian), that many bytes of content
 *
 * Without wrap a file's content is written as it is: the container checks
 * (magic, version, trailer, checksum, record lengths) are what gets fuzzed.
 * With wrap the content of a metadata image is only its records (u32 length,
 * protobuf bytes ...): the harness adds header, trailer and checksum for the
 * kind its name implies, and fixes the inventory's file list, so that the
 * fuzzer reaches the protobuf decoding and the validators behind them. */
#ifndef FUZZ_COMMON_H
#define FUZZ_COMMON_H

#include <stdint.h>
#include <string.h>

#include "cycle.h" /* the orchestrator's kinds: manifest.img */
#include "image.h"

#define FZ_WRAP	     1u
#define FZ_MAX_FILES 64

/* the kind of metadata image a file name implies; 0: raw data or unknown */
static inline uint32_t fz_kind_of(const char *name)
{
	static const struct {
		const char *prefix;
		uint32_t kind;
	} k[] = {
		{ "inventory.img", IMG_INVENTORY },
		{ "pstree.img", IMG_PSTREE },
		{ "core-", IMG_CORE },
		{ "mm-", IMG_MM },
		{ "pagemap-", IMG_PAGEMAP },
		{ "files.img", IMG_FILES },
		{ "fds-", IMG_FDS },
		{ "signals-", IMG_SIGNALS },
		{ "shmem.img", IMG_SHMEM },
		{ "pipes.img", IMG_PIPES },
		{ "timers-", IMG_TIMERS },
		{ "ghost-", IMG_GHOST },
		{ "manifest.img", CYCLE_KIND_MANIFEST },
	};

	for (size_t i = 0; i < sizeof(k) / sizeof(k[0]); i++)
		if (!strncmp(name, k[i].prefix, strlen(k[i].prefix)))
			return k[i].kind;
	return 0;
}

#endif
