/* Reading a kernel image or config file for kupdate check (kimage.h).
 *
 * A bzImage (x86 boot protocol >= 2.08) says where its compressed payload
 * is (setup header: setup_sects, payload_offset, payload_length) and what
 * its release is (kernel_version).  The payload, once decompressed (zlib,
 * liblzma, libzstd, liblz4: Debian's cloud kernels are lz4), is the
 * kernel; a kernel built with CONFIG_IKCONFIG
 * holds its .config gzipped between the markers "IKCFG_ST" and "IKCFG_ED".
 * Our pid_reserve patch shows as its boot parameter's name.
 *
 * The four libraries are loaded when an image needs one (dlopen): linked,
 * every kupdate start paid for them (a boot's restores, the netlock), and
 * only check and apply read kernel images. */
#include <errno.h>
#include <fcntl.h>
#include <lzma.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include "cr-log.h"
#include "cr-util.h"
#include "kimage.h"

#define KIMAGE_MAX_INPUT  (256UL << 20) /* a kernel image or config file */
#define KIMAGE_MAX_OUTPUT (1UL << 30)	/* a decompressed kernel */

struct buf {
	unsigned char *p;
	size_t len, cap;
};

/* the decompressors' functions, loaded on first use */
static struct {
	__typeof__(inflateInit2_) *inflateInit2_;
	__typeof__(inflate) *inflate;
	__typeof__(inflateEnd) *inflateEnd;
	__typeof__(lzma_alone_decoder) *lzma_alone_decoder;
	__typeof__(lzma_stream_decoder) *lzma_stream_decoder;
	__typeof__(lzma_code) *lzma_code;
	__typeof__(lzma_end) *lzma_end;
	__typeof__(ZSTD_createDStream) *ZSTD_createDStream;
	__typeof__(ZSTD_DCtx_setParameter) *ZSTD_DCtx_setParameter;
	__typeof__(ZSTD_decompressStream) *ZSTD_decompressStream;
	__typeof__(ZSTD_isError) *ZSTD_isError;
	__typeof__(ZSTD_freeDStream) *ZSTD_freeDStream;
	/* liblz4's, as lz4.h declares it (the header is not needed to build) */
	int (*LZ4_decompress_safe)(const char *src, char *dst, int src_size, int dst_cap);
} dz;
static char dz_why[300];

/* one library each: its file, the package that has it, its functions */
enum { DZ_GZIP, DZ_XZ, DZ_ZSTD, DZ_LZ4 };
static const struct {
	const char *env, *soname, *package;
	const char *const names[5];
	void **const ptrs[5];
	size_t n;
} dz_libs[] = {
	[DZ_GZIP] = { "KUPDATE_LIBZ",
		      "libz.so.1",
		      "zlib1g",
		      { "inflateInit2_", "inflate", "inflateEnd" },
		      { (void **)&dz.inflateInit2_, (void **)&dz.inflate, (void **)&dz.inflateEnd },
		      3 },
	[DZ_XZ] = { "KUPDATE_LIBLZMA",
		    "liblzma.so.5",
		    "liblzma5",
		    { "lzma_alone_decoder", "lzma_stream_decoder", "lzma_code", "lzma_end" },
		    { (void **)&dz.lzma_alone_decoder, (void **)&dz.lzma_stream_decoder,
		      (void **)&dz.lzma_code, (void **)&dz.lzma_end },
		    4 },
	[DZ_ZSTD] = { "KUPDATE_LIBZSTD",
		      "libzstd.so.1",
		      "libzstd1",
		      { "ZSTD_createDStream", "ZSTD_DCtx_setParameter", "ZSTD_decompressStream",
			"ZSTD_isError", "ZSTD_freeDStream" },
		      { (void **)&dz.ZSTD_createDStream, (void **)&dz.ZSTD_DCtx_setParameter,
			(void **)&dz.ZSTD_decompressStream, (void **)&dz.ZSTD_isError,
			(void **)&dz.ZSTD_freeDStream },
		      5 },
	[DZ_LZ4] = { "KUPDATE_LIBLZ4",
		     "liblz4.so.1",
		     "liblz4-1",
		     { "LZ4_decompress_safe" },
		     { (void **)&dz.LZ4_decompress_safe },
		     1 },
};

/* 0 once library lib is loaded; -ENOPKG (dz_why says why) if it is not
 * there (a failed load is tried again next time) */
