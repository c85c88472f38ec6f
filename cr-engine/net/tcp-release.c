/* A restored TCP connection let go, once the whole tree is ready to run:
 * out of repair mode, what it had never sent sent, and closed as far as
 * it was closed (its own FIN sent again, the peer's delivered again). */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <netinet/ip6.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <linux/sockios.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "files.h"
#include "log.h"
#include "netlock.h"
#include "proc.h"
#include "restore.h"
#include "tcp-int.h"
#include "tcp-rto.h"
#include "tcp.h"
#include "util.h"

static int tcp_state_of(int sk)
{
	struct tcp_info ti;
	socklen_t l = sizeof(ti);

	return getsockopt(sk, SOL_TCP, TCP_INFO, &ti, &l) ? -errno : ti.tcpi_state;
}

/* The peer's FIN, delivered again.
 *
 * Repair mode sets the receive sequence and queue but has no FIN to put
 * after them: the connection is rebuilt up to the sequence number before
 * the peer's FIN, and once it is an ordinary socket again, a FIN|ACK
 * segment from the peer's address and port, at that sequence number, is
 * put to it through a raw socket (IP_HDRINCL, in our network namespace:
 * the packet loops back to the local address).  The connection handles it
 * as it handled the peer's: it queues the FIN after its data (the program
 * reads them, then EOF), moves to CLOSE_WAIT (or CLOSING) and acknowledges
 * it, which the peer, that had it acknowledged already, takes for a
 * duplicate.  The peer does not send it again, and needs not.
 *
 * The segment acknowledges snd_una exactly: nothing new (one acknowledging
 * what was never received would lose it), and not older (a restored
 * socket has acknowledged no bytes yet, and drops any ACK before snd_una as
 * a blind injection).  snd_una is read just before (write_seq - SIOCOUTQ);
 * an acknowledgement of the peer's arriving in between moves it, the
 * segment is dropped, and it is sent again (at most FIN_TRIES times).  Its
 * window is the peer's, as dumped (it updates the socket's).  It has no
 * timestamp option (PAWS checks only segments that have one).  The lock
 * drops what comes from the peer: it is lifted first (tcp_finish_restore),
 * or, where the caller keeps it, lifted for this connection meanwhile. */
enum { FIN_TRIES = 4, FIN_WAIT_MS = 50 };

static uint16_t tcp_csum(const void *pseudo, size_t plen, const struct tcphdr *th)
{
	uint8_t buf[40 + sizeof(*th)];

	memcpy(buf, pseudo, plen);
	memcpy(buf + plen, th, sizeof(*th));
	return inet_csum(buf, plen + sizeof(*th));
}

/* the sequence number after the last byte the peer sent: its FIN's */
static uint32_t rcv_data_end(const InetSk *s)
{
	return s->tcp->rcv_seq - tcp_fin_received_state(s->state);
}

/* still without the peer's FIN */
static bool fin_awaited(int st)
{
	return st == TCP_ESTABLISHED || st == TCP_FIN_WAIT1 || st == TCP_FIN_WAIT2;
}

