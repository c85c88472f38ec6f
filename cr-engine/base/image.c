#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>

#include "cr-msgfile.h"
#include "crc32c.h"
#include "fault.h"
#include "image.h"
#include "images/cgroup.pb-c.h"
#include "images/core.pb-c.h"
#include "images/files.pb-c.h"
#include "images/ghost.pb-c.h"
#include "images/inventory.pb-c.h"
#include "images/mm.pb-c.h"
#include "images/namespaces.pb-c.h"
#include "images/pagemap.pb-c.h"
#include "images/pipes.pb-c.h"
#include "images/pstree.pb-c.h"
#include "images/shmem.pb-c.h"
#include "images/signals.pb-c.h"
#include "images/timers.pb-c.h"
#include "images/tmpdir.pb-c.h"
#include "log.h"
#include "util.h"

/* Every kind of image: its name in messages, and the messages its file
 * holds (the first record, then the others; none for raw page data), which
 * `kupdate show` decodes.  A new kind is one row here and its number in
 * image.h. */
static const struct img_kind_info {
	const char *name;
	const ProtobufCMessageDescriptor *first, *rest;
} kinds[IMG_KIND_MAX] = {
	[IMG_INVENTORY] = { "inventory", &inventory_entry__descriptor,
			    &inventory_entry__descriptor },
	[IMG_PSTREE] = { "pstree", &pstree_entry__descriptor, &pstree_entry__descriptor },
	[IMG_CORE] = { "core", &task_core__descriptor, &thread_core__descriptor },
	[IMG_MM] = { "mm", &mm_core__descriptor, &vma_entry__descriptor },
	[IMG_PAGEMAP] = { "pagemap", &pagemap_head__descriptor, &pagemap_entry__descriptor },
	[IMG_FILES] = { "files", &file_entry__descriptor, &file_entry__descriptor },
	[IMG_FDS] = { "fds", &fd_entry__descriptor, &fd_entry__descriptor },
	[IMG_PAGES] = { "pages", NULL, NULL },
	[IMG_SIGNALS] = { "signals", &signals_core__descriptor, &sigaction_entry__descriptor },
	[IMG_SHMEM] = { "shmem", &shmem_entry__descriptor, &shmem_entry__descriptor },
	[IMG_SHMEM_PAGES] = { "shmem pages", NULL, NULL },
	[IMG_PIPES] = { "pipes", &pipe_entry__descriptor, &pipe_entry__descriptor },
	[IMG_TIMERS] = { "timers", &timers_core__descriptor, &posix_timer__descriptor },
	[IMG_GHOST] = { "ghost file", &ghost_entry__descriptor, &ghost_chunk__descriptor },
	[IMG_NS] = { "namespaces", &ns_entry__descriptor, &ns_entry__descriptor },
	[IMG_TMPDIR] = { "saved directory", &tmpdir_entry__descriptor, &tmpdir_node__descriptor },
	[IMG_CGROUP] = { "control groups", &cgroup_entry__descriptor, &cgroup_entry__descriptor },
};

const char *img_kind_name(uint32_t kind)
{
	if (kind == 0 || kind >= IMG_KIND_MAX || !kinds[kind].name)
		return "unknown";
	return kinds[kind].name;
}

int img_kind_messages(uint32_t kind, const ProtobufCMessageDescriptor **first,
		      const ProtobufCMessageDescriptor **rest)
{
	if (kind == 0 || kind >= IMG_KIND_MAX || !kinds[kind].first)
		return -EINVAL;
	*first = kinds[kind].first;
	*rest = kinds[kind].rest;
	return 0;
}

static int wbuf_reserve(struct img_writer *w, size_t more)
{
	size_t need = w->len + more, cap = w->cap ? w->cap : 4096;
	unsigned char *nb;

	if (need <= w->cap)
		return 0;
	while (cap < need)
		cap *= 2;
	nb = realloc(w->buf, cap);
	if (!nb) {
		pr_err("image %s: out of memory (%zu bytes)", w->name, cap);
		return -ENOMEM;
	}
	w->buf = nb;
	w->cap = cap;
	return 0;
}

