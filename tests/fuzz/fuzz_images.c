/* libFuzzer target: the image reader and everything a restore loads and
 * validates from an image directory before it creates a process
 * (cr_images_check), and the decoder of `kupdate show` (cr_show).
 * Input format: fuzz_common.h.  Files go to a private directory under
 * /dev/shm that the target empties before each input.
 * FUZZ_VERBOSE=1 shows the engine's error messages. */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cr.h"
#include "crc32c.h"
#include "fuzz_common.h"
#include "image.h"
#include "images/inventory.pb-c.h"
#include "log.h"

static char dir[64];
static int dirfd_ = -1;
static FILE *devnull;

static void cleanup(void)
{
	DIR *d;
	struct dirent *de;

	if (dirfd_ < 0)
		return;
	d = opendir(dir);
	while (d && (de = readdir(d)))
		if (de->d_name[0] != '.')
			unlinkat(dirfd_, de->d_name, 0);
	if (d)
		closedir(d);
	rmdir(dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	snprintf(dir, sizeof(dir), "/dev/shm/kupdate-fuzz.XXXXXX");
	if (!mkdtemp(dir)) {
		snprintf(dir, sizeof(dir), "/tmp/kupdate-fuzz.XXXXXX");
		if (!mkdtemp(dir))
			abort();
	}
	dirfd_ = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	devnull = fopen("/dev/null", "w");
	if (dirfd_ < 0 || !devnull)
		abort();
	cr_log_init("fuzz", CR_LOG_ERROR, -1);
	if (!getenv("FUZZ_VERBOSE"))
		cr_log_redirect(fileno(devnull), -1);
	atexit(cleanup);
	return 0;
}

static void empty_dir(void)
{
	DIR *d = opendir(dir);
	struct dirent *de;

	while (d && (de = readdir(d)))
		if (de->d_name[0] != '.')
			unlinkat(dirfd_, de->d_name, 0);
	if (d)
		closedir(d);
}

static int write_file(const char *name, const void *a, size_t alen, const void *b, size_t blen,
		      const void *c, size_t clen)
{
	int fd = openat(dirfd_, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	int ret = 0;

	if (fd < 0)
		return -1;
	if ((alen && write(fd, a, alen) != (ssize_t)alen) ||
	    (blen && write(fd, b, blen) != (ssize_t)blen) ||
	    (clen && write(fd, c, clen) != (ssize_t)clen))
		ret = -1;
	close(fd);
	return ret;
}

/* header + records + trailer with the right count and checksum */
static int write_wrapped(const char *name, uint32_t kind, const uint8_t *rec, size_t len)
{
	struct img_header h = { IMG_MAGIC, kind, IMG_FORMAT_VERSION, sizeof(h), 0 };
	struct img_trailer t = { IMG_TRAILER_MARK, 0, 0, IMG_END_MAGIC };
	size_t pos = 0;
	uint32_t crc;

	/* count the records the way the reader will; a bad length stays bad */
	while (len - pos >= 4) {
		uint32_t l;

		memcpy(&l, rec + pos, 4);
		if (l > len - pos - 4)
			break;
		pos += 4 + l;
		t.nr_records++;
	}
	crc = crc32c(0, &h, sizeof(h));
	crc = crc32c(crc, rec, len);
	t.crc = crc32c(crc, &t, 8);
	return write_file(name, &h, sizeof(h), rec, len, &t, sizeof(t));
}

/* The inventory of a wrapped input lists the files actually written. */
static void fix_inventory(void)
{
	struct img_reader r;
	ProtobufCMessage *m = NULL;
	InventoryEntry *e;
	InventoryFile *files = NULL, **pf = NULL;
	size_t n = 0;
	DIR *d;
	struct dirent *de;

	if (img_reader_open(&r, dirfd_, "inventory.img", IMG_INVENTORY))
		return;
	if (img_read(&r, &inventory_entry__descriptor, &m) <= 0) {
		img_reader_close(&r);
		return;
	}
	img_reader_close(&r);
	e = (InventoryEntry *)m;
	files = calloc(FZ_MAX_FILES, sizeof(*files));
	pf = calloc(FZ_MAX_FILES, sizeof(*pf));
	d = opendir(dir);
	while (files && pf && d && (de = readdir(d)) && n < FZ_MAX_FILES) {
		if (de->d_name[0] == '.' || !strcmp(de->d_name, "inventory.img"))
			continue;
		inventory_file__init(&files[n]);
		files[n].name = strdup(de->d_name);
		if (!files[n].name ||
		    img_fingerprint(dirfd_, files[n].name, &files[n].size, &files[n].crc)) {
			free(files[n].name);
			continue;
		}
		pf[n] = &files[n];
		n++;
	}
	if (d)
		closedir(d);
	if (files && pf) {
		size_t old_n = e->n_files;
		InventoryFile **old = e->files;
		struct img_writer w;

		e->n_files = n;
		e->files = pf;
		if (!img_writer_open(&w, dirfd_, "inventory.img", IMG_INVENTORY)) {
			img_write(&w, m);
			img_writer_close(&w);
		}
		e->n_files = old_n;
		e->files = old;
	}
	for (size_t i = 0; i < n; i++)
		free(files[i].name);
	free(files);
	free(pf);
	inventory_entry__free_unpacked(e, NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t pos = 1;
	unsigned flags, nfiles = 0;

	if (size < 1)
		return 0;
	flags = data[0];
	empty_dir();
	while (pos < size && nfiles < FZ_MAX_FILES) {
		char name[256];
		size_t nl = data[pos++];
		uint32_t len;
		bool ok = nl > 0;

		if (nl > size - pos || size - pos - nl < 4)
			break;
		memcpy(name, data + pos, nl);
		name[nl] = 0;
		pos += nl;
		for (size_t i = 0; i < nl && ok; i++)
			ok = (name[i] >= 'a' && name[i] <= 'z') ||
			     (name[i] >= '0' && name[i] <= '9') || name[i] == '-' ||
			     (name[i] == '.' && i > 0);
		memcpy(&len, data + pos, 4);
		pos += 4;
		if (len > size - pos)
			len = size - pos;
		if (ok) {
			uint32_t kind = fz_kind_of(name);

			if ((flags & FZ_WRAP) && kind)
				write_wrapped(name, kind, data + pos, len);
			else
				write_file(name, data + pos, len, NULL, 0, NULL, 0);
			nfiles++;
		}
		pos += len;
	}
	if (flags & FZ_WRAP)
		fix_inventory();
	cr_images_check(dir);
	cr_show(dir, false, devnull);
	cr_show(dir, true, devnull);
	return 0;
}
