/* `kupdate show`: every image of a directory, decoded generically through
 * the protobuf-c descriptors, as text or JSON. */
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>

#include "cr.h"
#include "image.h"
#include "log.h"
#include "util.h"

static void json_str(FILE *out, const char *s)
{
	fputc('"', out);
	for (; *s; s++) {
		unsigned char ch = *s;

		if (ch == '"' || ch == '\\')
			fprintf(out, "\\%c", ch);
		else if (ch < 0x20)
			fprintf(out, "\\u%04x", ch);
		else
			fputc(ch, out);
	}
	fputc('"', out);
}

static bool hex_field(const char *name)
{
	return strstr(name, "addr") || strstr(name, "start") || strstr(name, "end") ||
	       !strcmp(name, "ip") || !strcmp(name, "sp") || !strcmp(name, "vaddr") ||
	       strstr(name, "brk") || !strcmp(name, "clear_child_tid") ||
	       !strcmp(name, "robust_list") || !strcmp(name, "abi_pointer") ||
	       !strcmp(name, "fs_base") || !strcmp(name, "gs_base") || !strcmp(name, "sigmask") ||
	       !strcmp(name, "xfeatures") || !strcmp(name, "pgoff") || !strcmp(name, "offset");
}

static void print_msg(FILE *out, const ProtobufCMessage *m, bool json, int indent);

static void print_value(FILE *out, const ProtobufCFieldDescriptor *f, const void *p, bool json,
			int indent)
{
	switch (f->type) {
	case PROTOBUF_C_TYPE_INT32:
	case PROTOBUF_C_TYPE_SINT32:
	case PROTOBUF_C_TYPE_SFIXED32:
		fprintf(out, "%" PRId32, *(const int32_t *)p);
		break;
	case PROTOBUF_C_TYPE_UINT32:
	case PROTOBUF_C_TYPE_FIXED32:
		fprintf(out, !json && hex_field(f->name) ? "0x%" PRIx32 : "%" PRIu32,
			*(const uint32_t *)p);
		break;
	case PROTOBUF_C_TYPE_INT64:
	case PROTOBUF_C_TYPE_SINT64:
	case PROTOBUF_C_TYPE_SFIXED64:
		fprintf(out, "%" PRId64, *(const int64_t *)p);
		break;
	case PROTOBUF_C_TYPE_UINT64:
	case PROTOBUF_C_TYPE_FIXED64:
		fprintf(out, !json && hex_field(f->name) ? "0x%" PRIx64 : "%" PRIu64,
			*(const uint64_t *)p);
		break;
	case PROTOBUF_C_TYPE_BOOL:
		fputs(*(const protobuf_c_boolean *)p ? "true" : "false", out);
		break;
	case PROTOBUF_C_TYPE_FLOAT:
		fprintf(out, "%g", *(const float *)p);
		break;
	case PROTOBUF_C_TYPE_DOUBLE:
		fprintf(out, "%g", *(const double *)p);
		break;
	case PROTOBUF_C_TYPE_ENUM: {
		const ProtobufCEnumValue *ev =
			protobuf_c_enum_descriptor_get_value(f->descriptor, *(const int *)p);
		if (json)
			json_str(out, ev ? ev->name : "?");
		else
			fputs(ev ? ev->name : "?", out);
		break;
	}
	case PROTOBUF_C_TYPE_STRING: {
		const char *s = *(char *const *)p;
		if (json)
			json_str(out, s ? s : "");
		else
			fprintf(out, "\"%s\"", s ? s : "");
		break;
	}
	case PROTOBUF_C_TYPE_BYTES: {
		const ProtobufCBinaryData *b = p;
		size_t show = json ? b->len : MIN(b->len, (size_t)32);

		fputs(json ? "\"" : "", out);
		for (size_t i = 0; i < show; i++)
			fprintf(out, "%02x", b->data[i]);
		if (!json && show < b->len)
			fprintf(out, "... (%zu bytes)", b->len);
		fputs(json ? "\"" : "", out);
		break;
	}
	case PROTOBUF_C_TYPE_MESSAGE:
		print_msg(out, *(ProtobufCMessage *const *)p, json, indent + 1);
		break;
	}
}

static size_t type_size(ProtobufCType t)
{
	switch (t) {
	case PROTOBUF_C_TYPE_INT64:
	case PROTOBUF_C_TYPE_SINT64:
	case PROTOBUF_C_TYPE_SFIXED64:
	case PROTOBUF_C_TYPE_UINT64:
	case PROTOBUF_C_TYPE_FIXED64:
	case PROTOBUF_C_TYPE_DOUBLE:
		return 8;
	case PROTOBUF_C_TYPE_STRING:
	case PROTOBUF_C_TYPE_MESSAGE:
		return sizeof(void *);
	case PROTOBUF_C_TYPE_BYTES:
		return sizeof(ProtobufCBinaryData);
	case PROTOBUF_C_TYPE_BOOL:
		return sizeof(protobuf_c_boolean);
	default:
		return 4;
	}
}

