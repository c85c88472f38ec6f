/* One protobuf message in a file of the engine's image container (header
 * with magic, kind and version; the record with its length; a trailer with
 * the record count and a crc32c of everything before it: see
 * kupdate-images(5)), for a caller's own files: the orchestrator's cycle
 * manifest and unit status.  The engine knows nothing of what they hold.
 *
 * kind tells one file of the caller's from another; it is
 * CR_MSGFILE_KIND_MIN or above, never the kind of an image of the engine's.
 * The file is written under a temporary name and renamed into place (not
 * synced: the caller syncs what it must).  Errors are logged, naming the
 * file and what is wrong with it. */
#ifndef CR_MSGFILE_H
#define CR_MSGFILE_H

#include <stddef.h>
#include <stdint.h>
#include <protobuf-c/protobuf-c.h>

#define CR_MSGFILE_KIND_MIN 100

/* name in directory dirfd: m.  0 or -errno. */
int cr_msgfile_write(int dirfd, const char *name, uint32_t kind, const ProtobufCMessage *m);
/* The message of name, checked (container, checksum, kind) and unpacked
 * as a desc into *out (the caller frees it: protobuf_c_message_free_unpacked).
 * 0, or -errno: -ENOENT if there is no such file, -EINVAL if it holds no
 * message or is damaged, -EBADMSG if its checksum or message is wrong,
 * -EPROTO if it is of another format version. */
int cr_msgfile_read(int dirfd, const char *name, uint32_t kind,
		    const ProtobufCMessageDescriptor *desc, ProtobufCMessage **out);
/* The same for a file already in memory, data (len bytes, left as it is),
 * named name in the messages. */
int cr_msgfile_parse(const char *name, uint32_t kind, const unsigned char *data, size_t len,
		     const ProtobufCMessageDescriptor *desc, ProtobufCMessage **out);

#endif