int img_writer_open(struct img_writer *w, int dirfd, const char *name, enum img_kind kind)
{
	struct img_header h = { IMG_MAGIC, kind, IMG_FORMAT_VERSION, sizeof(h), 0 };

	memset(w, 0, sizeof(*w));
	w->dirfd = dirfd;
	snprintf(w->name, sizeof(w->name), "%s", name);
	snprintf(w->tmpname, sizeof(w->tmpname), ".%s.tmp", name);
	if (wbuf_reserve(w, sizeof(h)))
		return -ENOMEM;
	memcpy(w->buf, &h, sizeof(h));
	w->len = sizeof(h);
	return 0;
}

int img_write(struct img_writer *w, const ProtobufCMessage *msg)
{
	size_t sz = protobuf_c_message_get_packed_size(msg);
	uint32_t len = sz;

	if (w->error)
		return w->error;
	if (sz > IMG_MAX_RECORD) {
		pr_err("image %s: record of %zu bytes exceeds the %u byte limit", w->name, sz,
		       IMG_MAX_RECORD);
		return w->error = -E2BIG;
	}
	if (wbuf_reserve(w, 4 + sz))
		return w->error = -ENOMEM;
	memcpy(w->buf + w->len, &len, 4);
	protobuf_c_message_pack(msg, w->buf + w->len + 4);
	w->len += 4 + sz;
	w->nr++;
	return 0;
}

void img_writer_abort(struct img_writer *w)
{
	free(w->buf);
	w->buf = NULL;
}

int img_writer_close(struct img_writer *w)
{
	struct img_trailer t = { IMG_TRAILER_MARK, w->nr, 0, IMG_END_MAGIC };
	int fd, ret;

	if (w->error) {
		img_writer_abort(w);
		return w->error;
	}
	if (cr_fault("image-write")) {
		pr_err("cannot write image %s: %s (image-write fault injected by KUPDATE_FAULT)",
		       w->name, strerror(EIO));
		img_writer_abort(w);
		return -EIO;
	}
	if (wbuf_reserve(w, sizeof(t))) {
		img_writer_abort(w);
		return -ENOMEM;
	}
	memcpy(w->buf + w->len, &t, 8);
	t.crc = crc32c(0, w->buf, w->len + 8);
	memcpy(w->buf + w->len, &t, sizeof(t));
	w->len += sizeof(t);

	fd = openat(w->dirfd, w->tmpname, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0) {
		ret = pr_errno("cannot create image %s", w->name);
		img_writer_abort(w);
		return ret;
	}
	ret = write_all(fd, w->buf, w->len);
	if (ret)
		pr_err("cannot write image %s: %s", w->name, strerror(-ret));
	if (close(fd) && !ret)
		ret = pr_errno("cannot write image %s", w->name);
	if (!ret && renameat(w->dirfd, w->tmpname, w->dirfd, w->name))
		ret = pr_errno("cannot rename image %s into place", w->name);
	if (ret)
		unlinkat(w->dirfd, w->tmpname, 0);
	img_writer_abort(w);
	return ret;
}

