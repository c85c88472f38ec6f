#ifndef CR_TCP_REPAIR_H
#define CR_TCP_REPAIR_H

/* TCP repair: one established connection (or one in the middle of its
 * close) saved from a socket in repair mode (TCP_REPAIR) and made again in
 * a fresh socket, without a packet going out either way.
 *
 * A small library of its own: plain C types only.  The caller puts the
 * socket in repair mode (tcp_repair_on), saves it into a state
 * (tcp_repair_save), and turns the state into plain fields to record
 * (tcp_repair_export).  To restore, it makes a state over recorded fields
 * (tcp_repair_import), puts a fresh socket in repair mode and restores the
 * state into it (tcp_repair_restore), and when the connection may run
 * again, leaves repair mode (tcp_repair_off, with window probes) and sends
 * what had never been sent (tcp_repair_send_unsent).
 *
 * Errors are negative errnos; what names the connection in messages. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

/* The states a connection is saved and restored in: ESTABLISHED, or one
 * in the middle of its close (FIN_WAIT1/2, CLOSE_WAIT, LAST_ACK, CLOSING).
 * A closing connection is restored established, without its FINs (the
 * caller sends its own again and delivers the peer's). */
bool tcp_repair_state(int state);
/* it had sent its FIN (which takes one sequence number) */
bool tcp_fin_sent_state(int state);
/* it had received the peer's */
bool tcp_fin_received_state(int state);

/* a connection's state, as plain fields */
struct tcp_repair_data {
	int state;	  /* its TCP state when saved (tcp_repair_state) */
	uint32_t snd_seq; /* the sequence number after its send queue (and FIN) */
	uint32_t rcv_seq; /* after its receive queue (and the peer's FIN) */
	/* the send queue: unacknowledged, then the last unsent bytes never
	 * sent; the receive queue: not read yet.  malloc'd (or NULL, empty) */
	uint8_t *outq, *inq;
	uint32_t outq_len, unsent, inq_len;
	uint32_t mss;
	bool has_wscale; /* window scaling, with these scales */
	uint32_t snd_wscale, rcv_wscale;
	bool sack, tstamp;
	bool has_timestamp; /* TCP_TIMESTAMP: its clock, for the peer to see go on */
	uint32_t timestamp;
	bool has_window; /* TCP_REPAIR_WINDOW */
	uint32_t snd_wl1, snd_wnd, max_window, rcv_wnd, rcv_wup;
	bool nodelay, cork;
	bool has_keepidle, has_keepintvl, has_keepcnt, has_user_timeout;
	uint32_t keepidle, keepintvl, keepcnt, user_timeout;
};

/* one connection's state */
struct tcp_repair;

/* Repair mode, on and off.  Off: without a window probe (probes 0) where
 * the kernel can (TCP_REPAIR_OFF_NO_WP, Linux 4.19), or with that many
 * probes, out and in again between them (a socket that cannot go back in
 * keeps the probes sent so far). */
int tcp_repair_on(int sk, const char *what);
int tcp_repair_off(int sk, int probes, const char *what);
/* leaving repair mode clears SO_REUSEADDR: set again if reuseaddr */
int tcp_repair_reuseaddr(int sk, bool reuseaddr, const char *what);

/* what the connection (in repair mode) last acknowledged: rcv_wup */
int tcp_repair_last_ack(int sk, uint32_t *rcv_wup);

/* The connection of sk, in repair mode, in state (from sock_diag) */
int tcp_repair_save(int sk, int state, struct tcp_repair **out, const char *what);
/* Its fields, into d: d's queues become the caller's (free), and c is
 * freed. */
void tcp_repair_export(struct tcp_repair *c, struct tcp_repair_data *d);
/* A state over d, which must outlive it (its queues are not copied); NULL
 * without memory */
struct tcp_repair *tcp_repair_import(const struct tcp_repair_data *d);
void tcp_repair_free(struct tcp_repair *c);

/* Restore c into the fresh socket sk, in repair mode with its options
 * set: its sequence numbers, bound to self and connected to peer, its TCP
 * options, timestamp, queues (but the unsent part), window and TCP
 * socket options. */
int tcp_repair_restore(int sk, const struct tcp_repair *c, const struct sockaddr *self,
		       socklen_t self_len, const struct sockaddr *peer, socklen_t peer_len,
		       const char *what);

/* Once out of repair mode: the last len bytes of the send queue, never
 * sent, sent the ordinary way (buf_lock: the program's SO_BUF_LOCK, or -1,
 * put back if the send buffer had to grow meanwhile). */
int tcp_repair_send_unsent(int sk, const uint8_t *p, size_t len, int buf_lock, const char *what);

#endif