static int deliver_fin(int sk, const InetSk *s, uint32_t write_seq, bool locked, const char *what)
{
	const TcpStream *t = s->tcp;
	struct cr_conn c;
	bool v4;
	int raw, ret = -ETIMEDOUT, st = 0;
	uint32_t wnd =
		t->has_snd_wnd ? t->snd_wnd >> (t->has_snd_wscale ? t->snd_wscale : 0) : 65535;

	inet_conn(s, &c);
	v4 = conn_is_v4(&c);
	raw = socket(v4 ? AF_INET : AF_INET6, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_TCP);
	if (raw < 0 ||
	    setsockopt(raw, v4 ? IPPROTO_IP : IPPROTO_IPV6, v4 ? IP_HDRINCL : 36 /* IPV6_HDRINCL */,
		       &(int){ 1 }, sizeof(int))) {
		ret = pr_errno("%s: cannot open a raw TCP socket to deliver its peer's FIN", what);
		if (raw >= 0)
			close(raw);
		return ret;
	}
	if (locked)
		netlock_del(&c, 1);
	for (int i = 0; i < FIN_TRIES; i++) {
		struct tcphdr th;
		int outq = 0;
		ssize_t n;

		st = tcp_state_of(sk);
		if (st < 0 || !fin_awaited(st)) {
			ret = 0; /* it has it (the peer sent it again meanwhile), or is gone */
			break;
		}
		if (ioctl(sk, SIOCOUTQ, &outq)) {
			ret = pr_errno("%s: cannot read its send queue's length", what);
			break;
		}
		memset(&th, 0, sizeof(th));
		th.th_sport = htons(c.rport);
		th.th_dport = htons(c.lport);
		th.th_seq = htonl(rcv_data_end(s));
		th.th_ack = htonl(write_seq - (uint32_t)outq);
		th.th_off = sizeof(th) / 4;
		th.th_flags = TH_FIN | TH_ACK;
		th.th_win = htons(wnd > 65535 ? 65535 : wnd);
		if (v4) {
			struct {
				struct iphdr ip;
				struct tcphdr tcp;
			} m;
			struct sockaddr_in to = { .sin_family = AF_INET };
			uint8_t ph[12] = { 0 };
			const uint8_t *la = c.family == AF_INET ? c.laddr : c.laddr + 12;
			const uint8_t *ra = c.family == AF_INET ? c.raddr : c.raddr + 12;

			memcpy(ph, ra, 4);
			memcpy(ph + 4, la, 4);
			ph[9] = IPPROTO_TCP;
			ph[11] = sizeof(th);
			th.th_sum = tcp_csum(ph, sizeof(ph), &th);
			memset(&m.ip, 0, sizeof(m.ip));
			m.ip.version = 4;
			m.ip.ihl = 5;
			m.ip.tot_len = htons(sizeof(m));
			m.ip.ttl = 64;
			m.ip.protocol = IPPROTO_TCP;
			memcpy(&m.ip.saddr, ra, 4);
			memcpy(&m.ip.daddr, la, 4);
			m.tcp = th;
			memcpy(&to.sin_addr, la, 4);
			n = sendto(raw, &m, sizeof(m), 0, (void *)&to, sizeof(to));
		} else {
			struct {
				struct ip6_hdr ip;
				struct tcphdr tcp;
			} m;
			struct sockaddr_in6 to = { .sin6_family = AF_INET6 };
			uint8_t ph[40] = { 0 };

			memcpy(ph, c.raddr, 16);
			memcpy(ph + 16, c.laddr, 16);
			ph[35] = sizeof(th);
			ph[39] = IPPROTO_TCP;
			th.th_sum = tcp_csum(ph, sizeof(ph), &th);
			memset(&m.ip, 0, sizeof(m.ip));
			m.ip.ip6_flow = htonl(6u << 28);
			m.ip.ip6_plen = htons(sizeof(th));
			m.ip.ip6_nxt = IPPROTO_TCP;
			m.ip.ip6_hlim = 64;
			memcpy(&m.ip.ip6_src, c.raddr, 16);
			memcpy(&m.ip.ip6_dst, c.laddr, 16);
			m.tcp = th;
			memcpy(&to.sin6_addr, c.laddr, 16);
			n = sendto(raw, &m, sizeof(m), 0, (void *)&to, sizeof(to));
		}
		if (n < 0) {
			ret = pr_errno("%s: cannot send its peer's FIN to it", what);
			break;
		}
		/* it loops back at once, mostly before sendto returns */
		for (int ms = 0; ms < FIN_WAIT_MS; ms++) {
			st = tcp_state_of(sk);
			if (st < 0 || !fin_awaited(st))
				break;
			usleep(1000);
		}
	}
	if (locked)
		netlock_add(&c, 1);
	close(raw);
	if (ret == -ETIMEDOUT)
		pr_err("%s: its peer's FIN, sent to it %d times, did not reach it (state %s)", what,
		       FIN_TRIES, tcp_state_name(st));
	else if (!ret)
		pr_debug("%s: its peer's FIN delivered: state %s", what, tcp_state_name(st));
	return ret;
}

