/* vnc-client: a small RFB (VNC) client for the programs cycle test.
 *
 *   vnc-client HOST PORT PASSWORD STOPFILE
 *
 * Connects to a VNC server (RFB 3.8, VNC authentication), asks for the
 * whole screen in raw 32-bit pixels and prints "ready WxH colors N hash H"
 * (colors: distinct pixel values, hash: FNV-1a of the pixels).  Then, on
 * the same connection, it asks for one pixel every 250 ms and notes when
 * each answer comes (during a kernel update cycle the answers stop for
 * the pause).  Once STOPFILE exists it asks for the whole screen again
 * and prints "after WxH colors N hash H", "updates N, longest wait
 * between two S s", and PASS when the screen is the one captured before,
 * with more than one color (something drew on it), and answers came after
 * the longest wait; FAIL with the reason otherwise.  Every wait is
 * bounded: 15 minutes in all. */
#define OPENSSL_SUPPRESS_DEPRECATED
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <openssl/des.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static int sk;
static double deadline;

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void __attribute__((noreturn)) fail(const char *fmt, const char *arg)
{
	printf("FAIL: ");
	printf(fmt, arg);
	printf("\n");
	exit(1);
}

/* exactly n bytes, within the deadline, or fail naming what */
static void get(void *buf, size_t n, const char *what)
{
	size_t got = 0;

	while (got < n) {
		struct pollfd p = { sk, POLLIN, 0 };
		int left = (int)((deadline - now()) * 1000);
		ssize_t r;

		if (left <= 0 || poll(&p, 1, left) != 1)
			fail("no %s from the server in time", what);
		r = read(sk, (char *)buf + got, n - got);
		if (r <= 0)
			fail("the server closed the connection (reading %s)", what);
		got += r;
	}
}

static void put(const void *buf, size_t n)
{
	if (write(sk, buf, n) != (ssize_t)n)
		fail("cannot write to the server: %s", strerror(errno));
}

static uint16_t be16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static uint32_t be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* VNC authentication: the challenge encrypted with DES, the password (8
 * bytes at most, zero-padded) as key, each byte's bits reversed */
static void vnc_auth(const char *password)
{
	uint8_t ch[16], res[4];
	DES_cblock key = { 0 };
	DES_key_schedule ks;

	get(ch, sizeof(ch), "challenge");
	for (size_t i = 0; i < 8 && password[i]; i++) {
		uint8_t b = (uint8_t)password[i], r = 0;

		for (int k = 0; k < 8; k++)
			r |= ((b >> k) & 1) << (7 - k);
		key[i] = r;
	}
	DES_set_key_unchecked(&key, &ks);
	for (int i = 0; i < 16; i += 8)
		DES_ecb_encrypt((DES_cblock *)(ch + i), (DES_cblock *)(ch + i), &ks, DES_ENCRYPT);
	put(ch, sizeof(ch));
	get(res, 4, "security result");
	if (be32(res))
		fail("%s", "VNC authentication refused");
}

static uint16_t W, H;
static uint32_t *fb;

static void request(int incremental, uint16_t x, uint16_t y, uint16_t w, uint16_t h)
{
	uint8_t m[10] = { 3,	  (uint8_t)incremental,
			  x >> 8, x & 255,
			  y >> 8, y & 255,
			  w >> 8, w & 255,
			  h >> 8, h & 255 };

	put(m, sizeof(m));
}

