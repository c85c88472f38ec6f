/* Image files.  Every metadata image is
 *
 *   header   u32 magic "KUPD", u32 kind, u16 version, u16 header size, u32 0
 *   records  u32 length, then that many bytes of one protobuf message
 *   trailer  u32 0xffffffff, u32 number of records, u32 crc32c of all the
 *            bytes before the trailer's crc, u32 "END!"
 *
 * The reader loads the whole file, checks header, trailer, checksum and
 * every record length before anything is decoded.  Page data is raw, in
 * pages-PID.img (and pages-PID.N.img), after a one-page header with its own
 * magic.
 */
#ifndef CR_IMAGE_H
#define CR_IMAGE_H

#include <stddef.h>
#include <stdint.h>
#include <protobuf-c/protobuf-c.h>

#define IMG_MAGIC	   0x4450554bU /* "KUPD" little endian */
#define IMG_TRAILER_MARK   0xffffffffU
#define IMG_END_MAGIC	   0x21444e45U /* "END!" */
#define IMG_FORMAT_VERSION 2	       /* 2: the inventory lists every file of the dump */
#define IMG_MAX_FILE	   (256U << 20)
#define IMG_MAX_RECORD	   (64U << 20)

enum img_kind {
	IMG_INVENTORY = 1,
	IMG_PSTREE,
	IMG_CORE,
	IMG_MM,
	IMG_PAGEMAP,
	IMG_FILES,
	IMG_FDS,
	IMG_PAGES, /* raw page data */
	IMG_SIGNALS,
	IMG_SHMEM,
	IMG_SHMEM_PAGES, /* raw page data */
	IMG_PIPES,
	IMG_TIMERS,
	IMG_GHOST,  /* an unlinked open file with its data */
	IMG_NS,	    /* the tree's own namespaces */
	IMG_TMPDIR, /* a directory of its mount namespace, saved whole */
	IMG_CGROUP, /* the control groups below the root's */
	IMG_KIND_MAX,
	/* kinds from CR_MSGFILE_KIND_MIN (100) up are a caller's own files in
	 * the same container (cr-msgfile.h): the orchestrator's cycle
	 * manifest and unit status */
};

const char *img_kind_name(uint32_t kind);
/* the messages a file of that kind holds: its first record, then the
 * others; -EINVAL for a kind that is unknown or raw data */
int img_kind_messages(uint32_t kind, const ProtobufCMessageDescriptor **first,
		      const ProtobufCMessageDescriptor **rest);

struct img_header {
	uint32_t magic;
	uint32_t kind;
	uint16_t version;
	uint16_t hdr_size;
	uint32_t reserved;
};

struct img_trailer {
	uint32_t mark;
	uint32_t nr_records;
	uint32_t crc;
	uint32_t end;
};

/* header page of pages-PID.img (and pages-PID.N.img, the page file N of a
 * dump written by several threads: pagemap.proto) */
struct pages_header {
	struct img_header h;
	uint64_t nr_pages; /* in this file */
	uint32_t pid;
	uint32_t file; /* N; 0 in pages-PID.img */
};
#define PAGES_MAX_FILES	  4
#define PAGES_DATA_OFFSET 4096UL

struct img_writer {
	int dirfd;
	char name[64];
	char tmpname[80];
	unsigned char *buf;
	size_t len, cap;
	uint32_t nr;
	int error;
};

/* Writers buffer in memory; img_writer_close writes the file under a
 * temporary name, then renames it into place. */
int img_writer_open(struct img_writer *w, int dirfd, const char *name, enum img_kind kind);
int img_write(struct img_writer *w, const ProtobufCMessage *msg);
int img_writer_close(struct img_writer *w);
/* a bytes field holding a malloc'd copy of src (len 0: an empty field) */
int img_bytes(ProtobufCBinaryData *b, const void *src, size_t len);
void img_writer_abort(struct img_writer *w);

struct img_reader {
	char name[64];
	unsigned char *data;
	size_t size;
	size_t pos;   /* next record */
	size_t end;   /* start of trailer */
	uint32_t nr;  /* records in file */
	uint32_t idx; /* records read */
	uint32_t kind;
};

/* Load and verify a whole image; errors name the file and what is wrong. */
int img_reader_open(struct img_reader *r, int dirfd, const char *name, enum img_kind kind);
/* Verify an image already in memory (takes ownership of data). */
int img_reader_from_buffer(struct img_reader *r, const char *name, enum img_kind kind,
			   unsigned char *data, size_t size);
/* Next message: 1 and *out set, 0 at the end, or -errno (logged). */
int img_read(struct img_reader *r, const ProtobufCMessageDescriptor *desc, ProtobufCMessage **out);
/* The first message of an image that must have one: 0 and *out set, or
 * -errno (logged; an empty image is damaged, -EINVAL).  The reader stays
 * open for the records that follow. */
int img_read_first(struct img_reader *r, const ProtobufCMessageDescriptor *desc,
		   ProtobufCMessage **out);
void img_reader_close(struct img_reader *r);

/* What the inventory records of a file so that one swapped in from another
 * dump is refused: its size and, for a metadata image, the checksum in its
 * trailer; for raw page data (and any file without a trailer), the crc32c
 * of its first and last page.  Errors are logged, naming the file. */
int img_fingerprint(int dirfd, const char *name, uint64_t *size, uint32_t *crc);

/* Identify an image by its header without validating the rest. */
int img_peek_kind(int dirfd, const char *name, uint32_t *kind);

#endif