static int shut(int sk, int how, const char *what)
{
	if (shutdown(sk, how)) {
		int ret = -errno;
		pr_perror("%s: cannot shut it for %s again", what,
			  how == SHUT_WR ? "writing" : "reading");
		return ret;
	}
	return 0;
}

/* After the lock is lifted: leave repair mode (window probes go out),
 * send what had never been sent, and close it as far as it was closed:
 * its own FIN sent again after its data (a shutdown: the FIN goes out at
 * the sequence number it had, a duplicate for a peer that had it, or
 * once the window lets it), the peer's delivered (deliver_fin), in the
 * order that leaves it in its state (CLOSING: its FIN first; LAST_ACK:
 * the peer's), and a shutdown for reading that no FIN made. */
int inet_release(int sk, const InetSk *s, bool locked, const char *what)
{
	const TcpStream *t = s->tcp;
	bool fin_out = tcp_fin_sent_state(s->state), fin_in = tcp_fin_received_state(s->state);
	int ret = tcp_repair_off(sk, TCP_RESUME_PROBES, what);

	if (!ret)
		ret = tcp_repair_reuseaddr(sk, s->opts && s->opts->reuseaddr, what);
	if (ret)
		return ret;
	if (t && t->unsent)
		ret = tcp_repair_send_unsent(
			sk, t->outq.data + t->outq.len - t->unsent, t->unsent,
			s->opts && s->opts->has_buf_lock ? (int)s->opts->buf_lock : -1, what);
	if (!ret && fin_out && s->state != TCP_LAST_ACK)
		ret = shut(sk, SHUT_WR, what);
	if (!ret && fin_in)
		ret = deliver_fin(sk, s, t->snd_seq - (s->state == TCP_LAST_ACK), locked, what);
	if (!ret && s->state == TCP_LAST_ACK)
		ret = shut(sk, SHUT_WR, what);
	if (!ret && !fin_in && s->has_shutdown && (s->shutdown & RCV_SHUTDOWN))
		ret = shut(sk, SHUT_RD, what);
	return ret;
}

/* file f is held by a process of namespace here, the first that holds it */
static bool held_in(const struct rfiles *files, size_t f, const struct rproc *procs, size_t nr,
		    const uint64_t *ns, uint64_t here)
{
	for (size_t i = 0; i < nr; i++)
		for (size_t k = 0; k < procs[i].nr_fds; k++)
			if (procs[i].fds[k]->file_id == files->files[f]->id)
				return ns[i] == here;
	return false;
}

/* TCP connections: lift the lock, then leave repair mode (which sends a
 * window probe, so the peer learns at once that its segments get through
 * again), send what had never been sent, and cut the peer's retransmission
 * timeout short (above).  The tree is still stopped. */