/* server messages until a framebuffer update is read; its pixels in fb */
static void read_update(void)
{
	for (;;) {
		uint8_t t, hdr[16];

		get(&t, 1, "message");
		switch (t) {
		case 0: /* FramebufferUpdate */
			get(hdr, 3, "update");
			for (uint16_t r = 0, nr = be16(hdr + 1); r < nr; r++) {
				uint16_t x, y, w, h;
				int32_t enc;

				get(hdr, 12, "rectangle");
				x = be16(hdr), y = be16(hdr + 2), w = be16(hdr + 4),
				h = be16(hdr + 6);
				enc = (int32_t)be32(hdr + 8);
				if (enc != 0 || (uint32_t)x + w > W || (uint32_t)y + h > H)
					fail("%s", "a rectangle not raw or off the screen");
				for (uint16_t k = 0; k < h; k++)
					get(fb + (size_t)(y + k) * W + x, (size_t)w * 4, "pixels");
			}
			return;
		case 1: { /* SetColourMapEntries */
			uint8_t c[5], e[6];

			get(c, 5, "colour map");
			for (uint16_t k = 0; k < be16(c + 3); k++)
				get(e, 6, "colour");
			break;
		}
		case 2: /* Bell */
			break;
		case 3: { /* ServerCutText */
			uint8_t c[7], b;

			get(c, 7, "cut text");
			for (uint32_t k = 0; k < be32(c + 3); k++)
				get(&b, 1, "cut text");
			break;
		}
		default:
			fail("%s", "an unknown message from the server");
		}
	}
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

/* the screen's hash and its number of distinct colors */
static uint64_t screen(unsigned *colors)
{
	size_t n = (size_t)W * H;
	uint32_t *s = malloc(n * 4);
	uint64_t h = 1469598103934665603ULL;

	if (!s)
		fail("%s", "out of memory");
	for (size_t i = 0; i < n; i++) {
		s[i] = fb[i] & 0xffffff;
		for (int k = 0; k < 4; k++)
			h = (h ^ ((s[i] >> (8 * k)) & 255)) * 1099511628211ULL;
	}
	qsort(s, n, 4, cmp_u32);
	*colors = n ? 1 : 0;
	for (size_t i = 1; i < n; i++)
		*colors += s[i] != s[i - 1];
	free(s);
	return h;
}

int main(int argc, char **argv)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *ai;
	uint8_t ver[12], n, types[255], init[24];
	/* SetPixelFormat: 32 bpp, depth 24, little endian, true colour,
	 * 255 each, red at 16, green at 8, blue at 0; SetEncodings: raw */
	const uint8_t pf[20] = { 0, 0, 0, 0, 32, 24, 0, 1, 0, 255, 0, 255, 0, 255, 16, 8, 0 };
	const uint8_t enc[8] = { 2, 0, 0, 1, 0, 0, 0, 0 };
	unsigned colors, colors2;
	uint64_t ref, after;
	double last = 0, gap = 0;
	unsigned updates = 0, later = 0;
	bool vnc = false;

	if (argc != 5) {
		fprintf(stderr, "usage: vnc-client HOST PORT PASSWORD STOPFILE\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	deadline = now() + 900;
	if (getaddrinfo(argv[1], argv[2], &hints, &ai))
		fail("cannot resolve %s", argv[1]);
	sk = socket(ai->ai_family, SOCK_STREAM, 0);
	if (sk < 0 || connect(sk, ai->ai_addr, ai->ai_addrlen))
		fail("cannot connect: %s", strerror(errno));
	freeaddrinfo(ai);
	get(ver, 12, "version");
	if (memcmp(ver, "RFB 003.", 8))
		fail("%s", "not an RFB server");
	put("RFB 003.008\n", 12);
	get(&n, 1, "security types");
	if (!n)
		fail("%s", "the server refused the connection");
	get(types, n, "security types");
	for (int i = 0; i < n; i++)
		vnc = vnc || types[i] == 2;
	if (!vnc)
		fail("%s", "the server does not offer VNC authentication");
	put("\2", 1);
	vnc_auth(argv[3]);
	put("\1", 1); /* ClientInit: shared */
	get(init, 24, "server init");
	W = be16(init), H = be16(init + 2);
	for (uint32_t k = 0, nl = be32(init + 20); k < nl; k++)
		get(&n, 1, "desktop name");
	fb = calloc((size_t)W * H, 4);
	if (!fb || !W || !H)
		fail("%s", "no screen");
	put(pf, sizeof(pf));
	put(enc, sizeof(enc));
	request(0, 0, 0, W, H);
	read_update();
	ref = screen(&colors);
	printf("ready %ux%u colors %u hash %016llx\n", W, H, colors, (unsigned long long)ref);
	/* one pixel every 250 ms until the stop file exists */
	last = now();
	while (access(argv[4], F_OK)) {
		double t;

		usleep(250000);
		request(0, 0, 0, 1, 1);
		read_update();
		t = now();
		updates++;
		if (t - last > gap) {
			gap = t - last;
			later = 0;
		} else {
			later++;
		}
		last = t;
	}
	request(0, 0, 0, W, H);
	read_update();
	after = screen(&colors2);
	printf("after %ux%u colors %u hash %016llx\n", W, H, colors2, (unsigned long long)after);
	printf("updates %u, longest wait between two %.2f s, %u answers after it\n", updates, gap,
	       later);
	if (after != ref)
		fail("%s", "the screen after is not the one before");
	if (colors < 2)
		fail("%s", "nothing drew on the screen (one color)");
	if (later < 4)
		fail("%s", "no answers came after the longest wait");
	printf("PASS\n");
	return 0;
}