int img_reader_from_buffer(struct img_reader *r, const char *name, enum img_kind kind,
			   unsigned char *data, size_t size)
{
	struct img_header h;
	struct img_trailer t;
	size_t pos;
	uint32_t n = 0;

	memset(r, 0, sizeof(*r));
	snprintf(r->name, sizeof(r->name), "%s", name);
	r->data = data;
	r->size = size;

	if (size < sizeof(h) + sizeof(t)) {
		pr_err("image %s is damaged: truncated (%zu bytes)", name, size);
		return -EINVAL;
	}
	memcpy(&h, data, sizeof(h));
	if (h.magic != IMG_MAGIC) {
		pr_err("image %s is not a kupdate image (bad magic %08x)", name, h.magic);
		return -EINVAL;
	}
	if (h.version != IMG_FORMAT_VERSION) {
		pr_err("image %s has format version %u, this kupdate reads version %u", name,
		       h.version, IMG_FORMAT_VERSION);
		return -EPROTO;
	}
	if (h.kind != (uint32_t)kind) {
		pr_err("image %s holds %s data where %s was expected", name, img_kind_name(h.kind),
		       img_kind_name(kind));
		return -EINVAL;
	}
	if (h.hdr_size != sizeof(h)) {
		pr_err("image %s is damaged: header size %u", name, h.hdr_size);
		return -EINVAL;
	}
	memcpy(&t, data + size - sizeof(t), sizeof(t));
	if (t.mark != IMG_TRAILER_MARK || t.end != IMG_END_MAGIC) {
		pr_err("image %s is damaged: truncated or missing its trailer", name);
		return -EINVAL;
	}
	if (crc32c(0, data, size - 8) != t.crc) {
		pr_err("image %s is damaged: checksum mismatch", name);
		return -EBADMSG;
	}
	r->end = size - sizeof(t);
	for (pos = sizeof(h); pos < r->end; n++) {
		uint32_t len;

		if (r->end - pos < 4) {
			pr_err("image %s is damaged: record %u header cut short", name, n);
			return -EINVAL;
		}
		memcpy(&len, data + pos, 4);
		if (len > IMG_MAX_RECORD || len > r->end - pos - 4) {
			pr_err("image %s is damaged: record %u length %u exceeds the file", name, n,
			       len);
			return -EINVAL;
		}
		pos += 4 + len;
	}
	if (n != t.nr_records) {
		pr_err("image %s is damaged: %u records found, trailer says %u", name, n,
		       t.nr_records);
		return -EINVAL;
	}
	r->nr = n;
	r->kind = kind;
	r->pos = sizeof(h);
	return 0;
}

int img_reader_open(struct img_reader *r, int dirfd, const char *name, enum img_kind kind)
{
	_cleanup_close_ int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC);
	struct stat st;
	unsigned char *data;
	int ret;

	memset(r, 0, sizeof(*r));
	if (fd < 0)
		return pr_errno("cannot open image %s", name);
	if (fstat(fd, &st))
		return pr_errno("cannot stat image %s", name);
	if (!S_ISREG(st.st_mode) || st.st_size > IMG_MAX_FILE) {
		pr_err("image %s is not a regular file of at most %u bytes", name, IMG_MAX_FILE);
		return -EINVAL;
	}
	data = malloc(st.st_size ? st.st_size : 1);
	if (!data) {
		pr_err("image %s: out of memory", name);
		return -ENOMEM;
	}
	ret = read_all(fd, data, st.st_size);
	if (ret) {
		pr_err("cannot read image %s: %s", name, strerror(-ret));
		free(data);
		return ret;
	}
	ret = img_reader_from_buffer(r, name, kind, data, st.st_size);
	if (ret) {
		free(data);
		r->data = NULL;
	}
	return ret;
}

int img_read_first(struct img_reader *r, const ProtobufCMessageDescriptor *desc,
		   ProtobufCMessage **out)
{
	int ret = img_read(r, desc, out);

	if (ret == 0) {
		pr_err("image %s is damaged: it is empty", r->name);
		return -EINVAL;
	}
	return ret < 0 ? ret : 0;
}

int img_read(struct img_reader *r, const ProtobufCMessageDescriptor *desc, ProtobufCMessage **out)
{
	uint32_t len;
	ProtobufCMessage *m;

	if (r->pos >= r->end)
		return 0;
	memcpy(&len, r->data + r->pos, 4); /* bounds checked at open */
	m = protobuf_c_message_unpack(desc, NULL, len, r->data + r->pos + 4);
	if (!m) {
		pr_err("image %s is damaged: record %u is not a valid %s message", r->name, r->idx,
		       desc->name);
		return -EBADMSG;
	}
	r->pos += 4 + len;
	r->idx++;
	*out = m;
	return 1;
}

void img_reader_close(struct img_reader *r)
{
	free(r->data);
	r->data = NULL;
}