static int dz_load(int lib)
{
	char why[200];

	if (*dz_libs[lib].ptrs[0] ||
	    !dl_load(dz_libs[lib].env, dz_libs[lib].soname, dz_libs[lib].names, dz_libs[lib].ptrs,
		     dz_libs[lib].n, why, sizeof(why)))
		return 0;
	snprintf(dz_why, sizeof(dz_why), "cannot load %s (%s): %s", dz_libs[lib].soname,
		 dz_libs[lib].package, why);
	return -ENOPKG;
}

static int buf_grow(struct buf *b, size_t want)
{
	size_t cap = b->cap ? b->cap : 1 << 20;
	unsigned char *n;

	if (want <= b->cap)
		return 0;
	if (want > KIMAGE_MAX_OUTPUT)
		return -EFBIG;
	while (cap < want)
		cap *= 2;
	if (cap > KIMAGE_MAX_OUTPUT)
		cap = KIMAGE_MAX_OUTPUT;
	n = realloc(b->p, cap);
	if (!n)
		return -ENOMEM;
	b->p = n;
	b->cap = cap;
	return 0;
}

/* one gzip stream (what follows it is ignored); *used gets its length */
static int gunzip(const unsigned char *in, size_t len, struct buf *out, size_t *used)
{
	z_stream z = { 0 };
	int r, ret = dz_load(DZ_GZIP);

	if (ret)
		return ret;
	if (dz.inflateInit2_(&z, 16 + MAX_WBITS, ZLIB_VERSION, (int)sizeof(z)) != Z_OK)
		return -ENOMEM;
	z.next_in = (unsigned char *)in;
	z.avail_in = len > UINT32_MAX ? UINT32_MAX : len;
	do {
		if (out->cap - out->len < (1 << 16) && (ret = buf_grow(out, out->len + (1 << 20))))
			break;
		z.next_out = out->p + out->len;
		z.avail_out = out->cap - out->len;
		r = dz.inflate(&z, Z_NO_FLUSH);
		out->len = out->cap - z.avail_out;
		if (r == Z_STREAM_END)
			break;
		if (r != Z_OK) {
			ret = -EBADMSG;
			break;
		}
	} while (1);
	if (used)
		*used = z.total_in;
	dz.inflateEnd(&z);
	return ret;
}

static int unxz(const unsigned char *in, size_t len, struct buf *out, bool alone)
{
	lzma_stream s = LZMA_STREAM_INIT;
	lzma_ret r;
	int ret = dz_load(DZ_XZ);

	if (ret)
		return ret;
	r = alone ? dz.lzma_alone_decoder(&s, UINT64_MAX)
		  : dz.lzma_stream_decoder(&s, UINT64_MAX, 0);
	if (r != LZMA_OK)
		return -ENOMEM;
	s.next_in = in;
	s.avail_in = len;
	do {
		if (out->cap - out->len < (1 << 16) && (ret = buf_grow(out, out->len + (1 << 20))))
			break;
		s.next_out = out->p + out->len;
		s.avail_out = out->cap - out->len;
		r = dz.lzma_code(&s, LZMA_FINISH);
		out->len = out->cap - s.avail_out;
		if (r == LZMA_STREAM_END)
			break;
		if (r != LZMA_OK) {
			ret = -EBADMSG;
			break;
		}
	} while (1);
	dz.lzma_end(&s);
	return ret;
}

static int unzstd(const unsigned char *in, size_t len, struct buf *out)
{
	ZSTD_DStream *d;
	ZSTD_inBuffer ib = { in, len, 0 };
	int ret = dz_load(DZ_ZSTD);

	if (ret)
		return ret;
	d = dz.ZSTD_createDStream();
	if (!d)
		return -ENOMEM;
	/* kernel images are compressed with a large window */
	dz.ZSTD_DCtx_setParameter(d, ZSTD_d_windowLogMax, 31);
	do {
		ZSTD_outBuffer ob;
		size_t r;

		if (out->cap - out->len < (1 << 16) && (ret = buf_grow(out, out->len + (1 << 20))))
			break;
		ob.dst = out->p + out->len;
		ob.size = out->cap - out->len;
		ob.pos = 0;
		r = dz.ZSTD_decompressStream(d, &ob, &ib);
		out->len += ob.pos;
		if (dz.ZSTD_isError(r)) {
			ret = -EBADMSG;
			break;
		}
		if (r == 0)
			break; /* end of the frame */
		if (ib.pos == ib.size && ob.pos < ob.size) {
			ret = -EBADMSG; /* truncated */
			break;
		}
	} while (1);
	dz.ZSTD_freeDStream(d);
	return ret;
}

