/* Unit tests of kimage.c (kupdate check VMLINUZ|CONFIG): config files plain
 * and gzipped, a vmlinux-like ELF blob with the IKCONFIG markers, bzImages
 * built here with gzip, xz and zstd payloads, damaged and foreign inputs,
 * and kconfig_get. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <lzma.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include "kimage.h"
#include "log.h"

static char tmpdir[64];

static const char config[] = "#\n"
			     "# Automatically generated file; DO NOT EDIT.\n"
			     "# Linux/x86 6.12.57 Kernel Configuration\n"
			     "#\n"
			     "CONFIG_LOCALVERSION=\"-kupdate\"\n"
			     "CONFIG_CHECKPOINT_RESTORE=y\n"
			     "CONFIG_KEXEC_FILE=y\n"
			     "# CONFIG_MEM_SOFT_DIRTY is not set\n"
			     "CONFIG_NF_TABLES=m\n"
			     "CONFIG_NR_CPUS=64\n";

struct blob {
	unsigned char *p;
	size_t len;
};

static void add(struct blob *b, const void *p, size_t n)
{
	b->p = realloc(b->p, b->len + n);
	assert_non_null(b->p);
	memcpy(b->p + b->len, p, n);
	b->len += n;
}

static struct blob gzip_of(const void *p, size_t n)
{
	struct blob b = { malloc(compressBound(n) + 64), 0 };
	z_stream z = { 0 };

	assert_int_equal(deflateInit2(&z, 9, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY),
			 Z_OK);
	z.next_in = (unsigned char *)p;
	z.avail_in = n;
	z.next_out = b.p;
	z.avail_out = compressBound(n) + 64;
	assert_int_equal(deflate(&z, Z_FINISH), Z_STREAM_END);
	b.len = z.total_out;
	deflateEnd(&z);
	return b;
}

static struct blob xz_of(const void *p, size_t n)
{
	struct blob b = { malloc(lzma_stream_buffer_bound(n)), 0 };

	assert_int_equal(lzma_easy_buffer_encode(6, LZMA_CHECK_CRC32, NULL, p, n, b.p, &b.len,
						 lzma_stream_buffer_bound(n)),
			 LZMA_OK);
	return b;
}

static struct blob zstd_of(const void *p, size_t n)
{
	struct blob b = { malloc(ZSTD_compressBound(n)), 0 };

	b.len = ZSTD_compress(b.p, ZSTD_compressBound(n), p, n, 3);
	assert_false(ZSTD_isError(b.len));
	return b;
}

/* a vmlinux stand-in: an ELF header, code, the gzipped config between the
 * IKCONFIG markers, and (patch) the pid_reserve= boot parameter's name */
static struct blob vmlinux(bool ikconfig, bool patch)
{
	struct blob b = { 0 };
	unsigned char junk[3000];

	for (size_t i = 0; i < sizeof(junk); i++)
		junk[i] = (i * 7919) >> 3;
	add(&b,
	    "\x7f"
	    "ELF\x02\x01\x01",
	    7);
	add(&b, junk, sizeof(junk));
	if (ikconfig) {
		struct blob g = gzip_of(config, strlen(config));

		add(&b, "IKCFG_ST", 8);
		add(&b, g.p, g.len);
		add(&b, "IKCFG_ED", 8);
		free(g.p);
	}
	add(&b, junk, 100);
	if (patch)
		add(&b, "pid_reserve=", 13); /* with its NUL, as __setup stores it */
	add(&b, junk, 100);
	return b;
}

/* a bzImage: setup sectors with the boot protocol header, then the
 * compressed kernel at payload_offset */
static struct blob bzimage(struct blob payload, uint16_t proto, bool damaged)
{
	const unsigned setup_sects = 3;
	size_t start = (setup_sects + 1) * 512;
	struct blob b = { calloc(1, start), start };
	const char ver[] = "6.12.57-kupdate (builder@host) #1 SMP";
	uint16_t kv = 0x300 - 0x200;
	uint32_t poff = 64, plen = payload.len + (damaged ? 100000 : 0);
	unsigned char pad[64] = { 0 };

	b.p[0x1f1] = setup_sects;
	memcpy(b.p + 0x202, "HdrS", 4);
	memcpy(b.p + 0x206, &proto, 2);
	memcpy(b.p + 0x20e, &kv, 2);
	memcpy(b.p + 0x300, ver, sizeof(ver));
	memcpy(b.p + 0x248, &poff, 4);
	memcpy(b.p + 0x24c, &plen, 4);
	add(&b, pad, sizeof(pad));
	add(&b, payload.p, payload.len);
	add(&b, pad, 16);
	return b;
}

static char *write_tmp(const char *name, const void *p, size_t n)
{
	char *path;
	int fd;

	assert_true(asprintf(&path, "%s/%s", tmpdir, name) > 0);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, p, n), (ssize_t)n);
	close(fd);
	return path;
}

