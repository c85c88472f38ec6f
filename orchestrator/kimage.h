/* What a kernel image or config file says about the kernel it describes
 * (kupdate check): its release, its configuration when it can be read
 * (CONFIG_IKCONFIG in the image, in the style of scripts/extract-ikconfig,
 * or a config file, plain or gzipped), and whether it carries kupdate's
 * pid_reserve= patch. */
#ifndef KUPDATE_KIMAGE_H
#define KUPDATE_KIMAGE_H

#include <stddef.h>

struct kimage_info {
	const char *kind;	   /* "bzImage", "vmlinux", "config" */
	const char *compression;   /* of the bzImage payload or the file: "gzip", "xz"... */
	char release[128];	   /* "6.12.57-kupdate", "" if unknown */
	int major, minor;	   /* from the release or the config header, 0 if unknown */
	char *config;		   /* the .config text, NULL if it cannot be read */
	const char *config_source; /* "IKCONFIG" (in the image), "file", or "file beside
				    * the image" (its config-RELEASE) */
	char why[256];		   /* why config is NULL */
	int pid_reserve;	   /* the image has kupdate's patch: 1, 0, -1 cannot tell */
};

/* Read PATH: a bzImage, a vmlinux ELF, or a config file (plain or gzip).
 * 0 (ki filled, ki->config may be NULL with ki->why saying why), or
 * -errno with the reason logged. */
int kimage_read(const char *path, struct kimage_info *ki);
void kimage_free(struct kimage_info *ki);

/* The value of option NAME ("CONFIG_X") in a .config text: "y", "m", a
 * string or number as written; NULL when it is not set. */
const char *kconfig_get(const char *config, const char *name, char *buf, size_t len);

#endif