static bool field_present(const ProtobufCMessage *m, const ProtobufCFieldDescriptor *f)
{
	const char *base = (const char *)m;

	if (f->label == PROTOBUF_C_LABEL_REQUIRED)
		return true;
	if (f->label == PROTOBUF_C_LABEL_REPEATED)
		return *(const size_t *)(base + f->quantifier_offset) > 0;
	if (f->type == PROTOBUF_C_TYPE_STRING || f->type == PROTOBUF_C_TYPE_MESSAGE)
		return *(void *const *)(base + f->offset) != NULL;
	return *(const protobuf_c_boolean *)(base + f->quantifier_offset);
}

static void print_msg(FILE *out, const ProtobufCMessage *m, bool json, int indent)
{
	const ProtobufCMessageDescriptor *d = m->descriptor;
	const char *base = (const char *)m;
	bool first = true;

	fputs(json ? "{" : "{\n", out);
	for (unsigned i = 0; i < d->n_fields; i++) {
		const ProtobufCFieldDescriptor *f = &d->fields[i];

		if (!field_present(m, f))
			continue;
		if (json)
			fprintf(out, "%s\"%s\":", first ? "" : ",", f->name);
		else
			fprintf(out, "%*s%s: ", (indent + 1) * 2, "", f->name);
		first = false;
		if (f->label == PROTOBUF_C_LABEL_REPEATED) {
			size_t n = *(const size_t *)(base + f->quantifier_offset);
			const char *arr = *(char *const *)(base + f->offset);

			fputc('[', out);
			for (size_t k = 0; k < n; k++) {
				if (k)
					fputs(json ? "," : ", ", out);
				print_value(out, f, arr + k * type_size(f->type), json, indent);
			}
			fputc(']', out);
		} else {
			print_value(out, f, base + f->offset, json, indent);
		}
		if (!json)
			fputc('\n', out);
	}
	if (json)
		fputc('}', out);
	else
		fprintf(out, "%*s}", indent * 2, "");
}

static int show_image(int dirfd, const char *name, bool json, FILE *out, bool *first_img)
{
	struct img_reader r;
	uint32_t kind;
	const ProtobufCMessageDescriptor *first, *rest;
	ProtobufCMessage *m;
	int ret, n = 0;

	ret = img_peek_kind(dirfd, name, &kind);
	if (ret) {
		pr_err("%s is not a kupdate image", name);
		return ret;
	}
	if (kind == IMG_PAGES || kind == IMG_SHMEM_PAGES) {
		struct pages_header h;
		_cleanup_close_ int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC);

		if (fd < 0 || pread(fd, &h, sizeof(h), 0) != sizeof(h)) {
			pr_err("cannot read %s", name);
			return -EIO;
		}
		if (json)
			fprintf(out,
				"%s\"%s\":{\"kind\":\"pages\",\"pid\":%u,\"nr_pages\":%" PRIu64 "}",
				*first_img ? "" : ",", name, h.pid, h.nr_pages);
		else
			fprintf(out, "== %s (%s): %s %u, %" PRIu64 " pages of raw data\n", name,
				img_kind_name(kind), kind == IMG_PAGES ? "pid" : "object", h.pid,
				h.nr_pages);
		*first_img = false;
		return 0;
	}
	if (img_kind_messages(kind, &first, &rest)) {
		pr_err("%s holds an unknown kind of image (%u)", name, kind);
		return -EINVAL;
	}
	ret = img_reader_open(&r, dirfd, name, kind);
	if (ret)
		return ret;
	if (json)
		fprintf(out, "%s\"%s\":{\"kind\":\"%s\",\"records\":[", *first_img ? "" : ",", name,
			img_kind_name(kind));
	else
		fprintf(out, "== %s (%s, %u records)\n", name, img_kind_name(kind), r.nr);
	*first_img = false;
	while ((ret = img_read(&r, n ? rest : first, &m)) > 0) {
		if (json && n)
			fputc(',', out);
		print_msg(out, m, json, 0);
		if (!json)
			fputc('\n', out);
		protobuf_c_message_free_unpacked(m, NULL);
		n++;
	}
	if (json)
		fputs("]}", out);
	img_reader_close(&r);
	return ret < 0 ? ret : 0;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int cr_show(const char *imgdir, bool json, FILE *out)
{
	_cleanup_close_ int dirfd = open(imgdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d;
	struct dirent *de;
	char **names = NULL;
	size_t n = 0;
	bool first = true;
	int ret = 0;

	if (dirfd < 0)
		return pr_errno("cannot open image directory %s", imgdir);
	d = opendir(imgdir);
	while (d && (de = readdir(d))) {
		size_t l = strlen(de->d_name);
		char **nn;

		if (l < 5 || strcmp(de->d_name + l - 4, ".img"))
			continue;
		nn = realloc(names, (n + 1) * sizeof(*nn));
		if (!nn)
			break;
		names = nn;
		names[n] = strdup(de->d_name);
		if (!names[n])
			break;
		n++;
	}
	if (d)
		closedir(d);
	if (n)
		qsort(names, n, sizeof(*names), cmp_str);
	if (!n) {
		pr_err("%s holds no images", imgdir);
		ret = -ENOENT;
	}
	if (json)
		fputc('{', out);
	for (size_t i = 0; i < n; i++) {
		int r = show_image(dirfd, names[i], json, out, &first);
		if (r && !ret)
			ret = r;
		free(names[i]);
	}
	free(names);
	if (json)
		fputs("}\n", out);
	return ret;
}