static void test_config_plain(void **state)
{
	struct kimage_info ki;
	char *path = write_tmp("config", config, strlen(config));

	(void)state;
	assert_int_equal(kimage_read(path, &ki), 0);
	assert_string_equal(ki.kind, "config");
	assert_string_equal(ki.config_source, "file");
	assert_non_null(ki.config);
	assert_string_equal(ki.release, "6.12.57-kupdate");
	assert_int_equal(ki.major, 6);
	assert_int_equal(ki.minor, 12);
	assert_int_equal(ki.pid_reserve, -1);
	kimage_free(&ki);
	free(path);
}

static void test_config_gzip(void **state)
{
	struct kimage_info ki;
	struct blob g = gzip_of(config, strlen(config));
	char *path = write_tmp("config.gz", g.p, g.len);

	(void)state;
	assert_int_equal(kimage_read(path, &ki), 0);
	assert_string_equal(ki.kind, "config");
	assert_string_equal(ki.compression, "gzip");
	assert_non_null(strstr(ki.config, "CONFIG_KEXEC_FILE=y"));
	kimage_free(&ki);
	free(path);
	free(g.p);
}

static void test_vmlinux(void **state)
{
	struct kimage_info ki;
	struct blob v = vmlinux(true, true);
	char *path = write_tmp("vmlinux", v.p, v.len);
	char buf[32];

	(void)state;
	assert_int_equal(kimage_read(path, &ki), 0);
	assert_string_equal(ki.kind, "vmlinux");
	assert_string_equal(ki.config_source, "IKCONFIG");
	assert_int_equal(ki.pid_reserve, 1);
	assert_string_equal(kconfig_get(ki.config, "CONFIG_CHECKPOINT_RESTORE", buf, sizeof(buf)),
			    "y");
	/* the release comes from the config's header when the image has none */
	assert_string_equal(ki.release, "6.12.57-kupdate");
	kimage_free(&ki);
	free(path);
	free(v.p);
}

static void test_vmlinux_no_ikconfig(void **state)
{
	struct kimage_info ki;
	struct blob v = vmlinux(false, false);
	char *path = write_tmp("vmlinux-bare", v.p, v.len);

	(void)state;
	assert_int_equal(kimage_read(path, &ki), 0);
	assert_null(ki.config);
	assert_int_equal(ki.pid_reserve, 0);
	assert_non_null(strstr(ki.why, "CONFIG_IKCONFIG"));
	kimage_free(&ki);
	free(path);
	free(v.p);
}

static void bz_case(const char *name, struct blob (*comp)(const void *, size_t), const char *how)
{
	struct kimage_info ki;
	struct blob v = vmlinux(true, strcmp(how, "xz") != 0);
	struct blob c = comp(v.p, v.len);
	struct blob bz = bzimage(c, 0x20f, false);
	char *path = write_tmp(name, bz.p, bz.len);
	char buf[32];

	assert_int_equal(kimage_read(path, &ki), 0);
	assert_string_equal(ki.kind, "bzImage");
	assert_string_equal(ki.compression, how);
	assert_string_equal(ki.release, "6.12.57-kupdate");
	assert_int_equal(ki.major, 6);
	assert_int_equal(ki.minor, 12);
	assert_non_null(ki.config);
	assert_string_equal(ki.config_source, "IKCONFIG");
	assert_int_equal(ki.pid_reserve, strcmp(how, "xz") != 0);
	assert_string_equal(kconfig_get(ki.config, "CONFIG_NF_TABLES", buf, sizeof(buf)), "m");
	assert_null(kconfig_get(ki.config, "CONFIG_MEM_SOFT_DIRTY", buf, sizeof(buf)));
	kimage_free(&ki);
	free(path);
	free(v.p);
	free(c.p);
	free(bz.p);
}

static void test_bzimage_gzip(void **state)
{
	(void)state;
	bz_case("bz-gzip", gzip_of, "gzip");
}

static void test_bzimage_xz(void **state)
{
	(void)state;
	bz_case("bz-xz", xz_of, "xz");
}

static void test_bzimage_zstd(void **state)
{
	(void)state;
	bz_case("bz-zstd", zstd_of, "zstd");
}

/* kupdate loads the decompressors when an image needs one: without the
 * library, the image's configuration is unknown, and why says which library
 * to install.  Runs first: a library once loaded stays loaded. */
static void test_bzimage_nolib(void **state)
{
	struct kimage_info ki;
	struct blob v = vmlinux(true, true);
	struct blob c = zstd_of(v.p, v.len);
	struct blob bz = bzimage(c, 0x20f, false);
	char *path = write_tmp("bz-nolib", bz.p, bz.len);

	(void)state;
	setenv("KUPDATE_LIBZSTD", "/nonexistent/libzstd.so.1", 1);
	assert_int_equal(kimage_read(path, &ki), 0);
	unsetenv("KUPDATE_LIBZSTD");
	assert_string_equal(ki.kind, "bzImage");
	assert_string_equal(ki.compression, "zstd");
	assert_string_equal(ki.release, "6.12.57-kupdate");
	assert_null(ki.config);
	assert_non_null(strstr(ki.why, "cannot load libzstd.so.1 (libzstd1)"));
	kimage_free(&ki);
	/* with it, the same image reads */
	assert_int_equal(kimage_read(path, &ki), 0);
	assert_non_null(ki.config);
	kimage_free(&ki);
	free(path);
	free(v.p);
	free(c.p);
	free(bz.p);
}