int img_fingerprint(int dirfd, const char *name, uint64_t *size, uint32_t *crc)
{
	_cleanup_close_ int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	unsigned char buf[PAGES_DATA_OFFSET];
	struct img_trailer t;
	struct img_header h;
	struct stat st;
	ssize_t n;
	uint32_t c;

	if (fd < 0) {
		int ret = -errno;

		pr_perror("cannot open image %s", name);
		return ret;
	}
	if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
		pr_err("image %s is not a regular file", name);
		return -EINVAL;
	}
	*size = st.st_size;
	n = pread(fd, &h, sizeof(h), 0);
	if (n == sizeof(h) && h.magic == IMG_MAGIC && h.kind != IMG_PAGES &&
	    h.kind != IMG_SHMEM_PAGES && st.st_size >= (off_t)(sizeof(h) + sizeof(t))) {
		if (pread(fd, &t, sizeof(t), st.st_size - sizeof(t)) != sizeof(t)) {
			pr_perror("cannot read image %s", name);
			return -EIO;
		}
		*crc = t.crc;
		return 0;
	}
	n = pread(fd, buf, sizeof(buf), 0);
	if (n < 0) {
		pr_perror("cannot read image %s", name);
		return -EIO;
	}
	c = crc32c(0, buf, n);
	if (st.st_size > (off_t)sizeof(buf)) {
		n = pread(fd, buf, sizeof(buf), st.st_size - sizeof(buf));
		if (n != sizeof(buf)) {
			pr_perror("cannot read image %s", name);
			return -EIO;
		}
		c = crc32c(c, buf, n);
	}
	*crc = c;
	return 0;
}

int img_peek_kind(int dirfd, const char *name, uint32_t *kind)
{
	_cleanup_close_ int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC);
	struct img_header h;

	if (fd < 0)
		return -errno;
	if (read(fd, &h, sizeof(h)) != sizeof(h) || h.magic != IMG_MAGIC)
		return -EINVAL;
	*kind = h.kind;
	return 0;
}

int img_bytes(ProtobufCBinaryData *b, const void *src, size_t len)
{
	b->data = malloc(len ? len : 1);
	if (!b->data)
		return -ENOMEM;
	if (len)
		memcpy(b->data, src, len);
	b->len = len;
	return 0;
}

/* ---------------------------------------------- a caller's own files */

static int msgfile_kind(const char *name, uint32_t kind)
{
	if (kind < CR_MSGFILE_KIND_MIN) {
		pr_err("%s: kind %u is an image kind of the engine's", name, kind);
		return -EINVAL;
	}
	return 0;
}

int cr_msgfile_write(int dirfd, const char *name, uint32_t kind, const ProtobufCMessage *m)
{
	struct img_writer w;
	int ret = msgfile_kind(name, kind);

	if (!ret)
		ret = img_writer_open(&w, dirfd, name, kind);
	if (ret)
		return ret;
	img_write(&w, m);
	return img_writer_close(&w);
}

/* the one message of an open reader, which it closes */
static int msgfile_message(struct img_reader *r, const char *name,
			   const ProtobufCMessageDescriptor *desc, ProtobufCMessage **out)
{
	int ret = img_read(r, desc, out);

	img_reader_close(r);
	if (ret == 0) {
		pr_err("%s is damaged: it is empty", name);
		return -EINVAL;
	}
	return ret < 0 ? ret : 0;
}

int cr_msgfile_read(int dirfd, const char *name, uint32_t kind,
		    const ProtobufCMessageDescriptor *desc, ProtobufCMessage **out)
{
	struct img_reader r;
	int ret = msgfile_kind(name, kind);

	*out = NULL;
	if (!ret)
		ret = img_reader_open(&r, dirfd, name, kind);
	if (ret)
		return ret;
	return msgfile_message(&r, name, desc, out);
}

int cr_msgfile_parse(const char *name, uint32_t kind, const unsigned char *data, size_t len,
		     const ProtobufCMessageDescriptor *desc, ProtobufCMessage **out)
{
	struct img_reader r;
	unsigned char *copy;
	int ret = msgfile_kind(name, kind);

	*out = NULL;
	if (ret)
		return ret;
	/* the reader owns what it reads: a copy, the caller's data stays */
	copy = malloc(len ? len : 1);
	if (!copy) {
		pr_err("%s: out of memory (%zu bytes)", name, len);
		return -ENOMEM;
	}
	memcpy(copy, data, len);
	ret = img_reader_from_buffer(&r, name, kind, copy, len);
	if (ret) {
		free(copy);
		return ret;
	}
	return msgfile_message(&r, name, desc, out);
}