static int finish_in(struct rfiles *files, struct rproc *procs, size_t nr, const uint64_t *ns,
		     uint64_t here, bool unlock, bool rto_revert)
{
	struct rto_revert rr = RTO_REVERT_INIT;
	struct cr_conn *conns = NULL;
	size_t n = 0;
	int ret = 0;
	bool *done = calloc(files->nr_files ? files->nr_files : 1, sizeof(bool));

	if (!done)
		return -ENOMEM;
	for (size_t f = 0; f < files->nr_files; f++) {
		struct cr_conn *nc;

		if (!inet_is_repaired(files->files[f]) || !held_in(files, f, procs, nr, ns, here))
			continue;
		nc = xrealloc_array(conns, n + 1, sizeof(*nc));
		if (!nc) {
			free(conns);
			free(done);
			return -ENOMEM;
		}
		conns = nc;
		inet_conn(files->files[f]->isk, &conns[n++]);
	}
	if (n && unlock)
		netlock_del(conns, n);
	for (size_t i = 0; i < nr && !ret; i++) {
		struct rproc *rp = &procs[i];
		int pidfd = -1;

		if (ns[i] != here)
			continue;
		for (size_t k = 0; k < rp->nr_fds && !ret; k++) {
			const FileEntry *fe = NULL;
			size_t fi;
			char what[96];
			int sk;

			for (fi = 0; fi < files->nr_files; fi++)
				if (files->files[fi]->id == rp->fds[k]->file_id) {
					fe = files->files[fi];
					break;
				}
			if (!fe || !inet_is_repaired(fe) || done[fi] ||
			    !held_in(files, fi, procs, nr, ns, here))
				continue;
			done[fi] = true;
			if (pidfd < 0)
				pidfd = syscall(SYS_pidfd_open, rp->pid, 0);
			sk = pidfd < 0 ? -1 : syscall(SYS_pidfd_getfd, pidfd, rp->fds[k]->fd, 0);
			if (sk < 0) {
				ret = pr_errno(
					"pid %d: fd %d: cannot reach the restored connection",
					rp->pid, rp->fds[k]->fd);
				break;
			}
			snprintf(what, sizeof(what), "pid %d: fd %d", rp->pid, rp->fds[k]->fd);
			ret = inet_release(sk, fe->isk, !unlock, what);
			close(sk);
			if (!ret && rto_revert && unlock && fe->isk->tcp) {
				struct cr_conn c;
				uint32_t seqs[3];

				inet_conn(fe->isk, &c);
				rto_revert_send(&rr, &c, seqs,
						peer_una_candidates(fe->isk->tcp, seqs), conns, n,
						what);
			}
		}
		if (pidfd >= 0)
			close(pidfd);
	}
	rto_revert_report(&rr);
	free(conns);
	free(done);
	return ret;
}

struct finish_arg {
	struct rfiles *files;
	struct rproc *procs;
	size_t nr;
	const uint64_t *ns;
	uint64_t here;
	bool unlock, rto_revert;
	int ret;
};

static void *finish_thread(void *arg)
{
	struct finish_arg *a = arg;

	/* the lock of that namespace: its table goes once empty */
	netlock_in_tree_netns(true);
	a->ret = finish_in(a->files, a->procs, a->nr, a->ns, a->here, a->unlock, a->rto_revert);
	return NULL;
}

/* TCP connections, in each network namespace the tree's processes live
 * in: the tree's (the calling thread's), and those its containers made
 * (nsmade.c), where they are locked, released and their peers' timers
 * cut short by a thread that joined the namespace */
int tcp_finish_restore(struct rfiles *files, struct rproc *procs, size_t nr, bool unlock,
		       bool rto_revert)
{
	uint64_t *ns = calloc(nr + 1, sizeof(*ns)), self;
	struct stat st;
	int ret;

	if (!ns)
		return -ENOMEM;
	if (stat("/proc/thread-self/ns/net", &st)) {
		free(ns);
		return pr_errno("cannot look at kupdate's network namespace");
	}
	self = st.st_ino;
	for (size_t i = 0; i < nr; i++) {
		char path[64];

		snprintf(path, sizeof(path), "/proc/%d/ns/net", procs[i].pid);
		ns[i] = procs[i].zombie || stat(path, &st) ? self : st.st_ino;
	}
	ret = finish_in(files, procs, nr, ns, self, unlock, rto_revert);
	for (size_t i = 0; i < nr && !ret; i++) {
		struct finish_arg a = { .files = files,
					.procs = procs,
					.nr = nr,
					.ns = ns,
					.here = ns[i],
					.unlock = unlock,
					.rto_revert = rto_revert };
		bool seen = ns[i] == self;

		for (size_t k = 0; k < i && !seen; k++)
			seen = ns[k] == ns[i];
		if (seen)
			continue;
		ret = proc_run_in_ns(procs[i].pid, "net", finish_thread, &a);
		if (!ret)
			ret = a.ret;
	}
	free(ns);
	return ret;
}
