/* Seeds for the fuzz targets (input format: fuzz_common.h).
 *   mkseed images IMGDIR OUTDIR NAME   two seeds from a real dump: NAME.raw
 *       (every file as written, page data left out above 64 KiB) and
 *       NAME.wrap (the records of every metadata image, no page data)
 *   mkseed manifest OUTDIR             a manifest of two units, raw and wrapped */
#include <dirent.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "crc32c.h"
#include "fuzz_common.h"

static int put_file(FILE *f, const char *name, const unsigned char *data, uint32_t len)
{
	uint8_t nl = strlen(name);

	return fwrite(&nl, 1, 1, f) == 1 && fwrite(name, 1, nl, f) == nl &&
			       fwrite(&len, 4, 1, f) == 1 && fwrite(data, 1, len, f) == len
		       ? 0
		       : -1;
}

static unsigned char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	unsigned char *b = NULL;
	long n;

	if (!f)
		return NULL;
	if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0) {
		b = malloc(n ? n : 1);
		if (b && fread(b, 1, n, f) != (size_t)n) {
			free(b);
			b = NULL;
		}
		*len = n;
	}
	fclose(f);
	return b;
}

static int images(const char *imgdir, const char *out, const char *name)
{
	char path[4096];
	FILE *raw, *wrap;
	DIR *d = opendir(imgdir);
	struct dirent *de;
	int ret = 0;
	unsigned char one = FZ_WRAP, zero = 0;

	if (!d)
		return perror(imgdir), 1;
	snprintf(path, sizeof(path), "%s/%s.raw", out, name);
	raw = fopen(path, "wb");
	snprintf(path, sizeof(path), "%s/%s.wrap", out, name);
	wrap = fopen(path, "wb");
	if (!raw || !wrap)
		return perror(path), 1;
	fwrite(&zero, 1, 1, raw);
	fwrite(&one, 1, 1, wrap);
	while ((de = readdir(d))) {
		size_t len;
		unsigned char *b;
		uint32_t kind;

		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", imgdir, de->d_name);
		b = slurp(path, &len);
		if (!b)
			return perror(path), 1;
		kind = fz_kind_of(de->d_name);
		if (kind || len <= 65536)
			ret |= put_file(raw, de->d_name, b, len);
		if (kind && len >= sizeof(struct img_header) + sizeof(struct img_trailer))
			ret |= put_file(wrap, de->d_name, b + sizeof(struct img_header),
					len - sizeof(struct img_header) -
						sizeof(struct img_trailer));
		free(b);
	}
	closedir(d);
	if (fclose(raw) | fclose(wrap) | ret)
		return fprintf(stderr, "mkseed: cannot write the seeds\n"), 1;
	return 0;
}

static int manifest(const char *out)
{
	CycleManifest m = CYCLE_MANIFEST__INIT;
	CycleUnit u[2] = { CYCLE_UNIT__INIT, CYCLE_UNIT__INIT }, *pu[2] = { &u[0], &u[1] };
	int32_t ids0[] = { 120, 121, 122 }, ids1[] = { 300 };
	struct img_header h = { IMG_MAGIC, CYCLE_KIND_MANIFEST, IMG_FORMAT_VERSION, sizeof(h), 0 };
	struct img_trailer t = { IMG_TRAILER_MARK, 1, 0, IMG_END_MAGIC };
	unsigned char *buf;
	size_t sz;
	uint32_t len;
	char path[4096];
	FILE *f;

	m.id = "20261203-060000-abcdef";
	m.format_version = 1;
	m.tool_version = "seed";
	m.old_kernel = "6.1.0-seed";
	m.old_boot_id = "00000000-0000-0000-0000-000000000000";
	m.created_ns = 1;
	m.kernel_path = "/boot/vmlinuz";
	m.cmdline = "console=ttyS0 kupdate.cycle=20261203-060000-abcdef";
	m.pid_reserve = "120-122,300";
	u[0].name = "demo-counter.service";
	u[0].imgdir = "units/demo-counter.service";
	u[0].main_pid = 120;
	u[0].n_ids = 3;
	u[0].ids = ids0;
	u[1].name = "redis-server.service";
	u[1].imgdir = "units/redis-server.service";
	u[1].main_pid = 300;
	u[1].n_ids = 1;
	u[1].ids = ids1;
	u[1].has_processes = 1;
	u[1].processes = 1;
	m.n_units = 2;
	m.units = pu;
	sz = cycle_manifest__get_packed_size(&m);
	len = sz;
	buf = malloc(sizeof(h) + 4 + sz + sizeof(t));
	if (!buf)
		return 1;
	memcpy(buf, &h, sizeof(h));
	memcpy(buf + sizeof(h), &len, 4);
	cycle_manifest__pack(&m, buf + sizeof(h) + 4);
	memcpy(buf + sizeof(h) + 4 + sz, &t, 8);
	t.crc = crc32c(0, buf, sizeof(h) + 4 + sz + 8);
	memcpy(buf + sizeof(h) + 4 + sz, &t, sizeof(t));

	snprintf(path, sizeof(path), "%s/manifest.raw", out);
	f = fopen(path, "wb");
	if (!f || fputc(0, f) == EOF || fwrite(buf, 1, sizeof(h) + 4 + sz + sizeof(t), f) == 0 ||
	    fclose(f))
		return perror(path), 1;
	snprintf(path, sizeof(path), "%s/manifest.wrap", out);
	f = fopen(path, "wb");
	if (!f || fputc(FZ_WRAP, f) == EOF || fwrite(buf + sizeof(h), 1, 4 + sz, f) == 0 ||
	    fclose(f))
		return perror(path), 1;
	free(buf);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 5 && !strcmp(argv[1], "images"))
		return images(argv[2], argv[3], argv[4]);
	if (argc == 3 && !strcmp(argv[1], "manifest"))
		return manifest(argv[2]);
	fprintf(stderr, "usage: mkseed images IMGDIR OUTDIR NAME | mkseed manifest OUTDIR\n");
	return 2;
}