/* The kernel's lz4 payload: lz4's legacy format, a magic number then
 * blocks of at most 8 MiB once decompressed, each after its compressed
 * size (32 bits, little-endian); the magic again starts another stream.
 * What cannot be a block ends it: the kernel's build appends the
 * decompressed size after the last one. */
#define LZ4_LEGACY_MAGIC 0x184c2102u
#define LZ4_LEGACY_BLOCK (8u << 20)
static uint32_t le32(const unsigned char *p)
{
	return p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static int unlz4(const unsigned char *in, size_t len, struct buf *out)
{
	size_t pos = 4;
	int ret = dz_load(DZ_LZ4), blocks = 0;

	if (ret)
		return ret;
	while (pos + 4 <= len) {
		uint32_t csz = le32(in + pos);
		int n;

		if (csz == LZ4_LEGACY_MAGIC) {
			pos += 4;
			continue;
		}
		if (!csz || csz > len - pos - 4 || csz > INT32_MAX)
			break;
		if ((ret = buf_grow(out, out->len + LZ4_LEGACY_BLOCK)))
			return ret;
		n = dz.LZ4_decompress_safe((const char *)in + pos + 4, (char *)out->p + out->len,
					   (int)csz, LZ4_LEGACY_BLOCK);
		if (n < 0)
			return -EBADMSG;
		out->len += n;
		pos += 4 + csz;
		blocks++;
	}
	return blocks ? 0 : -EBADMSG;
}

static const char *compression_of(const unsigned char *p, size_t len)
{
	if (len >= 2 && p[0] == 0x1f && (p[1] == 0x8b || p[1] == 0x9e))
		return "gzip";
	if (len >= 6 && !memcmp(p,
				"\xfd"
				"7zXZ\0",
				6))
		return "xz";
	if (len >= 4 && !memcmp(p, "\x28\xb5\x2f\xfd", 4))
		return "zstd";
	if (len >= 3 && !memcmp(p, "\x5d\x00\x00", 3))
		return "lzma";
	if (len >= 3 && !memcmp(p, "BZh", 3))
		return "bzip2";
	if (len >= 4 && !memcmp(p, "\x02\x21\x4c\x18", 4))
		return "lz4";
	if (len >= 4 && !memcmp(p, "\x89LZO", 4))
		return "lzo";
	if (len >= 4 && !memcmp(p,
				"\x7f"
				"ELF",
				4))
		return "none";
	return NULL;
}

static int decompress(const char *how, const unsigned char *p, size_t len, struct buf *out)
{
	if (!strcmp(how, "gzip"))
		return gunzip(p, len, out, NULL);
	if (!strcmp(how, "xz"))
		return unxz(p, len, out, false);
	if (!strcmp(how, "lzma"))
		return unxz(p, len, out, true);
	if (!strcmp(how, "zstd"))
		return unzstd(p, len, out);
	if (!strcmp(how, "lz4"))
		return unlz4(p, len, out);
	return -EOPNOTSUPP;
}

static void version_from_release(struct kimage_info *ki, const char *rel)
{
	int ma, mi;

	if (sscanf(rel, "%d.%d", &ma, &mi) == 2) {
		ki->major = ma;
		ki->minor = mi;
	}
}

/* "# Linux/x86 6.1.0 Kernel Configuration" */
static void version_from_config(struct kimage_info *ki)
{
	const char *l = strstr(ki->config, "# Linux/");
	char rel[64];

	if (l && sscanf(l, "# Linux/%*s %63s Kernel Configuration", rel) == 1) {
		if (!ki->major)
			version_from_release(ki, rel);
		if (!ki->release[0]) {
			char lv[64] = "";

			kconfig_get(ki->config, "CONFIG_LOCALVERSION", lv, sizeof(lv));
			if (lv[0] == '"') {
				memmove(lv, lv + 1, strlen(lv));
				lv[strcspn(lv, "\"")] = 0;
			}
			snprintf(ki->release, sizeof(ki->release), "%s%s", rel, lv);
		}
	}
}

static bool looks_like_config(const unsigned char *p, size_t len)
{
	size_t n = len < 65536 ? len : 65536;

	if (memchr(p, 0, n))
		return false;
	return (n >= 7 && !memcmp(p, "CONFIG_", 7)) || memmem(p, n, "\nCONFIG_", 8) ||
	       memmem(p, n, "\n# CONFIG_", 10);
}

/* a decompressed kernel: the configuration and the patch */
static void look_inside(struct kimage_info *ki, const unsigned char *k, size_t len)
{
	const unsigned char *p = k, *end = k + len;
	int ret;

	ki->pid_reserve = memmem(k, len, "pid_reserve=", 13) ? 1 : 0;
	while ((p = memmem(p, end - p, "IKCFG_ST", 8))) {
		struct buf cfg = { 0 };
		size_t used = 0;

		p += 8;
		ret = gunzip(p, end - p, &cfg, &used);
		if (ret == 0 && buf_grow(&cfg, cfg.len + 1) == 0) {
			cfg.p[cfg.len] = 0;
			ki->config = (char *)cfg.p;
			ki->config_source = "IKCONFIG";
			return;
		}
		free(cfg.p);
		if (ret == -ENOPKG) {
			snprintf(ki->why, sizeof(ki->why),
				 "cannot read the image's configuration: %.150s; give its config "
				 "file instead (/boot/config-RELEASE)",
				 dz_why);
			return;
		}
	}
	snprintf(ki->why, sizeof(ki->why),
		 "the image holds no configuration (built without CONFIG_IKCONFIG); give its "
		 "config file instead (/boot/config-RELEASE)");
}

static int read_bzimage(struct kimage_info *ki, const unsigned char *f, size_t len)
{
	uint16_t proto, kv;
	uint32_t poff, plen;
	size_t start;
	unsigned setup_sects = f[0x1f1] ? f[0x1f1] : 4;
	struct buf k = { 0 };
	int ret;

	ki->kind = "bzImage";
	memcpy(&proto, f + 0x206, 2);
	memcpy(&kv, f + 0x20e, 2);
	if (kv && 0x200 + (size_t)kv < len) {
		const char *s = (const char *)f + 0x200 + kv;
		size_t n = strnlen(s, len - 0x200 - kv);

		if (n < len - 0x200 - kv) { /* NUL terminated in the file */
			snprintf(ki->release, sizeof(ki->release), "%.*s", (int)strcspn(s, " "), s);
			version_from_release(ki, ki->release);
		}
	}
	if (proto < 0x208) {
		snprintf(ki->why, sizeof(ki->why),
			 "boot protocol %u.%02u is too old to locate the kernel payload",
			 proto >> 8, proto & 0xff);
		return 0;
	}
	memcpy(&poff, f + 0x248, 4);
	memcpy(&plen, f + 0x24c, 4);
	start = (size_t)(setup_sects + 1) * 512;
	if (start > len || poff > len - start || plen > len - start - poff || !plen) {
		snprintf(ki->why, sizeof(ki->why),
			 "the bzImage is damaged: its payload (%u bytes "
			 "at %zu) lies outside the file",
			 plen, start + poff);
		return 0;
	}
	ki->compression = compression_of(f + start + poff, plen);
	if (!ki->compression) {
		snprintf(ki->why, sizeof(ki->why), "unknown compression of the kernel payload");
		return 0;
	}
	ret = decompress(ki->compression, f + start + poff, plen, &k);
	if (ret == -EOPNOTSUPP) {
		snprintf(ki->why, sizeof(ki->why),
			 "the kernel is compressed with %s, which this kupdate does not read "
			 "(gzip, xz, lzma, zstd); give its config file instead",
			 ki->compression);
	} else if (ret) {
		snprintf(ki->why, sizeof(ki->why), "cannot decompress the kernel (%s): %.200s",
			 ki->compression, ret == -ENOPKG ? dz_why : strerror(-ret));
	} else {
		look_inside(ki, k.p, k.len);
	}
	free(k.p);
	return 0;
}

/* the whole file, whatever its stat size says (/proc/config.gz has none) */
static int slurp(const char *path, unsigned char **out, size_t *outlen)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct buf b = { 0 };
	struct stat st;
	int ret = 0;

	if (fd < 0 || fstat(fd, &st))
		return pr_errno("cannot open %s", path);
	if (!S_ISREG(st.st_mode) || st.st_size > (off_t)KIMAGE_MAX_INPUT) {
		pr_err("%s is not a kernel image or config file (a regular file of at most %lu "
		       "MiB)",
		       path, KIMAGE_MAX_INPUT >> 20);
		return -EINVAL;
	}
	for (;;) {
		ssize_t n;

		if (b.cap - b.len < 4096 && (ret = buf_grow(&b, b.len + 65536)))
			break;
		n = read(fd, b.p + b.len, b.cap - b.len - 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			ret = -errno;
			break;
		}
		if (n == 0)
			break;
		b.len += n;
		if (b.len > KIMAGE_MAX_INPUT) {
			ret = -EFBIG;
			break;
		}
	}
	if (!ret && !b.len)
		ret = -ENODATA;
	if (ret) {
		pr_err("cannot read %s: %s", path,
		       ret == -ENODATA ? "it is empty" : strerror(-ret));
		free(b.p);
		return ret;
	}
	b.p[b.len] = 0;
	*out = b.p;
	*outlen = b.len;
	return 0;
}

