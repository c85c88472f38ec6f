/* libFuzzer target: the cycle manifest parser (manifest_parse: container,
 * protobuf, manifest_validate).  Input: one flags byte (bit 0: wrap, as in
 * fuzz_common.h: the rest is the records, the harness adds header, trailer
 * and checksum), then the file. */
#include <stdio.h>
#include <stdlib.h>

#include "crc32c.h"
#include "cycle.h"
#include "fuzz_common.h"
#include "log.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	cr_log_init("fuzz", CR_LOG_ERROR, -1);
	if (!getenv("FUZZ_VERBOSE")) {
		FILE *n = fopen("/dev/null", "w");

		if (!n)
			abort();
		cr_log_redirect(fileno(n), -1);
	}
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct img_header h = { IMG_MAGIC, CYCLE_KIND_MANIFEST, IMG_FORMAT_VERSION, sizeof(h), 0 };
	struct img_trailer t = { IMG_TRAILER_MARK, 0, 0, IMG_END_MAGIC };
	CycleManifest *m = NULL;
	unsigned char *buf;
	size_t len;

	if (size < 1)
		return 0;
	data++;
	size--;
	if (data[-1] & FZ_WRAP) {
		size_t pos = 0;

		while (size - pos >= 4) {
			uint32_t l;

			memcpy(&l, data + pos, 4);
			if (l > size - pos - 4)
				break;
			pos += 4 + l;
			t.nr_records++;
		}
		len = sizeof(h) + size + sizeof(t);
		buf = malloc(len);
		if (!buf)
			return 0;
		memcpy(buf, &h, sizeof(h));
		memcpy(buf + sizeof(h), data, size);
		memcpy(buf + sizeof(h) + size, &t, 8);
		t.crc = crc32c(0, buf, sizeof(h) + size + 8);
		memcpy(buf + sizeof(h) + size, &t, sizeof(t));
	} else {
		len = size;
		buf = malloc(len ? len : 1);
		if (!buf)
			return 0;
		memcpy(buf, data, size);
	}
	if (manifest_parse(buf, len, &m) == 0)
		cycle_manifest__free_unpacked(m, NULL);
	free(buf);
	return 0;
}
