/* SPDX-License-Identifier: GPL-2.0 */
/*
 * kq: the host <-> guest agent protocol over a virtio-serial port named
 * "org.kupdate.agent" (see qemu-kexec/README.md, "Agent protocol").
 *
 * Every message is one frame: an ASCII header line, then LEN raw bytes.
 *
 *     "@KQ1 " TYPE " " ID " " LEN "\n"  <LEN bytes>
 *
 * TYPE is a word, ID a decimal request id chosen by the host (0 for
 * unsolicited frames), LEN the decimal payload length (<= KQ_MAX_PAYLOAD).
 * A reader that finds anything else skips to the next "@KQ1 ".
 */
#ifndef KUPDATE_KQ_PROTO_H
#define KUPDATE_KQ_PROTO_H

#define KQ_PORT_NAME   "org.kupdate.agent"
#define KQ_MAGIC       "@KQ1 "
#define KQ_MAX_PAYLOAD (1 << 20)
#define KQ_MAX_HEADER  64

/* host -> guest */
#define KQ_PING "PING" /* payload empty; answered by PONG */
#define KQ_EXEC "EXEC" /* payload: command line for /bin/sh -c */
#define KQ_KILL "KILL" /* payload: signal number; to the command's process group */

/* guest -> host */
#define KQ_HELLO "HELLO" /* id 0, sent when the agent starts: "BOOT_ID RELEASE" */
#define KQ_PONG	 "PONG"	 /* "BOOT_ID RELEASE UPTIME" */
#define KQ_OUT	 "OUT"	 /* a chunk of the command's stdout */
#define KQ_ERR	 "ERR"	 /* a chunk of the command's stderr */
#define KQ_EXIT	 "EXIT"	 /* "STATUS": exit code, or 128+signal; 127 if it could not start */

#endif
