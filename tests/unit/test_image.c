/* Unit tests: crc32c, the image container (writer, reader, and the
 * reader's refusal of every truncation and bit flip), /proc parsers. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "crc32c.h"
#include "image.h"
#include "images/pstree.pb-c.h"
#include "log.h"
#include "proc.h"

static char tmpdir[64];

static void test_crc_vector(void **state)
{
	(void)state;
	assert_int_equal(crc32c(0, "123456789", 9), 0xe3069283);
	assert_int_equal(crc32c_soft(0, "123456789", 9), 0xe3069283);
	assert_int_equal(crc32c(0, "", 0), 0);
}

static void test_crc_hw_matches_soft(void **state)
{
	size_t sizes[] = { 1, 7, 8, 63, 4095, 4096, 12287, 12288, 12289, 40000, 100003 };
	unsigned char *buf = malloc(100010);

	(void)state;
	for (size_t i = 0; i < 100010; i++)
		buf[i] = (unsigned char)(i * 131 + (i >> 7));
	for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++)
		for (size_t align = 0; align < 8; align += 3) {
			uint32_t a = crc32c(0, buf + align, sizes[s]);
			uint32_t b = crc32c_soft(0, buf + align, sizes[s]);
			assert_int_equal(a, b);
			/* continuation over a split equals the whole */
			assert_int_equal(crc32c(crc32c(0, buf + align, sizes[s] / 3),
						buf + align + sizes[s] / 3,
						sizes[s] - sizes[s] / 3),
					 a);
		}
	assert_int_equal(crc32c(0, "123456789", 9), 0xe3069283);
	free(buf);
}

static int write_sample(int dirfd, const char *name)
{
	struct img_writer w;
	int32_t tids[3] = { 100, 101, 102 };

	assert_int_equal(img_writer_open(&w, dirfd, name, IMG_PSTREE), 0);
	for (int i = 0; i < 3; i++) {
		PstreeEntry e = PSTREE_ENTRY__INIT;

		e.pid = 100 + i * 10;
		e.ppid = i ? 100 : 0;
		e.pgid = 100;
		e.sid = 100;
		e.n_tids = i + 1;
		e.tids = tids;
		e.state = TASK_STATE__TASK_ALIVE;
		assert_int_equal(img_write(&w, &e.base), 0);
	}
	return img_writer_close(&w);
}

static unsigned char *load(int dirfd, const char *name, size_t *len)
{
	int fd = openat(dirfd, name, O_RDONLY);
	struct stat st;
	unsigned char *b;

	assert_true(fd >= 0);
	fstat(fd, &st);
	b = malloc(st.st_size);
	assert_int_equal(read(fd, b, st.st_size), st.st_size);
	close(fd);
	*len = st.st_size;
	return b;
}

static int read_all_records(unsigned char *data, size_t len, int *count)
{
	struct img_reader r;
	ProtobufCMessage *m;
	unsigned char *copy = malloc(len ? len : 1);
	int ret;

	memcpy(copy, data, len);
	ret = img_reader_from_buffer(&r, "test.img", IMG_PSTREE, copy, len);
	*count = 0;
	if (ret) {
		free(copy);
		return ret;
	}
	while ((ret = img_read(&r, &pstree_entry__descriptor, &m)) > 0) {
		(*count)++;
		protobuf_c_message_free_unpacked(m, NULL);
	}
	img_reader_close(&r);
	return ret;
}

static void test_roundtrip(void **state)
{
	int dirfd = open(tmpdir, O_RDONLY | O_DIRECTORY);
	struct img_reader r;
	ProtobufCMessage *m;
	int n = 0;

	(void)state;
	assert_int_equal(write_sample(dirfd, "rt.img"), 0);
	assert_int_equal(img_reader_open(&r, dirfd, "rt.img", IMG_PSTREE), 0);
	assert_int_equal(r.nr, 3);
	while (img_read(&r, &pstree_entry__descriptor, &m) > 0) {
		PstreeEntry *e = (PstreeEntry *)m;

		assert_int_equal(e->pid, 100 + n * 10);
		assert_int_equal(e->n_tids, (size_t)n + 1);
		protobuf_c_message_free_unpacked(m, NULL);
		n++;
	}
	assert_int_equal(n, 3);
	img_reader_close(&r);
	/* the wrong kind is refused */
	assert_int_not_equal(img_reader_open(&r, dirfd, "rt.img", IMG_MM), 0);
	close(dirfd);
}