static void test_bzimage_damaged(void **state)
{
	struct kimage_info ki;
	struct blob v = vmlinux(true, true);
	struct blob c = gzip_of(v.p, v.len);
	struct blob bz = bzimage(c, 0x20f, true);
	struct blob old = bzimage(c, 0x206, false);
	char *path = write_tmp("bz-damaged", bz.p, bz.len);
	char *opath = write_tmp("bz-old", old.p, old.len);

	(void)state;
	/* a payload past the end of the file: read, but no config, and why */
	assert_int_equal(kimage_read(path, &ki), 0);
	assert_null(ki.config);
	assert_non_null(strstr(ki.why, "damaged"));
	assert_string_equal(ki.release, "6.12.57-kupdate");
	kimage_free(&ki);
	/* a corrupted payload: the decompressor's error, no crash */
	memset(bz.p + 4 * 512 + 64 + 20, 0xa5, 200);
	memcpy(bz.p + 0x24c, &c.len, 4);
	free(path);
	path = write_tmp("bz-corrupt", bz.p, bz.len);
	assert_int_equal(kimage_read(path, &ki), 0);
	assert_null(ki.config);
	assert_non_null(strstr(ki.why, "decompress"));
	kimage_free(&ki);
	/* boot protocol 2.06 has no payload fields */
	assert_int_equal(kimage_read(opath, &ki), 0);
	assert_null(ki.config);
	assert_non_null(strstr(ki.why, "too old"));
	kimage_free(&ki);
	free(path);
	free(opath);
	free(v.p);
	free(c.p);
	free(bz.p);
	free(old.p);
}

static void test_foreign(void **state)
{
	struct kimage_info ki;
	static const char text[] = "just some text\nwith lines\n";
	unsigned char bin[512];
	char *p1 = write_tmp("text", text, strlen(text));
	char *p2, *p3 = write_tmp("empty", "", 0);
	struct blob g = gzip_of(text, strlen(text));
	char *p4 = write_tmp("text.gz", g.p, g.len);

	(void)state;
	for (size_t i = 0; i < sizeof(bin); i++)
		bin[i] = i * 31 + 1;
	p2 = write_tmp("bin", bin, sizeof(bin));
	assert_int_equal(kimage_read(p1, &ki), -EINVAL);
	assert_int_equal(kimage_read(p2, &ki), -EINVAL);
	assert_true(kimage_read(p3, &ki) < 0);
	assert_int_equal(kimage_read(p4, &ki), -EINVAL);
	assert_int_equal(kimage_read(tmpdir, &ki), -EINVAL); /* a directory */
	assert_int_equal(kimage_read("/nonexistent/kupdate", &ki), -ENOENT);
	free(p1);
	free(p2);
	free(p3);
	free(p4);
	free(g.p);
}

static void test_kconfig_get(void **state)
{
	char buf[16];

	(void)state;
	assert_string_equal(kconfig_get(config, "CONFIG_NR_CPUS", buf, sizeof(buf)), "64");
	assert_string_equal(kconfig_get(config, "CONFIG_LOCALVERSION", buf, sizeof(buf)),
			    "\"-kupdate\"");
	/* a prefix of another option is not that option */
	assert_null(kconfig_get(config, "CONFIG_NR", buf, sizeof(buf)));
	assert_null(kconfig_get(config, "CONFIG_MEM_SOFT_DIRTY", buf, sizeof(buf)));
	assert_null(kconfig_get(config, "CONFIG_ABSENT", buf, sizeof(buf)));
	/* truncated to the buffer */
	assert_string_equal(kconfig_get(config, "CONFIG_LOCALVERSION", buf, 4), "\"-k");
	assert_null(kconfig_get("", "CONFIG_X", buf, sizeof(buf)));
}

static int setup(void **state)
{
	(void)state;
	strcpy(tmpdir, "/tmp/kupdate-kimage-XXXXXX");
	if (!mkdtemp(tmpdir))
		return -1;
	cr_log_init("test_kimage", CR_LOG_ERROR, -1);
	return 0;
}

static int teardown(void **state)
{
	char cmd[128];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
	return system(cmd) ? -1 : 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bzimage_nolib),	    cmocka_unit_test(test_config_plain),
		cmocka_unit_test(test_config_gzip),	    cmocka_unit_test(test_vmlinux),
		cmocka_unit_test(test_vmlinux_no_ikconfig), cmocka_unit_test(test_bzimage_gzip),
		cmocka_unit_test(test_bzimage_xz),	    cmocka_unit_test(test_bzimage_zstd),
		cmocka_unit_test(test_bzimage_damaged),	    cmocka_unit_test(test_foreign),
		cmocka_unit_test(test_kconfig_get),
	};

	return cmocka_run_group_tests_name("kimage", tests, setup, teardown);
}