/* An image built without CONFIG_IKCONFIG, as distributions' are: its
 * config-RELEASE beside it (/boot/config-6.1.0-47-amd64 for
 * /boot/vmlinuz-6.1.0-47-amd64), if there is one. */
static void config_beside(const char *path, struct kimage_info *ki)
{
	_cleanup_free_ char *copy = xstrdup(path), *cfg = NULL;
	_cleanup_free_ unsigned char *f = NULL;
	const char *slash = copy ? strrchr(copy, '/') : NULL;
	size_t len = 0;

	if (!copy)
		return;
	if (slash)
		copy[slash - copy] = 0;
	cfg = xasprintf("%s/config-%s", slash ? (slash == copy ? "/" : copy) : ".", ki->release);
	if (!cfg || access(cfg, R_OK) || slurp(cfg, &f, &len) || !looks_like_config(f, len))
		return;
	ki->config = (char *)take_ptr(&f);
	ki->config_source = "file beside the image";
	ki->why[0] = 0;
}

int kimage_read(const char *path, struct kimage_info *ki)
{
	_cleanup_free_ unsigned char *f = NULL;
	size_t len = 0;
	int ret;

	memset(ki, 0, sizeof(*ki));
	ki->pid_reserve = -1;
	ret = slurp(path, &f, &len);
	if (ret)
		return ret;

	if (len > 0x250 && !memcmp(f + 0x202, "HdrS", 4)) {
		ret = read_bzimage(ki, f, len);
	} else if (len > 4 && !memcmp(f,
				      "\x7f"
				      "ELF",
				      4)) {
		ki->kind = "vmlinux";
		ki->compression = "none";
		look_inside(ki, f, len);
		ret = 0;
	} else if (looks_like_config(f, len)) {
		ki->kind = "config";
		ki->config = (char *)take_ptr(&f);
		ki->config_source = "file";
		ret = 0;
	} else if (compression_of(f, len) && strcmp(compression_of(f, len), "none")) {
		struct buf out = { 0 };

		ki->compression = compression_of(f, len);
		ret = decompress(ki->compression, f, len, &out);
		if (!ret && !buf_grow(&out, out.len + 1)) {
			out.p[out.len] = 0;
			if (looks_like_config(out.p, out.len)) {
				ki->kind = "config";
				ki->config = (char *)take_ptr(&out.p);
				ki->config_source = "file";
			} else if (out.len > 4 && !memcmp(out.p,
							  "\x7f"
							  "ELF",
							  4)) {
				ki->kind = "vmlinux";
				look_inside(ki, out.p, out.len);
			} else {
				ret = -EINVAL;
			}
		} else if (!ret) {
			ret = -ENOMEM;
		}
		free(out.p);
		if (ret == -ENOPKG) {
			pr_err("%s (%s compressed) cannot be read: %s", path, ki->compression,
			       dz_why);
			return ret;
		}
		if (ret) {
			pr_err("%s (%s compressed) is not a kernel image or config file: %s", path,
			       ki->compression, strerror(-ret));
			return ret;
		}
	} else {
		pr_err("%s is not a kernel image (bzImage, vmlinux) nor a kernel config file",
		       path);
		return -EINVAL;
	}
	if (!ret && !ki->config && ki->release[0])
		config_beside(path, ki);
	if (ki->config)
		version_from_config(ki);
	return ret;
}

void kimage_free(struct kimage_info *ki)
{
	free(ki->config);
	ki->config = NULL;
}

const char *kconfig_get(const char *config, const char *name, char *buf, size_t len)
{
	size_t n = strlen(name);

	for (const char *l = config; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
		if (!strncmp(l, name, n) && l[n] == '=') {
			const char *v = l + n + 1;
			size_t vl = strcspn(v, "\n");

			if (!len)
				return "";
			snprintf(buf, len, "%.*s", (int)vl, v);
			return buf;
		}
	}
	return NULL;
}