static void test_every_truncation_refused(void **state)
{
	int dirfd = open(tmpdir, O_RDONLY | O_DIRECTORY);
	size_t len;
	unsigned char *b;
	int count;

	(void)state;
	write_sample(dirfd, "tr.img");
	b = load(dirfd, "tr.img", &len);
	assert_int_equal(read_all_records(b, len, &count), 0);
	assert_int_equal(count, 3);
	for (size_t l = 0; l < len; l++)
		assert_int_not_equal(read_all_records(b, l, &count), 0);
	free(b);
	close(dirfd);
}

static void test_every_bit_flip_refused(void **state)
{
	int dirfd = open(tmpdir, O_RDONLY | O_DIRECTORY);
	size_t len;
	unsigned char *b;
	int count;

	(void)state;
	write_sample(dirfd, "fl.img");
	b = load(dirfd, "fl.img", &len);
	for (size_t i = 0; i < len; i++)
		for (int bit = 0; bit < 8; bit++) {
			b[i] ^= 1 << bit;
			assert_int_not_equal(read_all_records(b, len, &count), 0);
			b[i] ^= 1 << bit;
		}
	free(b);
	close(dirfd);
}

static void test_wrong_version_refused(void **state)
{
	int dirfd = open(tmpdir, O_RDONLY | O_DIRECTORY);
	size_t len;
	unsigned char *b;
	struct img_header h;
	int count;

	(void)state;
	write_sample(dirfd, "ver.img");
	b = load(dirfd, "ver.img", &len);
	memcpy(&h, b, sizeof(h));
	h.version = IMG_FORMAT_VERSION + 1;
	memcpy(b, &h, sizeof(h));
	assert_int_equal(read_all_records(b, len, &count), -EPROTO);
	free(b);
	close(dirfd);
}

static void test_proc_parsers(void **state)
{
	struct proc_stat st;
	struct smaps_vma *v;
	int n, stack = 0;

	(void)state;
	assert_int_equal(parse_stat(getpid(), 0, &st), 0);
	assert_int_equal(st.pid, getpid());
	assert_int_equal(st.ppid, getppid());
	assert_true(st.start_code > 0 && st.start_code < st.end_code);
	assert_int_equal(parse_smaps(getpid(), &v, &n), 0);
	assert_true(n > 5);
	for (int i = 0; i < n; i++) {
		assert_true(v[i].start < v[i].end);
		if (!strcmp(v[i].path, "[stack]")) {
			stack = 1;
			assert_true(v[i].rss_kb > 0);
		}
	}
	assert_true(stack);
	free_smaps(v, n);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_crc_vector),
		cmocka_unit_test(test_crc_hw_matches_soft),
		cmocka_unit_test(test_roundtrip),
		cmocka_unit_test(test_every_truncation_refused),
		cmocka_unit_test(test_every_bit_flip_refused),
		cmocka_unit_test(test_wrong_version_refused),
		cmocka_unit_test(test_proc_parsers),
	};
	int ret;

	snprintf(tmpdir, sizeof(tmpdir), "/tmp/kupdate-unit.XXXXXX");
	if (!mkdtemp(tmpdir))
		return 1;
	/* the refusals are expected; keep their messages out of the TAP */
	cr_log_init("unit", -1, -1);
	ret = cmocka_run_group_tests(tests, NULL, NULL);
	{
		char cmd[128];
		snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
		if (system(cmd))
			ret = 1;
	}
	return ret;
}
